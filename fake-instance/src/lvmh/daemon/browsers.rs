//! The web's browser links: what one subscribes to, and the frames the daemon fans out to
//! them (the session list, the spawn jobs, a session's events).

use std::sync::Arc;

use harness::jsonrpc::Peer;
use harness::lvmh::envelope::kinds;
use harness::lvmh::rules;
use serde_json::{Value, json};

use super::Daemon;

impl Daemon {
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

    /// The `spawn_status` frame a browser opening now is sent: none while no job was told.
    pub(super) fn spawn_status_now(&self) -> Option<Value> {
        let jobs = self.spawn_jobs.lock().ok()?.clone();
        (!jobs.is_empty()).then(|| json!({"type": kinds::SPAWN_STATUS, "jobs": jobs}))
    }

    /// The browsers' links that unsubscribed from `session` last.
    pub(super) fn left_browsers(&self, session: &str) -> Vec<Arc<Peer>> {
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
    pub(super) fn browser_peers(&self, session: Option<&str>) -> Vec<Arc<Peer>> {
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
