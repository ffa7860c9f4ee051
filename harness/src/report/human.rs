//! The run for a person: each step's verdict, and for a failure the rule, what was awaited,
//! the diff and the last messages.

use std::fmt::Write;

use crate::engine::{Failure, RunOutcome, StepStatus, Verdict};
use crate::journal::{Direction, Entry};
use crate::rules::catalogue;

/// How many of the last messages a failed run shows.
const LAST_MESSAGES: usize = 12;

/// The longest message text shown on one line.
const MESSAGE_WIDTH: usize = 240;

/// Renders the outcome.
pub fn render(double: &str, outcome: &RunOutcome, recent: &[Entry]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{double} · scenario {} · {}",
        outcome.scenario, outcome.cell
    );
    for step in &outcome.steps {
        let mark = match step.status {
            StepStatus::Passed => "ok  ",
            StepStatus::Failed => "FAIL",
            StepStatus::Skipped => "skip",
            StepStatus::Error => "ERR ",
            StepStatus::NotApplicable => "n/a ",
        };
        let _ = writeln!(
            out,
            "  {mark} {:<6} {:<48} line {:<4} {:>7.1} ms",
            step.index, step.title, step.line, step.elapsed_ms
        );
        if let Some(failure) = &step.failure {
            for line in failure_text(failure).lines() {
                let _ = writeln!(out, "         {line}");
            }
        }
        if let Some(why) = &step.not_applicable {
            let _ = writeln!(out, "         not applicable: {why}");
        }
    }
    if !outcome.findings.is_empty() {
        let _ = writeln!(out, "  monitors found:");
        for finding in &outcome.findings {
            let _ = writeln!(out, "    {finding}");
            if let Some(rule) = catalogue().get(&finding.rule) {
                let _ = writeln!(out, "      rule: {} (spec: {})", rule.says, rule.section);
            }
            if let Some(detail) = &finding.detail {
                for line in detail.lines() {
                    let _ = writeln!(out, "      {line}");
                }
            }
        }
    }
    let verdict = outcome.verdict();
    if matches!(verdict, Verdict::Failed | Verdict::ScenarioError) {
        out.push_str(&last_messages(recent, LAST_MESSAGES));
    }
    for hook in &outcome.hooks {
        let _ = writeln!(
            out,
            "  {hook} at {:.0} ms in {:.0} ms",
            hook.at_ms, hook.elapsed_ms
        );
        if !hook.ok || matches!(verdict, Verdict::Failed | Verdict::ScenarioError) {
            for line in hook.output.lines().take(20) {
                let _ = writeln!(out, "      {}", clip(line));
            }
        }
    }
    if let Some(process) = &outcome.process {
        process_text(
            &mut out,
            process,
            matches!(verdict, Verdict::Failed | Verdict::ScenarioError),
        );
    }
    judged_text(&mut out, outcome);
    let verdict = match verdict {
        Verdict::Passed => "PASSED".to_string(),
        Verdict::NotApplicable(why) => format!("NOT APPLICABLE: {why}"),
        Verdict::ScenarioError => "SCENARIO ERROR".to_string(),
        Verdict::Failed if outcome.broken_rules().is_empty() => {
            // A failed step that names no rule: its summary is the best account of what went
            // wrong.
            let first = outcome
                .steps
                .iter()
                .find_map(|s| s.failure.as_ref())
                .map(|f| f.summary.clone());
            format!(
                "FAILED: {} (the step names no rule: give it `rule:` to cite and baseline it)",
                first.unwrap_or_else(|| "a step failed".into())
            )
        }
        Verdict::Failed => format!(
            "FAILED: the peer broke {}",
            outcome.broken_rules().join(", ")
        ),
    };
    let _ = writeln!(out, "  {verdict} in {:.0} ms", outcome.elapsed_ms);
    out
}

/// How many rules not judged a report lists one by one.
const NOT_JUDGED_SHOWN: usize = 20;

/// Which of its rules the run judged, and each it did not, with why.
fn judged_text(out: &mut String, outcome: &RunOutcome) {
    let judgements = outcome.judgements();
    if judgements.is_empty() {
        return;
    }
    let _ = writeln!(out, "  {}", crate::engine::judged::summary(&judgements));
    let not_judged: Vec<_> = judgements.iter().filter(|j| !j.was_judged()).collect();
    for j in not_judged.iter().take(NOT_JUDGED_SHOWN) {
        let _ = writeln!(
            out,
            "    not judged: {} ({})",
            j.rule,
            j.why.as_deref().unwrap_or("nothing checked it")
        );
    }
    if not_judged.len() > NOT_JUDGED_SHOWN {
        let _ = writeln!(
            out,
            "    … and {} more not judged",
            not_judged.len() - NOT_JUDGED_SHOWN
        );
    }
}

/// How many of the process's last lines a failed run shows.
const LAST_OUTPUT_LINES: usize = 40;

/// The system under test's starts and, for a run that failed, its last output.
fn process_text(out: &mut String, process: &crate::process::ProcessReport, failed: bool) {
    let _ = writeln!(out, "  system under test: {}", process.command);
    for run in &process.runs {
        let ended = match (&run.exited, run.stopped) {
            (Some(exit), true) => format!("stopped by the run ({exit})"),
            (Some(exit), false) => format!("ended by itself ({exit})"),
            (None, _) => "still running".into(),
        };
        let _ = writeln!(
            out,
            "    start {} (pid {}) at {:.0} ms: {ended}",
            run.run, run.pid, run.started_ms
        );
    }
    if !failed {
        return;
    }
    let skip = process.output.len().saturating_sub(LAST_OUTPUT_LINES);
    let _ = writeln!(
        out,
        "  its last output{}:",
        if skip > 0 || process.dropped_lines > 0 {
            " (older lines left out)"
        } else {
            ""
        }
    );
    if process.output.is_empty() {
        let _ = writeln!(out, "    (nothing)");
    }
    for line in &process.output[skip..] {
        let _ = writeln!(
            out,
            "    {:>9.1} ms  {} {}",
            line.at_ms,
            line.stream,
            clip(&line.text)
        );
    }
}

/// The last `n` messages, a line each.
pub fn last_messages(recent: &[Entry], n: usize) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "  last messages:");
    let skip = recent.len().saturating_sub(n);
    for entry in &recent[skip..] {
        let arrow = match entry.dir {
            Direction::In => "<-",
            Direction::Out => "->",
            Direction::Event => "--",
        };
        let _ = writeln!(
            out,
            "    {:>9.1} ms  link {} {arrow} {}",
            entry.t_ms,
            entry.link,
            clip(&entry.msg.to_string())
        );
    }
    out
}

/// The run in one line: the double, the scenario, the cell and the verdict (`--quiet`).
pub fn one_line(double: &str, outcome: &RunOutcome) -> String {
    let verdict = match outcome.verdict() {
        Verdict::Passed => "PASSED".to_string(),
        Verdict::NotApplicable(why) => format!("NOT APPLICABLE: {why}"),
        Verdict::ScenarioError => "SCENARIO ERROR".to_string(),
        Verdict::Failed => format!("FAILED: {}", outcome.broken_rules().join(", ")),
    };
    format!(
        "{double} · scenario {} · {}: {verdict} in {:.0} ms\n",
        outcome.scenario, outcome.cell, outcome.elapsed_ms
    )
}

/// A failure in lines: the rule and what it says, the summary, what was awaited, the diff.
pub fn failure_text(failure: &Failure) -> String {
    let mut out = String::new();
    if let Some(id) = &failure.rule {
        match catalogue().get(id) {
            Some(rule) => {
                let _ = writeln!(out, "rule {id}: {} (spec: {})", rule.says, rule.section);
                if let Some(readings) = &rule.readings {
                    let _ = writeln!(out, "readings accepted: {readings}");
                }
            }
            None => {
                let _ = writeln!(out, "rule {id}");
            }
        }
    }
    let _ = writeln!(out, "{}", failure.summary);
    if let Some(awaited) = &failure.awaited {
        let _ = writeln!(out, "awaited: {awaited}");
    }
    match (&failure.diff, &failure.expected) {
        (Some(diff), _) => {
            let _ = writeln!(out, "diff (expected vs nearest received):");
            for line in diff.lines() {
                let _ = writeln!(out, "  {line}");
            }
        }
        (None, Some(expected)) => {
            let _ = writeln!(out, "expected: {}", clip(&expected.to_string()));
            if let Some(nearest) = &failure.nearest {
                let _ = writeln!(out, "received: {}", clip(&nearest.to_string()));
            } else {
                let _ = writeln!(out, "received: nothing like it");
            }
        }
        (None, None) => {}
    }
    out
}

fn clip(text: &str) -> String {
    if text.chars().count() <= MESSAGE_WIDTH {
        return text.to_string();
    }
    let cut: String = text.chars().take(MESSAGE_WIDTH).collect();
    format!("{cut}…")
}
