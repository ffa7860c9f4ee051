//! Taking back what a chat said: rewinding it to a turn (to edit or regenerate from there)
//! and stopping its running turn.

use std::sync::Arc;

use harness::jsonrpc::Peer;
use harness::lembas::methods;
use harness::rules::ids;
use serde_json::{Value, json};

use super::{Chats, LinkFacts};

impl Chats {
    /// Edits or regenerates from a turn: `_lembas/session/rewind`, then `text` as a new turn.
    pub async fn rewind(
        self: &Arc<Self>,
        peer: &Arc<Peer>,
        facts: &LinkFacts,
        chat: &str,
        turn: &str,
        text: Option<&str>,
    ) -> Result<Value, String> {
        if !facts.capabilities.iter().any(|c| c == "rewind") {
            return Err("the device did not list `rewind`".into());
        }
        // Misbehaving: the rewind names a turn this chat never sent.
        let turn = if self.breaks(ids::INSTANCE_REWIND_KNOWN_TURN) {
            "msg_made_up"
        } else {
            turn
        };
        // Misbehaving: the new message's id, made now, is the turn the rewind names.
        let next = self.fresh_message_id();
        let turn = if self.misbehaves_way(ids::INSTANCE_REWIND_KNOWN_TURN, "next_turn") {
            next.as_str()
        } else {
            turn
        };
        // Misbehaving: the new message goes without a rewind before it.
        if self.misbehaves_way(ids::INSTANCE_REWIND_NEW_TURN, "no_rewind")
            && let Some(text) = text
        {
            self.prompt(peer, facts, chat, &next, text);
            return Ok(json!({ "reverted": 0, "turnId": next }));
        }
        let answer = peer
            .request(
                methods::LEMBAS_SESSION_REWIND,
                json!({ "sessionId": chat, "turnId": turn }),
                self.config.patience,
            )
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| format!("the device refused the rewind: {}", e.message))?;
        // The rewound turns leave the transcript.
        self.lock().book.rewound(chat, turn);
        self.save_chats();
        let mut result =
            json!({ "reverted": answer.get("reverted").cloned().unwrap_or(Value::Null) });
        if let Some(text) = text {
            // A new turn: a turn id never used, or the device would answer the old one.
            let turn_id = if self.breaks(ids::INSTANCE_REWIND_NEW_TURN) {
                turn.to_string()
            } else {
                next
            };
            self.prompt(peer, facts, chat, &turn_id, text);
            result["turnId"] = json!(turn_id);
        }
        Ok(result)
    }

    /// Stops a chat's running turn.
    pub fn cancel(&self, peer: &Arc<Peer>, chat: &str) {
        // Misbehaving: the stop button stops the stream in the browser only.
        if self.breaks(ids::INSTANCE_CANCEL_STOP) {
            return;
        }
        let mut params = json!({ "sessionId": chat });
        if self.misbehaves_way(ids::INSTANCE_CANCEL_STOP, "other_session") {
            // Misbehaving: the stop names a session the device never gave, not the chat's.
            params = json!({ "sessionId": "ses_never_given" });
        }
        if self.breaks(ids::INSTANCE_CANCEL_IS_NOTIFICATION) {
            // Misbehaving: the stop goes as a request, waiting for an answer nobody owes.
            let answer = peer.begin_request(methods::SESSION_CANCEL, params, self.config.patience);
            tokio::spawn(answer);
            return;
        }
        peer.notify(methods::SESSION_CANCEL, params);
    }
}
