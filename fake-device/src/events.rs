//! What the device tells a client about a session: ACP's `session/update` for everyone, and
//! `_lembas/event` only to a client that said `_meta.lembas` (spec, "Versions and discovery").

use harness::lembas::methods;
use std::sync::{Arc, RwLock};

use harness::jsonrpc::Peer;
use serde_json::{Value, json};

/// Where a client's messages go: a link, and what its initialize said. Every `Client` of a
/// link shares one route; when that link drops and another comes up, the route is moved to the
/// new link, so a turn that was running goes on reporting there (the client follows it).
#[derive(Debug, Clone)]
pub struct Route {
    /// The link.
    pub peer: Arc<Peer>,
    /// Whether the client said `_meta.lembas` (LLeMbas, not a plain editor).
    pub lembas: bool,
    /// The link protocol the client speaks (1 or 2).
    pub protocol: u8,
    /// Whether questions and plans may still be sent on this link (a method-not-found answer
    /// turns it off for the rest of the link).
    pub asks: bool,
}

/// How a misbehaving device talks to its clients (all off for a correct one).
#[derive(Debug, Clone, Copy, Default)]
pub struct Quirks {
    /// Send `_lembas/event` even to a plain client.
    pub events_to_all: bool,
    /// Send the turn's text only as `_lembas/event`s, never as session updates.
    pub no_text_updates: bool,
    /// Send the turn's text only as session updates, never as `_lembas/event`s.
    pub no_text_events: bool,
}

/// A linked client, as initialize described it.
#[derive(Debug, Clone)]
pub struct Client {
    route: Arc<RwLock<Route>>,
    /// How it is misbehaved to, on purpose.
    pub quirks: Quirks,
}

impl Client {
    /// A client on its own route.
    pub fn new(route: Route, quirks: Quirks) -> Client {
        Client::on(Arc::new(RwLock::new(route)), quirks)
    }

    /// A client on a shared route.
    pub fn on(route: Arc<RwLock<Route>>, quirks: Quirks) -> Client {
        Client { route, quirks }
    }

    fn route(&self) -> Route {
        self.route
            .read()
            .map(|r| r.clone())
            .unwrap_or_else(|p| p.into_inner().clone())
    }

    /// The link its messages go to now.
    pub fn peer(&self) -> Arc<Peer> {
        self.route().peer
    }

    /// Whether it said `_meta.lembas`.
    pub fn lembas(&self) -> bool {
        self.route().lembas
    }

    /// The protocol it speaks.
    pub fn protocol(&self) -> u8 {
        self.route().protocol
    }

    /// Whether it may be asked questions and plans.
    pub fn asks(&self) -> bool {
        self.route().asks
    }

    /// It answered a question or plan with method-not-found: protocol 1 for the rest of the link.
    pub fn stop_asking(&self) {
        if let Ok(mut route) = self.route.write() {
            route.asks = false;
        }
    }

    /// Sends a `session/update`.
    pub fn update(&self, session_id: &str, update: Value) {
        self.peer().notify(
            methods::SESSION_UPDATE,
            json!({ "sessionId": session_id, "update": update }),
        );
    }

    /// Sends a `_lembas/event`, when this client may have it.
    pub fn event(&self, session_id: &str, event: Value) {
        if self.lembas() || self.quirks.events_to_all {
            self.peer().notify(
                methods::LEMBAS_EVENT,
                json!({ "sessionId": session_id, "event": event }),
            );
        }
    }

    /// A piece of the agent's answer, both ways.
    pub fn text(&self, session_id: &str, text: &str) {
        if !self.quirks.no_text_updates {
            self.update(session_id, json!({ "sessionUpdate": "agent_message_chunk", "content": { "type": "text", "text": text } }));
        }
        // Misbehaving: the text never reaches a LLeMbas client as an event.
        if !self.quirks.no_text_events {
            self.event(session_id, json!({ "type": "text", "text": text }));
        }
    }
}
