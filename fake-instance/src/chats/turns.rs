//! A turn's life, shared by everything that sends one (the web UI, a reattach, a rewind):
//! fresh message ids, the prompt sent with the chat's Context, and the answer followed into
//! the transcript, with what the turn left unsent sent next.

use std::sync::Arc;
use std::time::Duration;

use harness::jsonrpc::{Peer, RequestError, RpcError};
use harness::lembas::methods;
use harness::rules::ids;
use serde_json::{Value, json};

use super::{Chats, LinkFacts};

/// How long a turn may run before the client stops waiting for its answer.
pub(crate) const TURN_PATIENCE: Duration = Duration::from_secs(600);

impl Chats {
    /// A message id never given before (a turn's or a steer's).
    pub(crate) fn fresh_message_id(&self) -> String {
        let mut inner = self.lock();
        inner.next_message += 1;
        format!("msg_{:x}", inner.next_message)
    }

    /// Adds a line to a chat's transcript.
    pub(crate) fn say(&self, chat: &str, role: &str, text: &str, turn_id: Option<String>) {
        self.lock().book.say(chat, role, text, turn_id);
    }

    /// A rewind reverted `turn` and every later one: they leave the chat's transcript (kept).
    pub(crate) fn rewound(&self, chat: &str, turn: &str) {
        self.lock().book.rewound(chat, turn);
        self.save_chats();
    }

    /// Sends a prompt as turn `turn_id` and follows it to its answer (in a task of its own: a
    /// turn runs as long as it runs). `unsent` steer messages in the answer are sent next.
    pub fn prompt(
        self: &Arc<Self>,
        peer: &Arc<Peer>,
        facts: &LinkFacts,
        chat: &str,
        turn_id: &str,
        text: &str,
    ) {
        let again = {
            let mut inner = self.lock();
            match inner.book.get_mut(chat) {
                // Sent again after a relink: the same turn, not a new one.
                Some(c) if c.sent.iter().any(|t| t == turn_id) => true,
                Some(c) => {
                    c.in_flight.push((turn_id.to_string(), text.to_string()));
                    c.sent.push(turn_id.to_string());
                    false
                }
                None => false,
            }
        };
        if !again {
            self.say(chat, "user", text, Some(turn_id.to_string()));
        }
        self.save_chats();
        let params = self.prompt_params(facts, chat, turn_id, text);
        let answer = peer.begin_request(methods::SESSION_PROMPT, params, TURN_PATIENCE);
        let (chats, peer, facts, chat, turn_id) = (
            self.clone(),
            peer.clone(),
            facts.clone(),
            chat.to_string(),
            turn_id.to_string(),
        );
        tokio::spawn(async move {
            let answer = answer.await;
            chats
                .turn_answered(&peer, &facts, &chat, &turn_id, answer)
                .await;
        });
    }

    /// A prompt's params: the text and the files attached to the turn, and the chat's Context
    /// with the turn id as the device takes them.
    fn prompt_params(&self, facts: &LinkFacts, chat: &str, turn_id: &str, text: &str) -> Value {
        let mut blocks = vec![json!({ "type": "text", "text": text })];
        if let Some(files) = self
            .chat(chat)
            .and_then(|c| c.attached.get(turn_id).cloned())
        {
            blocks.extend(files);
        }
        // Misbehaving: the prompt goes to a session the device never gave this client.
        let session = if self.breaks(ids::INSTANCE_SESSION_KNOWN) {
            "ses_never_given"
        } else {
            chat
        };
        let mut params = json!({ "sessionId": session, "prompt": blocks });
        // The chat's Context again on every prompt (the device keeps the newest).
        let mut lembas = self
            .chat(chat)
            .and_then(|c| c.context(facts))
            .unwrap_or_else(|| json!({}));
        // Misbehaving (capabilities.respect/unlisted_field): a turn id whatever the device listed.
        if facts.capabilities.iter().any(|c| c == "turns")
            || self.misbehaves_way(ids::INSTANCE_CAPABILITIES_RESPECT, "unlisted_field")
        {
            lembas["turnId"] = json!(turn_id);
        }
        if self.misbehaves_way(ids::INSTANCE_CONTEXT_SENT, "other_prompt")
            && lembas.get("system_prompt").is_some()
        {
            // Misbehaving: the prompt carries a system prompt that is not the chat's.
            lembas["system_prompt"] = json!("Answer at length, in French.");
        }
        if lembas.as_object().is_some_and(|l| !l.is_empty()) {
            params["_meta"] = json!({ "lembas": lembas });
        }
        params
    }

    /// A turn's prompt was answered (or failed): the turn is over, and what it left unsent is
    /// sent next.
    async fn turn_answered(
        self: &Arc<Self>,
        peer: &Arc<Peer>,
        facts: &LinkFacts,
        chat: &str,
        turn_id: &str,
        answer: Result<Result<Value, RpcError>, RequestError>,
    ) {
        // A turn whose link dropped before its answer stays incomplete: the client
        // reattaches to it on the next link.
        if matches!(answer, Err(RequestError::Closed { .. })) {
            return;
        }
        self.finished(chat, turn_id);
        let unsent: Vec<String> = match &answer {
            Ok(Ok(result)) => result
                .pointer("/_meta/lembas/unsent")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|t| t.as_str().map(String::from))
                .collect(),
            Ok(Err(e)) => {
                tracing::info!("turn {turn_id} failed: {}", e.message);
                Vec::new()
            }
            Err(_) => Vec::new(),
        };
        if self.breaks(ids::INSTANCE_STEER_UNSENT) {
            return;
        }
        if self.misbehaves_way(ids::INSTANCE_STEER_UNSENT, "as_steers") {
            // Misbehaving: what the turn left unsent is steered again, not prompted.
            for text in unsent {
                let params = json!({ "sessionId": chat, "text": text });
                let _ = peer
                    .request(methods::LEMBAS_STEER, params, self.config.patience)
                    .await;
            }
            return;
        }
        // What the turn ended before taking in is sent next, as the person's next message.
        for text in unsent {
            let next = self.fresh_message_id();
            self.prompt(peer, facts, chat, &next, &text);
        }
    }

    /// A turn is over: out of flight, and what the agent said goes into the transcript.
    pub(super) fn finished(&self, chat: &str, turn_id: &str) {
        let said = {
            let mut inner = self.lock();
            inner.book.get_mut(chat).and_then(|c| c.end_turn(turn_id))
        };
        if let Some(said) = said {
            self.say(chat, "assistant", &said, Some(turn_id.to_string()));
            self.save_chats();
        }
    }
}
