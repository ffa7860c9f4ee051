//! The steps that look at what the peer sent: `expect` (a message), `expect_none` (silence),
//! and `check` (a value taken earlier against a pattern).

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::captures::Captures;
use crate::duration::Dur;

/// Expect a message from the peer.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExpectStep {
    /// The method of the request or notification.
    #[serde(default)]
    pub method: Option<String>,
    /// A pattern its params must match.
    #[serde(default)]
    pub params: Option<Value>,
    /// A pattern the whole message must match (for anything `method`/`params` cannot say): a
    /// mapping, merged with `method` and `params`.
    #[serde(default)]
    pub message: Option<Value>,
    /// Variables to take from the message (paths like `params.sessionId`; `$` for all of it).
    #[serde(default)]
    pub capture: Captures,
    /// The catalogue rule the peer breaks when this does not come.
    #[serde(default)]
    pub rule: Option<String>,
    /// This step's deadline.
    #[serde(default)]
    pub timeout: Option<Dur>,
    /// Only a message that arrived after the `start` (or `send`) step with this `as` name sent
    /// its message: an earlier turn's message still in the inbox is not this one.
    #[serde(default)]
    pub after: Option<String>,
}

/// Expect nothing matching for a while.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExpectNoneStep {
    /// The method that must not come.
    #[serde(default)]
    pub method: Option<String>,
    /// A pattern its params would match.
    #[serde(default)]
    pub params: Option<Value>,
    /// A pattern the whole message would match.
    #[serde(default)]
    pub message: Option<Value>,
    /// How long to watch.
    #[serde(rename = "for")]
    pub duration: Dur,
    /// The catalogue rule the peer breaks when it comes.
    #[serde(default)]
    pub rule: Option<String>,
    /// Only what arrives after the `start` (or `send`) step with this `as` name sent its
    /// message.
    #[serde(default)]
    pub after: Option<String>,
}

/// Check a captured value.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckStep {
    /// The value to check, usually one variable: `${hello.protocol}`.
    pub that: Value,
    /// The pattern it must match (`${...}` substituted).
    pub matches: Value,
    /// The catalogue rule the peer breaks when it does not.
    #[serde(default)]
    pub rule: Option<String>,
}
