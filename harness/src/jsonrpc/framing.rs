//! How a link's text frames are read: the family switch of the link layer.
//!
//! A LLeMbas link carries JSON-RPC 2.0 (requests, notifications, responses with ids). Another
//! family's link may carry plain JSON objects that each name their kind in one field (an
//! envelope with a `type`): no ids to correlate, nothing to answer. [`Framing::Typed`] reads
//! such frames as notifications whose method is that kind, so scenarios, handlers, the inbox and
//! the reports work on them unchanged. Which rule a malformed frame breaks is the family's to
//! say: the framing carries the ids, and knows no protocol.

/// How a peer reads its frames.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Framing {
    /// JSON-RPC 2.0 messages (the default).
    #[default]
    JsonRpc,
    /// One JSON object per frame, naming its kind in a string field.
    Typed(TypedFrames),
}

/// A typed-frame family's shape and the rules its malformed frames break.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TypedFrames {
    /// The field naming a frame's kind (`type`).
    pub kind_key: &'static str,
    /// The rule a frame that is not JSON breaks.
    pub not_json: &'static str,
    /// The rule a JSON frame that is no object with a string kind breaks.
    pub not_typed: &'static str,
    /// The rule a binary frame, or a text frame that is not UTF-8, breaks.
    pub not_text: &'static str,
}

impl Framing {
    /// The rule a binary (or not UTF-8) frame breaks under a typed framing; `None` under
    /// JSON-RPC, whose peer says its own.
    pub fn not_text_rule(&self) -> Option<&'static str> {
        match self {
            Framing::JsonRpc => None,
            Framing::Typed(typed) => Some(typed.not_text),
        }
    }
}
