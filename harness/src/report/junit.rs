//! The run as JUnit XML, which CI systems show: one suite a run, one case a step, and one case
//! for the monitors.

use std::time::Duration;

use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};

use crate::engine::{RunOutcome, StepStatus, Verdict};

/// Renders the outcome.
pub fn render(double: &str, outcome: &RunOutcome) -> String {
    render_many(double, double, &[outcome])
}

/// Renders several runs as one report named `name`, a suite each (`harness run` writes one
/// file a cell, with every scenario run in it).
pub fn render_many(name: &str, double: &str, outcomes: &[&RunOutcome]) -> String {
    let mut report = Report::new(name);
    for outcome in outcomes {
        report.add_test_suite(suite(double, outcome));
    }
    report
        .to_string()
        .unwrap_or_else(|e| format!("<!-- cannot render JUnit: {e} -->"))
}

/// A report of one passing case (`case` in suite `suite`) whose system output says `message`:
/// for a command that judged no scenario run but passed (an exploration that found nothing).
pub fn render_passed(name: &str, suite: &str, case: &str, message: &str) -> String {
    let mut one = TestCase::new(case.to_string(), TestCaseStatus::success());
    one.set_system_out(message.to_string());
    let mut cases = TestSuite::new(suite.to_string());
    cases.add_test_case(one);
    let mut report = Report::new(name);
    report.add_test_suite(cases);
    report
        .to_string()
        .unwrap_or_else(|e| format!("<!-- cannot render JUnit: {e} -->"))
}

/// One run as a suite: a case a step, one for the monitors, and the system under test's output
/// and hooks as the suite's output.
fn suite(double: &str, outcome: &RunOutcome) -> TestSuite {
    let mut suite = TestSuite::new(format!("{} [{}]", outcome.scenario, outcome.cell));
    // A run that did not apply says why on the step that found it, or, when it applied to no
    // step at all (set-up nothing arranged), on every step.
    let not_applicable = match outcome.verdict() {
        Verdict::NotApplicable(why) => Some(why),
        _ => None,
    };
    let found_on_a_step = outcome
        .steps
        .iter()
        .any(|s| s.status == StepStatus::NotApplicable);
    for step in &outcome.steps {
        let mut status = match step.status {
            StepStatus::Passed => TestCaseStatus::success(),
            StepStatus::Skipped | StepStatus::NotApplicable => TestCaseStatus::skipped(),
            StepStatus::Failed => TestCaseStatus::non_success(NonSuccessKind::Failure),
            StepStatus::Error => TestCaseStatus::non_success(NonSuccessKind::Error),
        };
        match (&step.not_applicable, &not_applicable) {
            (Some(why), _) => {
                status.set_message(format!("not applicable: {why}"));
            }
            (None, Some(why)) if step.status == StepStatus::Skipped && !found_on_a_step => {
                status.set_message(format!("not applicable: {why}"));
            }
            _ => {}
        }
        if let Some(failure) = &step.failure {
            let message = match &failure.rule {
                Some(rule) => format!("[{rule}] {}", failure.summary),
                None => failure.summary.clone(),
            };
            status.set_message(message);
            status.set_description(super::human::failure_text(failure));
        }
        let mut case = TestCase::new(
            format!("{} {} (line {})", step.index, step.title, step.line),
            status,
        );
        case.set_classname(format!("{double}.{}", outcome.scenario));
        case.set_time(Duration::from_secs_f64(step.elapsed_ms / 1000.0));
        suite.add_test_case(case);
    }
    let monitors = if outcome.findings.is_empty() {
        TestCaseStatus::success()
    } else {
        let mut status = TestCaseStatus::non_success(NonSuccessKind::Failure);
        status.set_message(format!("{} finding(s)", outcome.findings.len()));
        status.set_description(
            outcome
                .findings
                .iter()
                .map(|f| f.to_string())
                .collect::<Vec<_>>()
                .join("\n"),
        );
        status
    };
    let mut case = TestCase::new("monitors", monitors);
    case.set_classname(format!("{double}.{}", outcome.scenario));
    suite.add_test_case(case);
    // A hook that failed broke the run's set-up: the suite must not read green.
    let failed_hooks: Vec<String> = outcome
        .hooks
        .iter()
        .filter(|h| !h.ok)
        .map(|h| format!("{h}\n{}", h.output))
        .collect();
    if !failed_hooks.is_empty() {
        let mut status = TestCaseStatus::non_success(NonSuccessKind::Error);
        status.set_message(format!("{} hook(s) failed", failed_hooks.len()));
        status.set_description(failed_hooks.join("\n"));
        let mut case = TestCase::new("hooks", status);
        case.set_classname(format!("{double}.{}", outcome.scenario));
        suite.add_test_case(case);
    }
    suite.set_time(Duration::from_secs_f64(outcome.elapsed_ms / 1000.0));
    // Which rules the run judged, as the suite's properties: CI shows them beside the cases.
    let judgements = outcome.judgements();
    suite.add_property((
        "judged",
        crate::engine::judged::summary(&judgements).as_str(),
    ));
    for j in &judgements {
        let value = match (&j.judged, &j.why) {
            (crate::engine::Judged::NotJudged, Some(why)) => format!("not judged: {why}"),
            (crate::engine::Judged::NotJudged, None) => "not judged".into(),
            (crate::engine::Judged::Kept, _) => "kept".into(),
            (crate::engine::Judged::Broken, _) => "broken".into(),
        };
        suite.add_property((format!("rule {}", j.rule).as_str(), value.as_str()));
    }
    let mut out = String::new();
    for hook in &outcome.hooks {
        out.push_str(&format!("{hook}\n"));
        for line in hook.output.lines() {
            out.push_str(&format!("    {line}\n"));
        }
    }
    if let Some(process) = &outcome.process {
        out.push_str(&format!("system under test: {}\n", process.command));
        for line in &process.output {
            out.push_str(&format!(
                "{:>9.1} ms {} {}\n",
                line.at_ms, line.stream, line.text
            ));
        }
    }
    if !out.is_empty() {
        suite.set_system_out(out);
    }
    suite
}
