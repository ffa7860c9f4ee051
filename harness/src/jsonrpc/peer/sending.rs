//! Putting messages on the link: the watch may bend them first, the journal and the dispatch
//! see what went, and until the link's opening request has its answer, the gate holds the rest
//! in order.

use std::sync::Arc;

use serde_json::Value;

use super::{Peer, id_key};
use crate::journal::Direction;
use crate::jsonrpc::gate::Passage;
use crate::jsonrpc::message::Message;
use crate::jsonrpc::watch::Part;
use crate::size::approx_bytes;
use crate::transport::Outgoing;

impl Peer {
    /// Sends a notification.
    pub fn notify(self: &Arc<Self>, method: &str, mut params: Value) {
        self.bend(Part::Params, method, &mut params);
        let msg = Message::Notification {
            method: method.into(),
            params: Some(params),
        };
        self.send_value(msg.into_value());
    }

    /// Sends any JSON value as one message, as is (for scenarios that send raw or broken text).
    pub fn send_value(self: &Arc<Self>, value: Value) {
        crate::heavy::run(approx_bytes(&value), || {
            let text = value.to_string();
            self.send_out(text, &value);
        });
    }

    /// Sends a frame of a typed family as the protocol's own message: the watch may bend it
    /// first (a shape misbehaviour), as it does a JSON-RPC double's notifications. A frame
    /// that names no kind goes as it is.
    pub fn send_frame(self: &Arc<Self>, mut frame: Value) {
        if let crate::jsonrpc::framing::Framing::Typed(typed) = &self.framing
            && let Some(kind) = frame.get(typed.kind_key).and_then(Value::as_str)
        {
            let kind = kind.to_string();
            self.bend(Part::Params, &kind, &mut frame);
        }
        self.send_value(frame);
    }

    /// Sends a raw text message; `parsed`, when the caller has it, is what the journal and the
    /// dispatch see of it (else the text is parsed, or kept as a string when it is not JSON).
    pub fn send_text(self: &Arc<Self>, text: String, parsed: Option<&Value>) {
        crate::heavy::run(text.len(), || match parsed {
            Some(value) => self.send_out(text, value),
            None => {
                let value =
                    serde_json::from_str(&text).unwrap_or_else(|_| Value::String(text.clone()));
                self.send_out(text, &value);
            }
        });
    }

    /// Journals `value` (the message as a value: parsing its text back would cost a second
    /// parse), sends `text`, and lets the dispatch see what went; or holds it at a closed gate,
    /// to be journaled and sent when the gate opens.
    fn send_out(self: &Arc<Self>, text: String, value: &Value) {
        let text = match &self.gate {
            Some(gate) => {
                let id = value.get("method").and(value.get("id")).map(id_key);
                match gate.pass(text, value, id) {
                    Passage::Go(text) => text,
                    Passage::Held => return,
                }
            }
            None => text,
        };
        self.journal.record_ref(self.link, Direction::Out, value);
        if self.out.send(Outgoing::Text(text)).is_err() {
            tracing::debug!(link = self.link, "send on a closed link dropped");
            return;
        }
        self.dispatch.on_sent(self, value);
    }

    /// Sends what the gate held, in order: the link's opening request has its answer.
    pub(super) fn open_gate(self: &Arc<Self>) {
        let Some(gate) = &self.gate else {
            return;
        };
        let mut went = Vec::new();
        gate.open(|held| {
            self.journal
                .record_ref(self.link, Direction::Out, &held.value);
            if self.out.send(Outgoing::Text(held.text)).is_ok() {
                went.push(held.value);
            }
        });
        for value in &went {
            self.dispatch.on_sent(self, value);
        }
    }
}
