//! A hook on every message a peer reads and sends, for checks that hold whatever a scenario
//! does (the shapes of params and results) and for misbehaviours that bend what this side sends.
//!
//! Nothing here knows a protocol: the watch gets the method and the part of the message it is
//! about, and the protocol layer above decides what to check.

use serde_json::Value;

use crate::finding::Finding;

/// Which part of a message a watch sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// The `params` of a request or a notification.
    Params,
    /// The `result` of a successful response (the request's method is given with it).
    Result,
}

/// Looks at every message of a link.
pub trait MessageWatch: Send + Sync + std::fmt::Debug + 'static {
    /// A message the other side sent: what it broke, if anything.
    fn incoming(&self, part: Part, method: &str, value: &Value) -> Vec<Finding>;

    /// A message this side is about to send, which the watch may change.
    fn outgoing(&self, _part: Part, _method: &str, _value: &mut Value) {}
}
