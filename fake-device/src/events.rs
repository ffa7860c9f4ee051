//! What the device tells a client about a session: ACP's `session/update` for everyone, and
//! `_lembas/event` only to a client that said `_meta.lembas` (spec, "Versions and discovery").

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use harness::jsonrpc::Peer;
use serde_json::{Value, json};

/// A linked client, as initialize described it.
#[derive(Debug, Clone)]
pub struct Client {
    /// Its link.
    pub peer: Arc<Peer>,
    /// Whether it said `_meta.lembas` (LLeMbas, not a plain editor).
    pub lembas: bool,
    /// The link protocol it speaks (1 or 2).
    pub protocol: u8,
    /// Send `_lembas/event` even to a plain client (only when misbehaving on purpose).
    pub events_to_all: bool,
    /// Whether questions and plans may still be sent on this link (shared by every `Client` of
    /// the link: a method-not-found answer turns it off for the rest of the link).
    pub asks: Arc<AtomicBool>,
}

impl Client {
    /// Sends a `session/update`.
    pub fn update(&self, session_id: &str, update: Value) {
        self.peer.notify(
            "session/update",
            json!({ "sessionId": session_id, "update": update }),
        );
    }

    /// Sends a `_lembas/event`, when this client may have it.
    pub fn event(&self, session_id: &str, event: Value) {
        if self.lembas || self.events_to_all {
            self.peer.notify(
                "_lembas/event",
                json!({ "sessionId": session_id, "event": event }),
            );
        }
    }

    /// A piece of the agent's answer, both ways.
    pub fn text(&self, session_id: &str, text: &str) {
        self.update(session_id, json!({ "sessionUpdate": "agent_message_chunk", "content": { "type": "text", "text": text } }));
        self.event(session_id, json!({ "type": "text", "text": text }));
    }
}
