//! What the chats learn from a link's traffic, whoever caused it: the device's notifications
//! about its sessions (streamed text, announces, lets-go, deletes, turn ends, cards taken
//! down), and the `session/new` and `session/prompt` requests sent on the link.

use harness::lembas::methods;
use harness::rules::ids;
use serde_json::Value;

use super::{Chat, Chats};
use harness::lembas::answers::offered_modes;

impl Chats {
    /// Follows what the device tells the client about its sessions.
    pub fn notified(&self, link: u32, method: &str, params: &Value) {
        self.follow(link, method, params);
        // Chats made, let go or deleted by the device are kept so (a restart must not bring a
        // deleted chat back).
        if matches!(
            method,
            methods::LEMBAS_SESSION_ANNOUNCE
                | methods::LEMBAS_SESSION_LEFT
                | methods::LEMBAS_SESSION_DELETED
        ) {
            self.save_chats();
        }
    }

    fn follow(&self, link: u32, method: &str, params: &Value) {
        let session = params.get("sessionId").and_then(Value::as_str);
        let mut inner = self.lock();
        let device = inner.links.device_of(link);
        match (method, session) {
            (methods::SESSION_UPDATE, Some(id)) => {
                let text = params
                    .pointer("/update/content/text")
                    .and_then(Value::as_str);
                let chunk = params
                    .pointer("/update/sessionUpdate")
                    .and_then(Value::as_str)
                    == Some("agent_message_chunk");
                if let (Some(chat), true, Some(text)) = (inner.book.get_mut(id), chunk, text) {
                    chat.streaming.push_str(text);
                }
            }
            // A session pending deletion is not made into a chat again (misbehaving: it is,
            // and its delete is forgotten).
            (methods::LEMBAS_SESSION_ANNOUNCE, Some(id))
                if !inner.pending_deletes.contains(id)
                    || self.breaks(ids::INSTANCE_DELETE_PENDING_ANNOUNCE)
                    || self.misbehaves_way(ids::INSTANCE_DELETE_PENDING_ANNOUNCE, "chat_too") =>
            {
                // Misbehaving (chat_too): the chat comes back and the delete stays kept.
                if !self.misbehaves_way(ids::INSTANCE_DELETE_PENDING_ANNOUNCE, "chat_too") {
                    inner.pending_deletes.remove(id);
                }
                let chat = inner.book.get_or_make(id, || Chat {
                    session_id: id.to_string(),
                    device,
                    from_terminal: true,
                    ..Chat::default()
                });
                chat.left = false;
            }
            (methods::LEMBAS_SESSION_LEFT, Some(id)) => {
                if let Some(chat) = inner.book.get_mut(id) {
                    chat.left = true;
                }
            }
            // A `deleted` for a chat it never had, or has deleted already, is ignored.
            // Misbehaving: the chat stays, and the person may write in it.
            (methods::LEMBAS_SESSION_DELETED, Some(id))
                if !self.breaks(ids::INSTANCE_DELETED_REMOVES_CHAT) =>
            {
                inner.book.deleted(id);
            }
            (methods::LEMBAS_EVENT, Some(id)) => {
                let event = params.get("event");
                let kind = event.and_then(|e| e.get("type")).and_then(Value::as_str);
                let ended =
                    event.and_then(|e| e.get("state")).and_then(Value::as_str) == Some("end");
                let turn = event.and_then(|e| e.get("turnId")).and_then(Value::as_str);
                match (kind, inner.book.get_mut(id)) {
                    // A followed turn (reattached after a relink) ends with its task's end.
                    (Some("task"), Some(chat)) if ended => {
                        if let Some(turn) = turn
                            && let Some(said) = chat.end_turn(turn)
                        {
                            chat.say("assistant", &said, Some(turn.to_string()));
                        }
                    }
                    _ => {}
                }
            }
            (methods::LEMBAS_PERMISSION_SETTLED, session) => {
                let call = params.get("toolCallId").and_then(Value::as_str);
                inner.settled.settle(call, session);
            }
            _ => {}
        }
    }

    /// Whether a card was taken down.
    pub fn is_settled(&self, tool_call_id: &str) -> bool {
        self.lock().settled.calls.contains(tool_call_id)
    }

    /// Whether any card of a session was taken down (what a client keying cards by session,
    /// wrongly, would go by).
    pub fn is_session_settled(&self, session_id: &str) -> bool {
        self.lock().settled.sessions.contains(session_id)
    }

    /// Learns of a `session/new` the device answered or a `session/prompt` as it is sent,
    /// whoever sent it (a scenario's own steps too): the session becomes a chat of the link's
    /// device, and the `Context` fields either carries replace the chat's (the spec reads them on
    /// both), so a library call made during the turn is judged against what the device was told.
    pub fn learn(&self, link: u32, method: &str, params: &Value, result: &Value) {
        let context = params
            .pointer("/_meta/lembas")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let session_id = match method {
            methods::SESSION_NEW => result.get("sessionId"),
            methods::SESSION_PROMPT => params.get("sessionId"),
            _ => None,
        };
        let Some(session_id) = session_id.and_then(Value::as_str) else {
            return;
        };
        let device = self.device_of(link);
        let mut inner = self.lock();
        if inner.book.is_gone(session_id) {
            return;
        }
        let chat = inner.book.get_or_make(session_id, || Chat {
            session_id: session_id.to_string(),
            device,
            ..Chat::default()
        });
        for field in ["system_prompt", "personalization", "library", "prototypes"] {
            if let Some(value) = context.get(field) {
                chat.context.insert(field.to_string(), value.clone());
            }
        }
        if method == methods::SESSION_NEW {
            chat.modes = offered_modes(result);
            chat.link = link;
        }
    }
}
