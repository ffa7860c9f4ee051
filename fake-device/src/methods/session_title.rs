//! `_lembas/session/title`: the title a person gives a session, bounded as the CLI bounds its
//! own, kept, and told to the clients as a `title` event.

use harness::rules::{Misbehaviours, ids};
use serde_json::json;

use super::call::Call;
use crate::answers::{Answer, param_str};
use crate::open_session::TITLE_MAX;

/// What a misbehaving device's titling gets wrong; all off by default.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Faults {
    /// A session it does not have is titled as if it did.
    pub unknown_titled: bool,
    /// A title over the bound is kept whole.
    pub uncut: bool,
    /// The title is cut, and answered whole.
    pub answers_whole: bool,
    /// The title is answered, and the session keeps its old one.
    pub unapplied: bool,
    /// The title is answered now and taken a second later.
    pub late: bool,
}

impl Faults {
    /// The faults `m` asks for.
    pub(crate) fn of(m: &Misbehaviours) -> Faults {
        Faults {
            unknown_titled: m.breaks(ids::DEVICE_SESSION_UNKNOWN),
            uncut: m.breaks(ids::DEVICE_TITLE_LIMIT),
            answers_whole: m.breaks_way(ids::DEVICE_TITLE_LIMIT, "answers_whole"),
            unapplied: m.breaks(ids::DEVICE_TITLE_APPLIES),
            late: m.breaks_way(ids::DEVICE_TITLE_APPLIES, "late"),
        }
    }
}

/// Answers `_lembas/session/title`.
pub(crate) async fn answer(call: Call<'_>, faults: &Faults) -> Answer {
    let (sessions, params, client) = (call.sessions, call.params, call.client);
    let asked = param_str(params, "title")?;
    if faults.unknown_titled && sessions.session(params).await.is_err() {
        // Misbehaving: a session it does not have is titled as if it did.
        return Ok(json!({ "title": asked }));
    }
    let live = sessions.session(params).await?;
    // The spec bounds a title at 200 characters and answers with the title kept; a longer
    // one is cut rather than refused, the way the CLI's own titles are.
    let title: String = if faults.uncut {
        asked.to_string()
    } else {
        asked.chars().take(TITLE_MAX).collect()
    };
    let mut state = live.state.lock().await;
    if faults.unapplied {
        // Misbehaving: the title is answered, and the session keeps its old one.
        return Ok(json!({ "title": title }));
    }
    if faults.late {
        // Misbehaving: the title is answered now and taken a second later.
        let (live, registry, kept) = (live.clone(), sessions.registry().clone(), title.clone());
        drop(state);
        tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            let mut state = live.state.lock().await;
            state.stored.title = kept;
            registry.save(&state);
        });
        return Ok(json!({ "title": title }));
    }
    state.stored.title = title.clone();
    sessions.registry().save(&state);
    client.event(
        &state.stored.id,
        json!({ "type": "title", "id": state.stored.id, "title": title }),
    );
    // Misbehaving: the title is cut, and answered whole.
    if faults.answers_whole {
        return Ok(json!({ "title": asked }));
    }
    Ok(json!({ "title": title }))
}
