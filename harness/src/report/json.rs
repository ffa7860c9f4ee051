//! The run as JSON, for tools.

use serde_json::json;

use crate::engine::{RunOutcome, Verdict};
use crate::journal::Entry;
use crate::rules::catalogue;

/// The outcome, each rule the run judged or not (and why not), every broken rule with its
/// catalogue entry, and the last messages.
pub fn render(double: &str, outcome: &RunOutcome, recent: &[Entry]) -> String {
    let rules: Vec<_> = outcome
        .broken_rules()
        .iter()
        .filter_map(|id| catalogue().get(id).cloned())
        .collect();
    let verdict = match outcome.verdict() {
        Verdict::Passed => "passed",
        Verdict::NotApplicable(_) => "not_applicable",
        Verdict::Failed => "failed",
        Verdict::ScenarioError => "scenario_error",
    };
    let judgements = outcome.judgements();
    let value = json!({
        "double": double,
        "verdict": verdict,
        "passed": outcome.passed(),
        "judged": crate::engine::judged::summary(&judgements),
        "rules": judgements,
        "outcome": outcome,
        "broken_rules": rules,
        "last_messages": recent,
    });
    serde_json::to_string_pretty(&value).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
}
