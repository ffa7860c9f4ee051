//! `session/prompt` and `session/cancel`: a message written in a chat (a prompt with a new turn,
//! or a steer while a turn runs) and a turn stopped, with what the client learns as a prompt
//! goes and is answered.

use harness::lembas::methods;
use serde_json::Value;

use crate::applicability::Applicability;
use crate::chats::Chats;

/// A prompt on its way (`message`: what this client sent on `link`): its Context counts from
/// when it is sent, since the turn's library calls come before its answer.
pub(crate) fn sent(chats: &Chats, link: u32, message: &Value) {
    if message.get("method").and_then(Value::as_str) == Some(methods::SESSION_PROMPT)
        && let Some(params) = message.get("params")
    {
        chats.learn(link, methods::SESSION_PROMPT, params, &Value::Null);
    }
}

/// The device answered a prompt: a turn that ran counts toward the scenario's applicability.
pub(crate) fn answered(applicability: Option<&Applicability>) {
    if let Some(applicability) = applicability {
        applicability.turn_answered();
    }
}
