//! The person writing in a chat, as the web UI sends it: a steer while a turn runs (when the
//! device can take one: the steer's own room, [`crate::methods::steer`]), else a prompt as a
//! new turn, files attached as blocks of their own.

use std::sync::Arc;

use harness::jsonrpc::Peer;
use harness::rules::ids;
use serde_json::{Value, json};

use super::{Chats, LinkFacts};
use crate::methods::steer;

impl Chats {
    /// The person writes in a chat: a steer while a turn runs (when the device can take
    /// one), else a prompt as a new turn.
    pub async fn send(
        self: &Arc<Self>,
        peer: &Arc<Peer>,
        facts: &LinkFacts,
        chat: &str,
        text: &str,
        attach: &[crate::attach::AttachFile],
    ) -> Result<Value, String> {
        let renewed = self.renewed(peer, facts, chat).await?;
        let chat = renewed.as_str();
        let running = self
            .chat(chat)
            .ok_or_else(|| format!("no chat `{chat}`"))?
            .in_flight
            .first()
            .map(|(turn, _)| turn.clone());
        if self.breaks(ids::INSTANCE_PROMPT_SEND) {
            // Misbehaving: the message is shown in the chat and goes nowhere.
            self.say(chat, "user", text, None);
            return Ok(json!({ "turnId": self.fresh_message_id() }));
        }
        if !attach.is_empty() {
            // Files never go as a steer: a message with files is a prompt of its own.
            let blocks = self.attached_blocks(facts, attach)?;
            return Ok(self.send_blocks(peer, facts, chat, text, blocks));
        }
        if let Some(steered) = steer::steer(self, peer, facts, chat, text, running).await {
            return steered;
        }
        let turn_id = self.fresh_message_id();
        self.prompt(peer, facts, chat, &turn_id, text);
        if self.misbehaves_way(ids::INSTANCE_PROMPT_SEND, "twice") {
            // Misbehaving: the message goes again, as a second turn of its own.
            let again = self.fresh_message_id();
            self.prompt(peer, facts, chat, &again, text);
        }
        Ok(json!({ "turnId": turn_id }))
    }

    /// The blocks a message's files go as, after its text (refused when the device takes no
    /// attachments).
    fn attached_blocks(
        &self,
        facts: &LinkFacts,
        attach: &[crate::attach::AttachFile],
    ) -> Result<Vec<Value>, String> {
        let careless = self.breaks(ids::INSTANCE_PROMPT_BLOCKS);
        if !careless && !facts.capabilities.iter().any(|c| c == "attachments") {
            return Err("the device takes no attachments (it did not list `attachments`)".into());
        }
        let mut blocks = crate::attach::blocks(attach, careless)?;
        if self.misbehaves_way(ids::INSTANCE_PROMPT_BLOCKS, "text_lines") {
            // Misbehaving: a text file's resource carries its text as a list of lines.
            for block in &mut blocks {
                if let Some(text) = block.pointer("/resource/text").and_then(Value::as_str) {
                    let lines: Vec<String> = text.lines().map(String::from).collect();
                    block["resource"]["text"] = json!(lines);
                }
            }
        }
        Ok(blocks)
    }

    /// Sends `text` and `blocks` after it as a prompt of its own (a new turn); gives
    /// `{turnId}`.
    pub fn send_blocks(
        self: &Arc<Self>,
        peer: &Arc<Peer>,
        facts: &LinkFacts,
        chat: &str,
        text: &str,
        blocks: Vec<Value>,
    ) -> Value {
        let turn_id = self.fresh_message_id();
        if let Some(c) = self.lock().book.get_mut(chat) {
            c.attached.insert(turn_id.clone(), blocks);
        }
        self.prompt(peer, facts, chat, &turn_id, text);
        json!({ "turnId": turn_id })
    }
}
