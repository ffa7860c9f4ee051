//! What a double lends the runner for the steps the engine cannot do alone: dialling out
//! (`dial`) and acting off the link (`act`). A double without one leaves it out, and such a
//! step is then the scenario's error.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::engine::applicability::ActError;
use crate::jsonrpc::Peer;

/// What a `dial` step asks of a double that dials.
#[derive(Debug, Clone)]
pub struct DialRequest {
    /// The token to dial with; `None`: the double's own.
    pub token: Option<String>,
    /// The protocol to say in hello; `None`: what discovery allows.
    pub protocol: Option<u8>,
    /// How long the dial may take.
    pub timeout: Duration,
}

/// How a dial ended.
#[derive(Debug, Clone)]
pub enum DialResult {
    /// The link is up (and attached to the hub).
    Linked(Arc<Peer>),
    /// The upgrade was answered with this HTTP status.
    Refused(u16),
    /// Anything else (no route, timeout, discovery broken).
    Failed(String),
}

/// A double that can dial out (fake-device); `dial` steps use it.
pub trait Dialer: Send + Sync {
    /// Dials once, as the step asks.
    fn dial<'a>(
        &'a self,
        request: DialRequest,
    ) -> Pin<Box<dyn Future<Output = DialResult> + Send + 'a>>;
}

/// A double that acts off the link (fake-device: a person at its terminal, its settings);
/// `act` steps use it.
pub trait Actor: Send + Sync {
    /// Does the step's one action, `{name: value}` with every `${...}` in it substituted, within
    /// `timeout`: the double reads it as its own action type. Gives the action's result for
    /// `capture`, or why it could not be done (or does not apply).
    fn act<'a>(
        &'a self,
        action: Value,
        timeout: Duration,
    ) -> Pin<Box<dyn Future<Output = Result<Value, ActError>> + Send + 'a>>;
}
