//! A request for a method the client does not have: the hub answers -32601 (method not found),
//! unless this instance misbehaves.

use std::sync::Arc;

use harness::jsonrpc::{IncomingRequest, Peer};
use harness::rules::{Misbehaviours, ids};
use serde_json::json;

/// What the client gets wrong about unknown methods on purpose; all off by default.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Faults {
    /// Leaves the request unanswered (method.unknown).
    pub silent: bool,
    /// Answers with a result, as if it were done (method.unknown/pretends).
    pub pretends: bool,
}

impl Faults {
    /// The unknown-method faults among `misbehave`.
    pub(crate) fn of(misbehave: &Misbehaviours) -> Self {
        Self {
            silent: misbehave.breaks(ids::INSTANCE_METHOD_UNKNOWN),
            pretends: misbehave.breaks_way(ids::INSTANCE_METHOD_UNKNOWN, "pretends"),
        }
    }
}

/// Whether the request is dealt with here; when not, the hub answers -32601.
pub(crate) fn answer(peer: &Arc<Peer>, request: &IncomingRequest, faults: &Faults) -> bool {
    if faults.silent {
        return true;
    }
    if faults.pretends {
        peer.respond(&request.id, Ok(json!({})));
        return true;
    }
    false
}
