//! What each step came to.

use serde::Serialize;
use serde_json::Value;

/// A step's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum StepStatus {
    /// It did what it should, and the peer did what it should.
    Passed,
    /// The peer broke a check.
    Failed,
    /// Not run: a `when` excluded it, or an earlier step failed.
    Skipped,
    /// The scenario itself is wrong here (an unknown variable, a reply to nothing).
    Error,
    /// The peer never claimed what this step needs (a capability it did not list, a set-up
    /// nothing arranged): the run ends here, neither passed nor failed.
    #[serde(rename = "not_applicable")]
    NotApplicable,
}

/// Why a step failed, with everything a person needs to see what the peer did wrong.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Failure {
    /// The catalogue rule broken, when the step names one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// One sentence.
    pub summary: String,
    /// What the step waited for, and how long.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub awaited: Option<String>,
    /// The expected pattern, as written (variables substituted).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expected: Option<Value>,
    /// The received message nearest to it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nearest: Option<Value>,
    /// A readable diff between the two.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diff: Option<String>,
}

/// One step's verdict.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepVerdict {
    /// Its place: `3`, or `5.2` inside a group.
    pub index: String,
    /// Its line in the scenario file.
    pub line: u64,
    /// What it does, in a few words (`expect _lembas/hello`).
    pub title: String,
    /// The verdict.
    pub status: StepStatus,
    /// How long it took.
    pub elapsed_ms: f64,
    /// When it started, on the journal's clock (so a report can place it among the messages).
    pub started_ms: f64,
    /// Why it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<Failure>,
    /// Why it did not apply to the peer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_applicable: Option<String>,
    /// The rule it checks, when it judges the peer and names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
}

/// What one hook did, for the report.
#[derive(Debug, Clone, Serialize)]
#[allow(missing_docs)] // fields whose names say it all go undocumented
pub struct HookRun {
    pub action: String,
    /// `run`, `http` or `stdin`.
    pub kind: &'static str,
    /// The command, the request line, or the text written.
    pub detail: String,
    /// Whether it did what it should (exit 0, a 2xx answer, the text written).
    pub ok: bool,
    /// Why the project does not do this action at all (an HTTP hook's 501): the run does not
    /// apply from there on, which is no broken set-up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_applicable: Option<String>,
    /// Its exit code, or the HTTP status.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<i32>,
    /// What it printed or answered (bounded), or why it failed.
    pub output: String,
    /// When it started, in milliseconds since the run began.
    pub at_ms: f64,
    /// How long it took.
    pub elapsed_ms: f64,
}

impl std::fmt::Display for HookRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let status = match (self.kind, self.status) {
            ("http", Some(status)) => format!("HTTP {status}"),
            (_, Some(code)) => format!("exit {code}"),
            (_, None) => String::new(),
        };
        write!(
            f,
            "hook `{}` ({} {}): {}{}",
            self.action,
            self.kind,
            self.detail.trim_end(),
            match (self.ok, &self.not_applicable) {
                (true, _) => "done",
                (false, Some(_)) => "not implemented by the project",
                (false, None) => "FAILED",
            },
            if status.is_empty() {
                String::new()
            } else {
                format!(", {status}")
            }
        )
    }
}
