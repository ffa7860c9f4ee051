//! What a model answers a turn: its text, reasoning and tool calls, however it arrived (whole, or
//! assembled from a stream).

use serde_json::Value;

/// One answer of the model.
#[derive(Debug, Clone, Default, PartialEq)]
#[allow(missing_docs)] // fields whose names say it all go undocumented
pub struct Completion {
    pub text: String,
    /// The reasoning, when the model gave one.
    pub reasoning: Option<String>,
    /// The tools it calls.
    pub tool_calls: Vec<ToolCall>,
    /// The token counts the provider reported, as sent.
    pub usage: Option<Value>,
}

/// A tool the model calls.
#[derive(Debug, Clone, PartialEq)]
#[allow(missing_docs)] // fields whose names say it all go undocumented
pub struct ToolCall {
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// Its arguments (the JSON the model wrote, parsed; `{}` when it did not parse).
    pub arguments: Value,
}

/// What a tool call came to: the text the model is given, and whether it ran.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutcome {
    /// Given to the model as the tool's result.
    pub text: String,
    /// Whether the tool ran (false: denied, dismissed, nobody to ask).
    pub ran: bool,
}
