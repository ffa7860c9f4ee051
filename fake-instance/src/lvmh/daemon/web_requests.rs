//! What the web's REST calls ask of the daemon: the session list, a session's events, and a
//! prompt or an abort routed to the session's plugin.

use harness::lvmh::envelope::{fields, kinds};
use harness::lvmh::{Envelope, rules};
use serde_json::{Map, Value, json};

use super::Daemon;

impl Daemon {
    /// `GET /api/sessions`: every session with whether its plugin is linked.
    pub fn session_list(&self) -> Vec<Value> {
        let online: Vec<String> = self
            .online
            .lock()
            .map(|o| o.keys().cloned().collect())
            .unwrap_or_default();
        let Ok(store) = self.store.lock() else {
            return Vec::new();
        };
        store
            .sessions()
            .iter()
            .filter(|(_, s)| s.info.is_object())
            .map(|(id, s)| {
                let info = &s.info;
                json!({
                    "id": id,
                    "name": info.get("name").cloned().unwrap_or(Value::Null),
                    "cwd": info.get("cwd").cloned().unwrap_or(Value::Null),
                    "model": info.get("model").cloned().unwrap_or(Value::Null),
                    "provider": info.get("provider").cloned().unwrap_or(Value::Null),
                    // Misbehaving: the spawned session is not said to be an agent's.
                    "agent": match self.misbehave.breaks_way(rules::SPAWN, "not_agent") {
                        true => json!(false),
                        false => info.get("agent").cloned().unwrap_or(json!(false)),
                    },
                    "repo": info.get("repo").cloned().unwrap_or(Value::Null),
                    "startedAt": info.get("startedAt").cloned().unwrap_or(Value::Null),
                    // A daemon told to break the rule keeps a session it ever saw online.
                    // Misbehaving (`offline_while_linked`): a linked session is said offline.
                    "online": (online.contains(id)
                        && !self.misbehave.breaks_way(rules::ONLINE, "offline_while_linked"))
                        || self.misbehave.breaks(rules::ONLINE),
                    "lastEventAt": s.last_event_at,
                })
            })
            .collect()
    }

    /// `GET /api/sessions/:id/events`: persisted events after `after`, at most `limit`.
    pub fn events(&self, id: &str, after: u64, limit: usize) -> Vec<Value> {
        self.store
            .lock()
            .map(|s| {
                let every = self.misbehave.breaks(rules::EVENTS_PER_SESSION);
                let newest = self
                    .misbehave
                    .breaks_way(rules::EVENTS_PER_SESSION, "newest_for_unknown");
                let ids: Vec<&String> = match s.sessions().contains_key(id) {
                    // Misbehaving: the route's session ignored, every session's events served.
                    _ if every => s.sessions().keys().collect(),
                    // Misbehaving: a session it does not have falls back to the newest one.
                    false if newest => s.newest_session().into_iter().collect(),
                    _ => return s.events(id, after, limit),
                };
                ids.into_iter()
                    .flat_map(|id| s.events(id, after, limit))
                    .take(limit)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Sends `prompt` to the session's plugin; false when it is offline.
    pub fn prompt(&self, id: &str, message: &str) -> Option<String> {
        let peer = self.online.lock().ok()?.get(id).cloned()?;
        let n = self
            .prompts
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            + 1;
        let prompt_id = format!("p{n}");
        let mut frame = Envelope::frame(
            kinds::PROMPT,
            id,
            0,
            fields(json!({"promptId": prompt_id, "message": message})),
        );
        if self.misbehave.breaks(rules::PROMPT_ROUTED)
            && let Some(fields) = frame.as_object_mut()
        {
            fields.remove("promptId");
        }
        if self
            .misbehave
            .breaks_way(rules::PROMPT_ROUTED, "message_object")
        {
            // Misbehaving: the message wrapped in an object, not the string itself.
            frame["message"] = json!({ "text": message });
        }
        peer.send_frame(frame);
        Some(prompt_id)
    }

    /// Sends `abort` to the session's plugin; false when it is offline.
    pub fn abort(&self, id: &str) -> bool {
        let Some(peer) = self.online.lock().ok().and_then(|o| o.get(id).cloned()) else {
            return false;
        };
        if self.misbehave.breaks(rules::ABORT_ROUTED) {
            return true;
        }
        // Misbehaving: the abort names a session other than the one it is for.
        let named = match self
            .misbehave
            .breaks_way(rules::ABORT_ROUTED, "other_session")
        {
            true => format!("{id}-other"),
            false => id.to_string(),
        };
        peer.send_frame(Envelope::frame(kinds::ABORT, &named, 0, Map::new()));
        true
    }
}
