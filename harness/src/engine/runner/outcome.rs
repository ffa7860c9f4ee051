//! What a finished run hands back: its steps' verdicts and findings ([`RunOutcome`]), and what
//! they come to ([`Verdict`]), for the reports and the exit code.

use std::time::Duration;

use serde::Serialize;

use super::cell::Cell;
use crate::engine::verdict::{Failure, StepStatus, StepVerdict};
use crate::finding::Finding;

/// Everything a finished run has to say.
#[derive(Debug, Clone, Serialize)]
pub struct RunOutcome {
    /// The scenario's name.
    pub scenario: String,
    /// The cell it ran in.
    pub cell: Cell,
    /// Each step's verdict, in order.
    pub steps: Vec<StepVerdict>,
    /// What the monitors found, besides the steps.
    pub findings: Vec<Finding>,
    /// Why the run did not apply to the peer, when it did not: a capability it never listed, a
    /// set-up nothing arranged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_applicable: Option<String>,
    /// How long the run took.
    pub elapsed_ms: f64,
    /// The system under test's process, when the double started it: its starts, exits and
    /// output.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub process: Option<crate::process::ProcessReport>,
    /// What each hook did (`--hooks`): the set-up and the other side's actions a real peer's
    /// project did for the run. One that failed makes the run a scenario error: its set-up broke.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hooks: Vec<crate::engine::verdict::HookRun>,
    /// The rules the scenario says it checks (its `rules:`), to judge each (see
    /// [`RunOutcome::judgements`]).
    #[serde(skip)]
    pub listed_rules: Vec<String>,
}

/// What a run came to, for the exit code and the reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Every step passed (or was skipped by `when`), and the monitors found nothing.
    Passed,
    /// The peer never claimed what the scenario needs, and broke nothing before that.
    NotApplicable(String),
    /// The peer broke a check.
    Failed,
    /// The scenario itself went wrong.
    ScenarioError,
}

impl RunOutcome {
    /// The outcome of a double that ran with no scenario, as a simulated peer: no steps, only
    /// what its monitors found in `elapsed`.
    pub fn of_monitors(
        name: impl Into<String>,
        cell: Cell,
        findings: Vec<Finding>,
        elapsed: Duration,
    ) -> Self {
        Self {
            scenario: name.into(),
            cell,
            steps: Vec::new(),
            findings,
            not_applicable: None,
            elapsed_ms: elapsed.as_secs_f64() * 1000.0,
            process: None,
            hooks: Vec::new(),
            listed_rules: Vec::new(),
        }
    }

    /// The outcome of a run that ended without a verdict of its own (it could not start, or was
    /// stopped): one step in error, saying why.
    pub fn broken(name: impl Into<String>, cell: Cell, why: impl Into<String>) -> Self {
        let step = StepVerdict {
            index: "-".into(),
            line: 0,
            title: "the run".into(),
            status: StepStatus::Error,
            elapsed_ms: 0.0,
            started_ms: 0.0,
            failure: Some(Failure {
                summary: why.into(),
                ..Failure::default()
            }),
            not_applicable: None,
            rule: None,
        };
        Self {
            steps: vec![step],
            ..Self::of_monitors(name, cell, Vec::new(), Duration::ZERO)
        }
    }

    /// A run a signal stopped before its verdict: the findings so far, and one step in error
    /// saying so, so the reports asked for are still written and never read as a pass.
    pub fn interrupted(scenario: &str, cell: Cell, findings: Vec<Finding>) -> RunOutcome {
        RunOutcome {
            scenario: scenario.to_string(),
            cell,
            steps: vec![StepVerdict {
                index: "1".into(),
                line: 0,
                title: "interrupted".into(),
                status: StepStatus::Error,
                elapsed_ms: 0.0,
                started_ms: 0.0,
                failure: Some(crate::engine::verdict::Failure {
                    rule: None,
                    summary: "stopped by a signal (SIGINT or SIGTERM) before the scenario reached a verdict".into(),
                    awaited: None,
                    expected: None,
                    nearest: None,
                    diff: None,
                }),
                not_applicable: None,
                rule: None,
            }],
            findings,
            not_applicable: None,
            elapsed_ms: 0.0,
            process: None,
            hooks: Vec::new(),
            listed_rules: Vec::new(),
        }
    }

    /// Passed, failed (with the rules), not applicable (with why), or a broken scenario.
    ///
    /// The verdict: a scenario error over a failure over not applicable over a pass. A monitor
    /// finding fails the run even when it did not apply further.
    pub fn verdict(&self) -> Verdict {
        if self.scenario_error() {
            Verdict::ScenarioError
        } else if !self.findings.is_empty()
            || self.steps.iter().any(|s| s.status == StepStatus::Failed)
        {
            Verdict::Failed
        } else if let Some(why) = &self.not_applicable {
            Verdict::NotApplicable(why.clone())
        } else {
            Verdict::Passed
        }
    }

    /// Whether the peer passed: every step passed or was skipped by `when`, nothing found, and
    /// the scenario applied.
    pub fn passed(&self) -> bool {
        self.verdict() == Verdict::Passed
    }

    /// Whether the scenario itself went wrong (exit code 2 rather than 1): a step could not be
    /// run, or a hook failed.
    pub fn scenario_error(&self) -> bool {
        self.steps.iter().any(|s| s.status == StepStatus::Error)
            || self
                .hooks
                .iter()
                .any(|h| !h.ok && h.not_applicable.is_none())
    }

    /// Each rule the scenario checks (and any other a step named or a monitor reported): kept,
    /// broken, or not judged in this run and why.
    pub fn judgements(&self) -> Vec<crate::engine::judged::RuleJudgement> {
        crate::engine::judged::judge(
            &self.listed_rules,
            &self.steps,
            &self.findings,
            self.not_applicable
                .as_deref()
                .filter(|_| !self.steps.iter().any(|s| s.not_applicable.is_some())),
        )
    }

    /// Every rule the peer was caught breaking, from steps and monitors.
    pub fn broken_rules(&self) -> Vec<String> {
        let mut rules: Vec<String> = self
            .steps
            .iter()
            .filter_map(|s| s.failure.as_ref().and_then(|f| f.rule.clone()))
            .chain(self.findings.iter().map(|f| f.rule.clone()))
            .collect();
        rules.sort();
        rules.dedup();
        rules
    }
}
