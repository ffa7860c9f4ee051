//! The web's browser links: what one subscribes to, and the frames the daemon fans out to
//! them (the session list, the spawn jobs, a session's events).

use std::sync::Arc;

use harness::jsonrpc::Peer;
use harness::lvmh::envelope::{is_persisted, kinds};
use harness::lvmh::{Envelope, rules};
use serde_json::{Value, json};

use super::{BrowserLink, Daemon};

impl Daemon {
    /// A browser's link opened: it is told the session list, and the spawn jobs while one
    /// was told.
    pub(super) fn browser_opened(&self, peer: &Arc<Peer>) {
        if let Ok(mut browsers) = self.browsers.lock() {
            browsers.insert(
                peer.link(),
                BrowserLink {
                    peer: peer.clone(),
                    subscribed: None,
                    left: None,
                },
            );
        }
        let mut list = json!({"type": kinds::SESSION_LIST, "sessions": self.session_list()});
        if self
            .misbehave
            .breaks_way(rules::GITLAB_TOKEN_HIDDEN, "in_frame")
            && let Some(token) = self
                .with_store(|s| {
                    s.setting(super::super::gitlab::TOKEN_KEY)
                        .map(str::to_string)
                })
                .flatten()
        {
            // Misbehaving: the kept GitLab token rides along in a browser's frame.
            list["gitlab"] = json!({ "token": token });
        }
        peer.send_frame(list);
        if let Some(frame) = self.spawn_status_now() {
            peer.send_frame(frame);
        }
    }

    /// Tells every browser the session list (it changed).
    pub fn list_changed(&self) {
        if self.misbehave.breaks(rules::SESSION_LIST) {
            return;
        }
        let frame = json!({"type": kinds::SESSION_LIST, "sessions": self.session_list()});
        for peer in self.browser_peers(None) {
            peer.send_frame(frame.clone());
        }
    }

    /// Tells every browser the spawn jobs.
    pub fn spawn_status_changed(&self, jobs: Vec<Value>) {
        if self.misbehave.breaks(rules::SPAWN_STATUS_PUSHED) {
            return;
        }
        // Misbehaving: the frame lists no job while one runs.
        let jobs = match self
            .misbehave
            .breaks_way(rules::SPAWN_STATUS_PUSHED, "empty_jobs")
        {
            true => Vec::new(),
            false => jobs,
        };
        if let Ok(mut told) = self.spawn_jobs.lock() {
            told.clone_from(&jobs);
        }
        let frame = json!({"type": kinds::SPAWN_STATUS, "jobs": jobs});
        for peer in self.browser_peers(None) {
            peer.send_frame(frame.clone());
        }
    }

    /// Shows a plugin's event to the browsers subscribed to its session, in an `events` batch
    /// (deltas too: they are live only).
    pub(super) fn fan_out(&self, kind: &str, envelope: &Envelope, frame: &Value) {
        // Misbehaving: the live deltas go out in batches naming another session.
        let named = match kind == kinds::MESSAGE_UPDATE
            && self
                .misbehave
                .breaks_way(rules::UPDATES_LIVE, "wrong_session")
        {
            true => format!("{}-other", envelope.session_id),
            false => envelope.session_id.clone(),
        };
        let batch = json!({
            "type": kinds::EVENTS,
            "sessionId": named,
            "after": envelope.seq.saturating_sub(1),
            "events": [frame],
        });
        let withheld = !is_persisted(kind) && self.misbehave.breaks(rules::UPDATES_LIVE);
        let mut to = self.browser_peers(Some(&envelope.session_id));
        if kind == kinds::MESSAGE_UPDATE && self.misbehave.breaks_way(rules::UNSUBSCRIBE, "deltas")
        {
            to.extend(self.left_browsers(&envelope.session_id));
        }
        for browser in to {
            if !withheld {
                browser.send_frame(batch.clone());
                self.web
                    .shown(&envelope.session_id, envelope.seq, is_persisted(kind));
            }
        }
    }

    /// The `spawn_status` frame a browser opening now is sent: none while no job was told.
    pub(super) fn spawn_status_now(&self) -> Option<Value> {
        let jobs = self.spawn_jobs.lock().ok()?.clone();
        (!jobs.is_empty()).then(|| json!({"type": kinds::SPAWN_STATUS, "jobs": jobs}))
    }

    /// The browsers' links that unsubscribed from `session` last.
    fn left_browsers(&self, session: &str) -> Vec<Arc<Peer>> {
        self.browsers
            .lock()
            .map(|b| {
                b.values()
                    .filter(|l| l.left.as_deref() == Some(session))
                    .map(|l| l.peer.clone())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The browsers' links, all or those subscribed to `session`.
    fn browser_peers(&self, session: Option<&str>) -> Vec<Arc<Peer>> {
        self.browsers
            .lock()
            .map(|b| {
                b.values()
                    .filter(|l| session.is_none_or(|s| l.subscribed.as_deref() == Some(s)))
                    .map(|l| l.peer.clone())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// A browser's frame: what it subscribes to, or unsubscribes from.
    pub(super) fn on_browser(&self, peer: &Arc<Peer>, kind: &str, frame: &Value) {
        let session = frame
            .get("sessionId")
            .and_then(Value::as_str)
            .map(str::to_string);
        if let Ok(mut browsers) = self.browsers.lock()
            && let Some(browser) = browsers.get_mut(&peer.link())
        {
            match kind {
                kinds::SUBSCRIBE => browser.subscribed = session,
                // A daemon told to break the rule keeps streaming.
                kinds::UNSUBSCRIBE if self.misbehave.breaks(rules::UNSUBSCRIBE) => {}
                kinds::UNSUBSCRIBE if browser.subscribed == session => {
                    browser.subscribed = None;
                    browser.left = session;
                }
                _ => {}
            }
        }
    }
}
