//! The steps that send: a notification, a request (answered at once, or `start`ed and its
//! answer `await`ed later), the `reply` to a request a handler held, and any message as is.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::captures::Captures;
use crate::duration::Dur;

/// Send a notification.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NotifyStep {
    /// The method.
    pub method: String,
    /// The params (`${...}` substituted).
    #[serde(default)]
    pub params: Option<Value>,
    /// Send it even to a peer that did not list the capability it needs: a negative test (the
    /// peer must refuse it). Without it, such a step makes the run not applicable.
    #[serde(default)]
    pub unlisted: bool,
}

/// Send a request, then expect its answer.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RequestStep {
    /// The method.
    pub method: String,
    /// The params (`${...}` substituted).
    #[serde(default)]
    pub params: Option<Value>,
    /// A pattern the result must match. Without `result` or `error`, any result passes.
    #[serde(default)]
    pub result: Option<Value>,
    /// A pattern the error must match (the request is expected to fail).
    #[serde(default)]
    pub error: Option<Value>,
    /// A pattern the whole answer must match, `{result: ...}` or `{error: ...}`: for a request
    /// the spec lets the peer either answer or refuse, with `$one_of` (instead of `result` and
    /// `error`).
    #[serde(default)]
    pub answer: Option<Value>,
    /// Variables to take from the response (paths like `result.sessionId`).
    #[serde(default)]
    pub capture: Captures,
    /// The catalogue rule a wrong answer breaks.
    #[serde(default)]
    pub rule: Option<String>,
    /// This step's deadline.
    #[serde(default)]
    pub timeout: Option<Dur>,
    /// Send it even to a peer that did not list the capability it needs: a negative test (the
    /// peer must refuse it). Without it, such a step makes the run not applicable.
    #[serde(default)]
    pub unlisted: bool,
}

/// Send a request without waiting for its answer.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StartStep {
    /// The method.
    pub method: String,
    /// The params (`${...}` substituted).
    #[serde(default)]
    pub params: Option<Value>,
    /// The name an `await` step uses for it.
    #[serde(rename = "as")]
    pub name: String,
    /// How long its answer may take in all (default: the scenario's timeout).
    #[serde(default)]
    pub timeout: Option<Dur>,
    /// Send it even to a peer that did not list the capability it needs: a negative test (the
    /// peer must refuse it). Without it, such a step makes the run not applicable.
    #[serde(default)]
    pub unlisted: bool,
}

/// Wait for a started request's answer.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AwaitStep {
    /// The `as` name of the `start` step.
    pub request: String,
    /// A pattern the result must match. Without `result` or `error`, any result passes.
    #[serde(default)]
    pub result: Option<Value>,
    /// A pattern the error must match.
    #[serde(default)]
    pub error: Option<Value>,
    /// A pattern the whole answer must match, `{result: ...}` or `{error: ...}`: for a request
    /// the spec lets the peer either answer or refuse, with `$one_of` (instead of `result` and
    /// `error`).
    #[serde(default)]
    pub answer: Option<Value>,
    /// Variables to take from the response.
    #[serde(default)]
    pub capture: Captures,
    /// The catalogue rule a wrong answer breaks.
    #[serde(default)]
    pub rule: Option<String>,
    /// How long to wait here (default: what is left of the `start` step's timeout).
    #[serde(default)]
    pub timeout: Option<Dur>,
    /// Expect no answer for this long instead (a card the peer must leave open); the request
    /// stays started, so a later `await` may still take its answer.
    #[serde(default)]
    pub none_for: Option<Dur>,
}

/// Answer a captured request.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReplyStep {
    /// The variable holding the captured request (captured with `$`).
    pub to: String,
    /// The result to answer with.
    #[serde(default)]
    pub result: Option<Value>,
    /// The error object to answer with.
    #[serde(default)]
    pub error: Option<Value>,
}

/// Send a message as is.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SendStep {
    /// JSON to send (`${...}` substituted).
    #[serde(default)]
    pub message: Option<Value>,
    /// Raw text to send, not checked at all (for malformed input).
    #[serde(default)]
    pub text: Option<String>,
    /// A name for the moment it went out: a later `expect` or `expect_none` with `after:` this
    /// name looks only at what arrives after it.
    #[serde(default, rename = "as")]
    pub name: Option<String>,
}
