//! The steps about the peer's process, when the double started it: its exit, its output, and
//! its restart.

use schemars::JsonSchema;
use serde::Deserialize;

use crate::duration::Dur;

/// Expect the system under test to exit.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExpectExitStep {
    /// The exit code it must end with; without one, any end passes.
    #[serde(default)]
    pub code: Option<i32>,
    /// How long it may take (default: the step timeout).
    #[serde(default)]
    pub within: Option<Dur>,
    /// The catalogue rule the peer breaks otherwise.
    #[serde(default)]
    pub rule: Option<String>,
}

/// Expect a line of the system under test's output.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExpectOutputStep {
    /// A regular expression a line must match (searched, not anchored; `(?i)` for any case).
    pub pattern: String,
    /// Which stream: `stdout`, `stderr`, or either (the default).
    #[serde(default)]
    pub stream: Option<crate::process::Stream>,
    /// How long it may take to come (default: the step timeout). Lines printed before the step
    /// count, after the last one an earlier `expect_output` matched.
    #[serde(default)]
    pub within: Option<Dur>,
    /// The catalogue rule the peer breaks otherwise.
    #[serde(default)]
    pub rule: Option<String>,
}

/// Restart the system under test.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RestartPeerStep {}
