//! What the web UI has been shown of each session, so a scenario judging a web UI can tell
//! whether its reconnect fetched from the right place (spec, "Transport 3": on open the UI
//! subscribes again and refetches from the last seq it saw). The daemon notes every seq it
//! sends a browser or serves from `GET /api/sessions/:id/events`, and every such fetch.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use serde_json::Value;
use tokio::time::Instant;

/// The most sessions followed (more are not followed: a web UI under test shows a few).
const SESSIONS_MAX: usize = 10_000;

/// The most fetches remembered, the oldest forgotten first.
const FETCHES_KEPT: usize = 256;

/// The highest seqs the web was shown of a session: of any kind, and of persisted kinds (a UI
/// may count either: deltas are seen live but never served again).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Shown {
    /// The highest seq of any event.
    pub any: u64,
    /// The highest seq of a persisted event.
    pub persisted: u64,
}

/// A fetch of a session's events.
struct Fetch {
    session: String,
    after: u64,
    at: Instant,
}

#[derive(Default)]
struct Inner {
    shown: HashMap<String, Shown>,
    fetches: VecDeque<Fetch>,
    /// When the browsers were last dropped, and what each session had been shown then.
    dropped: Option<(Instant, HashMap<String, Shown>)>,
}

/// What the web was shown and asked.
#[derive(Default)]
pub struct WebSeen(Mutex<Inner>);

impl WebSeen {
    /// A browser was sent event `seq` of `session`.
    pub fn shown(&self, session: &str, seq: u64, persisted: bool) {
        let Ok(mut inner) = self.0.lock() else { return };
        if !inner.shown.contains_key(session) && inner.shown.len() >= SESSIONS_MAX {
            return;
        }
        let shown = inner.shown.entry(session.to_string()).or_default();
        shown.any = shown.any.max(seq);
        if persisted {
            shown.persisted = shown.persisted.max(seq);
        }
    }

    /// The web fetched `session`'s events after `after` and was served `events`.
    pub fn fetched(&self, session: &str, after: u64, events: &[Value]) {
        for seq in events.iter().filter_map(|e| e["seq"].as_u64()) {
            self.shown(session, seq, true);
        }
        let Ok(mut inner) = self.0.lock() else { return };
        if inner.fetches.len() >= FETCHES_KEPT {
            inner.fetches.pop_front();
        }
        inner.fetches.push_back(Fetch {
            session: session.to_string(),
            after,
            at: Instant::now(),
        });
    }

    /// The browsers' links were dropped now: what each session had been shown is kept, to be
    /// compared with the fetches after.
    pub fn dropped(&self) -> HashMap<String, Shown> {
        let Ok(mut inner) = self.0.lock() else {
            return HashMap::new();
        };
        let shown = inner.shown.clone();
        inner.dropped = Some((Instant::now(), shown.clone()));
        shown
    }

    /// The `after` of each fetch of `session` since the browsers were last dropped, oldest
    /// first, and what it had been shown at the drop.
    pub fn since_drop(&self, session: &str) -> (Vec<u64>, Shown) {
        let Ok(inner) = self.0.lock() else {
            return (Vec::new(), Shown::default());
        };
        let Some((at, shown)) = &inner.dropped else {
            return (Vec::new(), Shown::default());
        };
        let afters = inner
            .fetches
            .iter()
            .filter(|f| f.session == session && f.at >= *at)
            .map(|f| f.after)
            .collect();
        (afters, shown.get(session).copied().unwrap_or_default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fetches_count_from_the_last_drop_against_what_was_shown_then() {
        let web = WebSeen::default();
        web.shown("s", 4, true);
        web.shown("s", 5, false);
        web.fetched("s", 0, &[json!({"seq": 1}), json!({"seq": 4})]);
        assert_eq!(web.since_drop("s"), (vec![], Shown::default()));
        web.dropped();
        web.shown("s", 9, true);
        web.fetched("s", 5, &[]);
        web.fetched("other", 2, &[]);
        assert_eq!(
            web.since_drop("s"),
            (
                vec![5],
                Shown {
                    any: 5,
                    persisted: 4
                }
            )
        );
    }
}
