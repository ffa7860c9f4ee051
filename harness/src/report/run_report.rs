//! A run's verdict as a test that embeds a double takes it: passed or not, the rules the peer
//! broke, and the same report the command line prints when a test asserts and it did not hold.

use std::fmt;

use crate::engine::{RunOutcome, Verdict};
use crate::finding::Finding;
use crate::journal::Entry;

/// What one run of a double came to: its scenario's outcome (or, for a double that ran without
/// one, what its monitors found) and the last messages, for the report.
#[derive(Debug, Clone)]
#[must_use = "a verdict is for asserting on: call `assert_passed()` or read `verdict()`"]
pub struct RunReport {
    double: &'static str,
    outcome: RunOutcome,
    recent: Vec<Entry>,
    strict: bool,
}

impl RunReport {
    /// The report of `double`'s run (`"fake-instance"`, `"fake-device"`).
    pub fn new(double: &'static str, outcome: RunOutcome, recent: Vec<Entry>) -> Self {
        Self {
            double,
            outcome,
            recent,
            strict: false,
        }
    }

    /// The same report, strict: a scenario that did not apply to the peer fails
    /// [`RunReport::assert_passed`] as a failure does (the commands' `--strict`).
    pub fn strict(mut self) -> Self {
        self.strict = true;
        self
    }

    /// Passed, failed (with the rules), not applicable (with why), or a broken scenario.
    pub fn verdict(&self) -> Verdict {
        self.outcome.verdict()
    }

    /// Whether every step passed and no monitor found anything.
    pub fn passed(&self) -> bool {
        self.outcome.passed()
    }

    /// Every rule the peer was caught breaking, from steps and monitors, sorted.
    pub fn broken_rules(&self) -> Vec<String> {
        self.outcome.broken_rules()
    }

    /// What the monitors found, besides the steps.
    pub fn findings(&self) -> &[Finding] {
        &self.outcome.findings
    }

    /// The whole outcome: each step's verdict, the process, the hooks.
    pub fn outcome(&self) -> &RunOutcome {
        &self.outcome
    }

    /// The last messages of the run, oldest first (strings over 64 KiB cut, as the journal keeps
    /// them in memory).
    pub fn recent(&self) -> &[Entry] {
        &self.recent
    }

    /// The outcome and the last messages, for reports of many runs.
    pub fn into_parts(self) -> (RunOutcome, Vec<Entry>) {
        (self.outcome, self.recent)
    }

    /// The report a person reads: each step, what failed and why, the last messages.
    pub fn render(&self) -> String {
        super::human::render(self.double, &self.outcome, &self.recent)
    }

    /// Panics with the report unless the run passed. A scenario that did not apply to the
    /// peer (it needs what the peer never claimed) is no failure, as everywhere in the suite
    /// (the commands exit 0, the pytest plugin skips): it is said on stderr and this returns,
    /// unless the report is [`RunReport::strict`].
    #[track_caller]
    pub fn assert_passed(&self) {
        match self.verdict() {
            Verdict::Passed => {}
            Verdict::NotApplicable(why) if !self.strict => {
                eprintln!("{}: not applicable (not judged): {why}", self.double);
            }
            _ => panic!("the run did not pass:\n{}", self.render()),
        }
    }

    /// Panics with the report unless the run failed and named `rule` among those broken: how a
    /// test shows that a check catches the peer it is meant to catch.
    #[track_caller]
    pub fn assert_failed_on(&self, rule: &str) {
        if self.verdict() != Verdict::Failed || !self.broken_rules().iter().any(|r| r == rule) {
            panic!(
                "the run was to fail on `{rule}`, but came to {:?} (rules: {:?}):\n{}",
                self.verdict(),
                self.broken_rules(),
                self.render()
            );
        }
    }
}

impl fmt::Display for RunReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Cell;

    fn not_applicable() -> RunReport {
        let mut outcome = RunOutcome::of_monitors(
            "files-search",
            Cell::lembas(2, crate::lembas::Spec::V1_1_0),
            Vec::new(),
            std::time::Duration::ZERO,
        );
        outcome.not_applicable = Some("the device did not list `files`".into());
        RunReport::new("fake-instance", outcome, Vec::new())
    }

    #[test]
    fn not_applicable_is_no_failure_unless_strict() {
        not_applicable().assert_passed();
        let strict = std::panic::catch_unwind(|| not_applicable().strict().assert_passed());
        assert!(strict.is_err(), "strict makes it a failure");
    }
}
