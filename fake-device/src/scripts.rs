//! The scripted agent's format: what a scenario's `device.scripts` and `fake-device --scripts`
//! hold, read here (the engine does not know it); [`crate::scripted_turn`] runs a script's turn.
//!
//! A script is chosen by matching the prompt's text; its steps are what an agent does in a turn
//! (say text, think, use tools, ask for approval, ask questions, write and submit a plan, name
//! the session, fail) and its stop reason ends the turn. Cards branch: `then` runs when the
//! person allowed, answered or approved, `otherwise` when not.

use std::borrow::Cow;

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer};
use serde_json::Value;

use harness::scenario::Dur;

/// A regular expression, compiled when the scenario is read (so a bad one is a located error).
#[derive(Debug, Clone)]
pub struct Regex(pub regex::Regex);

impl<'de> Deserialize<'de> for Regex {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        regex::Regex::new(&text)
            .map(Regex)
            .map_err(|e| serde::de::Error::custom(format!("`{text}` is not a regex: {e}")))
    }
}

impl JsonSchema for Regex {
    fn schema_name() -> Cow<'static, str> {
        "Regex".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "format": "regex",
            "description": "A regular expression (Rust `regex` syntax), searched anywhere in the text."
        })
    }
}

/// One script of the agent: the first whose `when` matches a prompt runs its turn.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentScript {
    /// A regex the prompt's text must contain; absent: every prompt.
    #[serde(default)]
    pub when: Option<Regex>,
    /// What the turn does, in order.
    #[serde(default)]
    pub steps: Vec<ScriptStep>,
    /// How the turn ends (default `end_turn`; a cancelled turn ends `cancelled` whatever this says).
    #[serde(default)]
    pub stop: StopReason,
}

impl AgentScript {
    /// Whether this script answers a prompt with this text.
    pub fn answers(&self, prompt: &str) -> bool {
        self.when.as_ref().is_none_or(|re| re.0.is_match(prompt))
    }
}

/// A prompt's stop reason (spec, `session/prompt`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The agent finished.
    #[default]
    EndTurn,
    /// It made as many model calls as a turn may.
    MaxTurnRequests,
    /// The model ran out of tokens.
    MaxTokens,
    /// The turn was cancelled.
    Cancelled,
}

impl StopReason {
    /// Its name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::EndTurn => "end_turn",
            Self::MaxTurnRequests => "max_turn_requests",
            Self::MaxTokens => "max_tokens",
            Self::Cancelled => "cancelled",
        }
    }
}

/// One step of a script. Each is a map with exactly one of these keys.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum ScriptStep {
    /// Say text: a string (said in one piece), or `{chunks, delay}`.
    Text(Say),
    /// Think aloud (`agent_thought_chunk`, `reasoning` event).
    Thought(String),
    /// Use a tool that needs nobody's approval (a read, a search): its call, its progress, its end.
    Tool(ScriptTool),
    /// Run a command after an approval card (`session/request_permission`).
    Permission(ScriptPermission),
    /// Ask the person questions (the `ask_user` tool: a `_lembas/question` card).
    Ask(ScriptAsk),
    /// Write the session's plan (`plan_write`): the plan structure, or `null` to clear it.
    Plan(Value),
    /// Submit a plan for approval (`plan_submit`: a `_lembas/plan` card).
    SubmitPlan(ScriptSubmitPlan),
    /// Name the session (at most 200 characters are kept).
    Title(String),
    /// Fail: an `error` event, and the turn ends (with the script's stop reason).
    Error(String),
    /// Report token usage (a `usage` event with these fields).
    Usage(Value),
    /// Pause (a slow model): cancel and steer reach the turn meanwhile.
    Wait(Dur),
}

/// Text to say.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum Say {
    /// In one piece.
    Whole(String),
    /// In pieces, `delay` apart (default: the device's step delay).
    Chunked {
        /// The pieces, in order.
        chunks: Vec<String>,
        /// The pause before each piece.
        #[serde(default)]
        delay: Option<Dur>,
    },
}

/// A tool that runs without a card.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScriptTool {
    /// Its name (`read`, `grep`, …).
    pub name: String,
    /// ACP's tool kind (default `other`): `read`, `edit`, `delete`, `move`, `search`, `execute`,
    /// `think`, `fetch`, `other`.
    #[serde(default)]
    pub kind: Option<String>,
    /// Its title on the card (default: the name).
    #[serde(default)]
    pub title: Option<String>,
    /// Its input.
    #[serde(default)]
    pub args: Option<Value>,
    /// Progress lines, sent as `in_progress` updates while it runs.
    #[serde(default)]
    pub progress: Vec<String>,
    /// What it gave back.
    #[serde(default)]
    pub output: String,
    /// It failed (`failed`, not `completed`).
    #[serde(default)]
    pub fails: bool,
}

/// A command the person must approve.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScriptPermission {
    /// The command line.
    pub command: String,
    /// Steps when allowed.
    #[serde(default)]
    pub then: Vec<ScriptStep>,
    /// Steps when denied, cancelled or not answered in time.
    #[serde(default)]
    pub otherwise: Vec<ScriptStep>,
}

/// Questions for the person.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScriptAsk {
    /// The questions, as the `ask_user` tool takes them: `[{header, question, multiple?,
    /// options: [{label, description?, recommended?}]}]` (the card keeps at most 4 of at most
    /// 6 options, the recommended one first).
    pub questions: Value,
    /// Why the agent asks.
    #[serde(default)]
    pub why: Option<String>,
    /// Steps when answered.
    #[serde(default)]
    pub then: Vec<ScriptStep>,
    /// Steps when dismissed, not answered in time, or nobody can be asked.
    #[serde(default)]
    pub otherwise: Vec<ScriptStep>,
}

/// A plan for approval.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScriptSubmitPlan {
    /// The plan's text (markdown).
    pub text: String,
    /// Where it is saved (default `PLAN.md`).
    #[serde(default)]
    pub path: Option<String>,
    /// Steps when approved or sent back for revision.
    #[serde(default)]
    pub then: Vec<ScriptStep>,
    /// Steps when dismissed, not answered in time, or nobody can approve it.
    #[serde(default)]
    pub otherwise: Vec<ScriptStep>,
}
