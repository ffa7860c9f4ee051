//! The opening gate of a link: what this side sends waits until the link's opening request has
//! been answered with a result.
//!
//! A protocol may say that one request opens the connection and that nothing else is sent until
//! it is answered (ACP's `initialize`: its official SDKs refuse any other request before then).
//! A peer whose config names that method holds every request and notification it is asked to
//! send meanwhile, in order, and sends them the moment the answer comes. Answers to the other
//! side's requests are never held: the other side may be waiting on them. Nothing here knows
//! which method opens a link; the double says.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::Value;

/// A message waiting for the gate to open: its text, the value the journal and dispatch see, and
/// its id when it is a request (so a request that gave up waiting can be taken back).
pub(crate) struct Held {
    pub text: String,
    pub value: Value,
    pub id: Option<String>,
}

/// Holds messages until the opening request is answered.
pub(crate) struct Gate {
    opener: &'static str,
    /// Set once the held messages are on their way: from then on nothing waits.
    open: AtomicBool,
    held: Mutex<Vec<Held>>,
}

/// What the gate decided about a message this side is about to send.
pub(crate) enum Passage {
    /// Send it now.
    Go(String),
    /// Held; it goes when the gate opens.
    Held,
}

impl Gate {
    /// A closed gate that `opener`'s answer opens.
    pub fn new(opener: &'static str) -> Self {
        Self {
            opener,
            open: AtomicBool::new(false),
            held: Mutex::new(Vec::new()),
        }
    }

    /// The method whose answer opens the gate.
    pub fn opener(&self) -> &'static str {
        self.opener
    }

    /// Whether `value` must wait: a request or notification other than the opening request
    /// itself, while the gate is closed. Under the same lock as [`Gate::open`], so nothing slips
    /// between the flush and the gate standing open.
    pub fn pass(&self, text: String, value: &Value, id: Option<String>) -> Passage {
        if self.open.load(Ordering::Acquire) || !self.waits(value) {
            return Passage::Go(text);
        }
        let Ok(mut held) = self.held.lock() else {
            return Passage::Go(text);
        };
        if self.open.load(Ordering::Acquire) {
            return Passage::Go(text);
        }
        held.push(Held {
            text,
            value: value.clone(),
            id,
        });
        Passage::Held
    }

    fn waits(&self, value: &Value) -> bool {
        let Some(method) = value.get("method").and_then(Value::as_str) else {
            return false;
        };
        !(method == self.opener && value.get("id").is_some())
    }

    /// Opens the gate, handing `send` every held message in the order it was asked for; `send`
    /// runs under the gate's lock, so it must only queue (the outbox), never wait.
    pub fn open(&self, mut send: impl FnMut(Held)) {
        if self.open.load(Ordering::Acquire) {
            return;
        }
        let Ok(mut held) = self.held.lock() else {
            return;
        };
        for message in held.drain(..) {
            send(message);
        }
        self.open.store(true, Ordering::Release);
    }

    /// Takes back the held request with this id (it stopped waiting for its answer); true when
    /// it was still held, so it was never sent.
    pub fn withdraw(&self, id: &str) -> bool {
        if self.open.load(Ordering::Acquire) {
            return false;
        }
        let Ok(mut held) = self.held.lock() else {
            return false;
        };
        match held.iter().position(|h| h.id.as_deref() == Some(id)) {
            Some(at) => {
                held.remove(at);
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn text(value: &Value) -> String {
        value.to_string()
    }

    #[test]
    fn only_the_opening_request_and_answers_pass_a_closed_gate() {
        let gate = Gate::new("initialize");
        let opener = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize"});
        let answer = json!({"jsonrpc": "2.0", "id": 9, "result": {}});
        let request = json!({"jsonrpc": "2.0", "id": 2, "method": "session/new"});
        let notification = json!({"jsonrpc": "2.0", "method": "session/cancel"});
        assert!(matches!(
            gate.pass(text(&opener), &opener, Some("1".into())),
            Passage::Go(_)
        ));
        assert!(matches!(
            gate.pass(text(&answer), &answer, None),
            Passage::Go(_)
        ));
        assert!(matches!(
            gate.pass(text(&request), &request, Some("2".into())),
            Passage::Held
        ));
        assert!(matches!(
            gate.pass(text(&notification), &notification, None),
            Passage::Held
        ));
        let mut sent = Vec::new();
        gate.open(|held| sent.push(held.value));
        assert_eq!(sent, [request.clone(), notification]);
        assert!(matches!(
            gate.pass(text(&request), &request, Some("3".into())),
            Passage::Go(_)
        ));
    }

    #[test]
    fn a_withdrawn_request_is_never_sent() {
        let gate = Gate::new("initialize");
        let first = json!({"jsonrpc": "2.0", "id": 2, "method": "a"});
        let second = json!({"jsonrpc": "2.0", "id": 3, "method": "b"});
        let _ = gate.pass(text(&first), &first, Some("2".into()));
        let _ = gate.pass(text(&second), &second, Some("3".into()));
        assert!(gate.withdraw("2"));
        assert!(!gate.withdraw("2"));
        let mut sent = Vec::new();
        gate.open(|held| sent.push(held.value));
        assert_eq!(sent, [second]);
        assert!(!gate.withdraw("3"), "nothing is held once the gate is open");
    }
}
