//! `_lembas/steer`: what the person writes while a chat's turn runs goes to that turn as a
//! steer (when the device listed `steer`); refused with -32602 because nothing runs after all,
//! it goes as a prompt instead. The message itself is written in the chat's web UI room,
//! [`crate::chats`]; the messages a turn left unsent are the prompt's to send.

use std::sync::Arc;

use harness::jsonrpc::{INVALID_PARAMS, Peer};
use harness::lembas::methods;
use harness::rules::{Misbehaviours, ids};
use serde_json::{Value, json};

use crate::chats::turns::TURN_PATIENCE;
use crate::chats::{Chats, LinkFacts};

/// What the instance gets wrong about steering on purpose; all off by default.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Faults {
    /// A message while a turn runs goes as a prompt, never as a steer (steer.running).
    pub never: bool,
    /// The steered message also goes as a prompt of its own (steer.running/and_prompt).
    pub and_prompt: bool,
    /// A steer refused with -32602 is not sent again as a prompt (steer.fallback).
    pub no_fallback: bool,
    /// The fallback prompt goes to a session never given (steer.fallback/other_session).
    pub fallback_other_session: bool,
}

impl Faults {
    /// The steer faults among `misbehave`.
    pub(crate) fn of(misbehave: &Misbehaviours) -> Self {
        Self {
            never: misbehave.breaks(ids::INSTANCE_STEER_RUNNING),
            and_prompt: misbehave.breaks_way(ids::INSTANCE_STEER_RUNNING, "and_prompt"),
            no_fallback: misbehave.breaks(ids::INSTANCE_STEER_FALLBACK),
            fallback_other_session: misbehave
                .breaks_way(ids::INSTANCE_STEER_FALLBACK, "other_session"),
        }
    }
}

/// Steers the turn `running` (when one runs and the device can take a steer) with the person's
/// message. `None`: the message is to go as a prompt.
pub(crate) async fn steer(
    chats: &Arc<Chats>,
    peer: &Arc<Peer>,
    facts: &LinkFacts,
    chat: &str,
    text: &str,
    running: Option<String>,
) -> Option<Result<Value, String>> {
    let faults = Faults::of(chats.misbehaviours());
    if running.is_none() || !facts.capabilities.iter().any(|c| c == "steer") || faults.never {
        return None;
    }
    let message_id = chats.fresh_message_id();
    let params = json!({ "sessionId": chat, "text": text, "messageId": message_id });
    match peer
        .request(methods::LEMBAS_STEER, params, chats.patience())
        .await
    {
        Ok(Ok(_)) => {
            chats.say(chat, "user", text, running);
            if faults.and_prompt {
                // Misbehaving: the steered message also goes as a prompt of its own.
                let turn_id = chats.fresh_message_id();
                chats.prompt(peer, facts, chat, &turn_id, text);
            }
            Some(Ok(json!({ "steered": true, "messageId": message_id })))
        }
        // Nothing runs after all: the message goes as a prompt.
        Ok(Err(e)) if e.code == INVALID_PARAMS => {
            if faults.no_fallback {
                return Some(Ok(json!({ "steered": false })));
            }
            if faults.fallback_other_session {
                // Misbehaving: the fallback prompt goes to a session never given.
                let params = json!({
                    "sessionId": "ses_never_given",
                    "prompt": [{ "type": "text", "text": text }],
                });
                let answer = peer.begin_request(methods::SESSION_PROMPT, params, TURN_PATIENCE);
                tokio::spawn(answer);
                return Some(Ok(json!({ "steered": false })));
            }
            None
        }
        Ok(Err(e)) => Some(Err(format!("the device refused the steer: {}", e.message))),
        Err(e) => Some(Err(e.to_string())),
    }
}
