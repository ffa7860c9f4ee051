//! The `handlers:` section: rules that answer the peer's requests for the whole run.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::duration::Dur;

/// A handler: answers the peer's matching requests, for the whole run or `times` times.
///
/// Exactly one of `result`, `error` or `hold`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Handler {
    /// The request method it answers.
    pub method: String,
    /// A pattern the params must match (partial; see the matching reference). `${...}` in it
    /// sees the variables known when the run starts (built-ins and `vars:`), not later captures.
    #[serde(default)]
    pub params: Option<Value>,
    /// Answer with this result (`${...}` substituted; `${params.x}` is the request's params).
    #[serde(default)]
    pub result: Option<Value>,
    /// Answer with this error object (`{code, message}`).
    #[serde(default)]
    pub error: Option<Value>,
    /// Take the request and do not answer it: a `reply` step answers it, or nobody does.
    #[serde(default)]
    pub hold: bool,
    /// Wait this long before answering.
    #[serde(default)]
    pub delay: Option<Dur>,
    /// Answer only this many requests, then let later ones through.
    #[serde(default)]
    pub times: Option<u32>,
}
