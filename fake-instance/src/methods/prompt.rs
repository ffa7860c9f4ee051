//! `session/prompt`: a message written in a chat (a prompt with a new turn, or a steer while a
//! turn runs, see [`super::steer`]), with what the client learns as a prompt goes and is
//! answered. A turn is stopped from [`super::session_cancel`].

use std::time::Duration;

use harness::lembas::methods;
use serde_json::Value;

use crate::actions::{Acted, InstanceActor, SendMessage, unlisted};
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

impl InstanceActor {
    /// Writes in a chat: a prompt, or a steer while its turn runs.
    pub(crate) async fn send(&self, send: SendMessage, timeout: Duration) -> Acted {
        let chat = self.chats.current_chat(&send.chat);
        // A chat lives on its device: written to, it goes to that device's link.
        let device = self.chats.device_of_chat(&chat);
        let (peer, facts) = self
            .chats
            .ready_link_of(&self.hub, timeout, device.as_deref())
            .await?;
        let careless = self
            .chats
            .misbehaves(harness::rules::ids::INSTANCE_PROMPT_BLOCKS);
        if !send.attach.is_empty() && !careless {
            unlisted(&facts, "attachments", "attached files")?;
        }
        Ok(self
            .chats
            .send(&peer, &facts, &chat, &send.text, &send.attach)
            .await?)
    }
}
