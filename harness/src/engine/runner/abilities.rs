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

/// An [`Actor`] that reads each action as its own type: the one way every double parses a
/// step's action, so an action of the wrong double, an unknown key or a field of the wrong type
/// is said the same way everywhere.
pub trait TypedActor: Send + Sync {
    /// The double's actions, one variant each (`{name: value}` in a scenario).
    type Action: serde::de::DeserializeOwned + Send;
    /// Who acts, for an action it does not know (`fake-device`, `the fake daemon`).
    const WHO: &'static str;
    /// Does one action, read as [`TypedActor::Action`].
    fn act_typed(
        &self,
        action: Self::Action,
        timeout: Duration,
    ) -> impl Future<Output = Result<Value, ActError>> + Send;
}

impl<T: TypedActor> Actor for T {
    fn act<'a>(
        &'a self,
        action: Value,
        timeout: Duration,
    ) -> Pin<Box<dyn Future<Output = Result<Value, ActError>> + Send + 'a>> {
        Box::pin(async move {
            let action: T::Action = serde_json::from_value(action)
                .map_err(|e| ActError::Unknown(format!("not an action of {}: {e}", T::WHO)))?;
            self.act_typed(action, timeout).await
        })
    }
}
