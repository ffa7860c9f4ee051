//! Which rules a run judged: for each rule its scenario checks, whether the peer kept it, broke
//! it, or was never judged on it, and why not. A scenario whose later part did not apply still
//! judged what ran before; this is what says so.

use serde::Serialize;

use super::verdict::{StepStatus, StepVerdict};
use crate::finding::Finding;

/// What a run made of one rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Judged {
    /// A step that checks it passed, or its monitor watched the whole run and found nothing.
    Kept,
    /// A step or a monitor caught the peer breaking it.
    Broken,
    /// Nothing checked it in this run (see the judgement's `why`).
    NotJudged,
}

/// One rule's judgement in one run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RuleJudgement {
    /// The rule's id.
    pub rule: String,
    /// What the run made of it.
    pub judged: Judged,
    /// Why it was not judged, or how it was kept without a step of its own.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

impl RuleJudgement {
    /// Whether the run judged the rule at all (kept or broken).
    pub fn was_judged(&self) -> bool {
        self.judged != Judged::NotJudged
    }
}

/// How many of a run's rules it judged, in one line: `judged 5 of 8 rules (kept 4, broken
/// 1)`.
pub fn summary(judgements: &[RuleJudgement]) -> String {
    let count = |j: Judged| judgements.iter().filter(|r| r.judged == j).count();
    let judged = judgements.iter().filter(|r| r.was_judged()).count();
    format!(
        "judged {judged} of {} rules (kept {}, broken {})",
        judgements.len(),
        count(Judged::Kept),
        count(Judged::Broken)
    )
}

/// The step that ended the run early (failed, erred or did not apply), with its place.
fn stop(steps: &[StepVerdict]) -> Option<(usize, &StepVerdict)> {
    steps.iter().enumerate().find(|(_, s)| {
        matches!(
            s.status,
            StepStatus::Failed | StepStatus::Error | StepStatus::NotApplicable
        )
    })
}

/// Why a run stopped, in a few words: `step 7 (line 35) did not apply: …`.
fn stopped_because(step: &StepVerdict) -> String {
    let place = format!("step {} (line {})", step.index, step.line);
    match step.status {
        StepStatus::NotApplicable => format!(
            "{place} did not apply: {}",
            step.not_applicable
                .as_deref()
                .unwrap_or("the peer never claimed it")
        ),
        StepStatus::Failed => format!("{place} failed"),
        _ => format!("{place} could not be run"),
    }
}

/// Judges each rule of `listed` (the scenario's `rules:`), and any other rule a step names or a
/// finding reports, from the run's steps and findings. `not_applicable` is why the whole run
/// did not apply before any step ran (a set-up nothing arranged), when so.
pub fn judge(
    listed: &[String],
    steps: &[StepVerdict],
    findings: &[Finding],
    not_applicable: Option<&str>,
) -> Vec<RuleJudgement> {
    let mut rules: Vec<&str> = listed.iter().map(String::as_str).collect();
    rules.extend(steps.iter().filter_map(|s| s.rule.as_deref()));
    rules.extend(findings.iter().map(|f| f.rule.as_str()));
    let mut seen = std::collections::BTreeSet::new();
    rules.retain(|r| seen.insert(*r));
    let stopped = stop(steps);
    let ran_to_the_end = stopped.is_none() && not_applicable.is_none();
    rules
        .into_iter()
        .map(|rule| {
            let broken = findings.iter().any(|f| f.rule == rule)
                || steps.iter().any(|s| {
                    s.status == StepStatus::Failed
                        && s.failure.as_ref().and_then(|f| f.rule.as_deref()) == Some(rule)
                });
            let mut own = steps
                .iter()
                .enumerate()
                .filter(|(_, s)| s.rule.as_deref() == Some(rule));
            let (judged, why) = if broken {
                (Judged::Broken, None)
            } else if own.clone().any(|(_, s)| s.status == StepStatus::Passed) {
                (Judged::Kept, None)
            } else if let Some((at, step)) = own.next() {
                let why = match (not_applicable, stopped) {
                    (Some(why), None) => format!("the run did not apply: {why}"),
                    _ => unjudged_step(at, step, stopped),
                };
                (Judged::NotJudged, Some(why))
            } else if ran_to_the_end {
                (
                    Judged::Kept,
                    Some("no step checks it here: its monitor watched the whole run".into()),
                )
            } else {
                let why = match (not_applicable, stopped) {
                    (Some(why), _) => format!("the run did not apply: {why}"),
                    (None, Some((_, step))) => format!(
                        "no step checks it here, and its monitor did not watch the whole run: \
                         {}",
                        stopped_because(step)
                    ),
                    (None, None) => "the run did not reach its end".into(),
                };
                (Judged::NotJudged, Some(why))
            };
            RuleJudgement {
                rule: rule.to_string(),
                judged,
                why,
            }
        })
        .collect()
}

/// Why a step that checks a rule judged nothing: it did not apply, the run had stopped before
/// it, or its `when` did not hold in this run.
fn unjudged_step(at: usize, step: &StepVerdict, stopped: Option<(usize, &StepVerdict)>) -> String {
    let place = format!("step {} (line {})", step.index, step.line);
    match (step.status, stopped) {
        (StepStatus::NotApplicable, _) => format!(
            "{place} did not apply: {}",
            step.not_applicable
                .as_deref()
                .unwrap_or("the peer never claimed it")
        ),
        (StepStatus::Error, _) => format!("{place} could not be run"),
        (_, Some((stop_at, stop))) if stop_at < at => {
            format!("{place} did not run: {}", stopped_because(stop))
        }
        _ => format!("{place} did not run: its `when` did not hold here"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::verdict::Failure;

    fn step(index: &str, rule: Option<&str>, status: StepStatus) -> StepVerdict {
        StepVerdict {
            index: index.into(),
            line: index.parse::<u64>().unwrap_or(0) * 10,
            title: "expect".into(),
            status,
            elapsed_ms: 0.0,
            started_ms: 0.0,
            failure: (status == StepStatus::Failed).then(|| Failure {
                rule: rule.map(str::to_string),
                ..Failure::default()
            }),
            not_applicable: (status == StepStatus::NotApplicable)
                .then(|| "needs the capability `steer`".into()),
            rule: rule.map(str::to_string),
        }
    }

    fn listed(rules: &[&str]) -> Vec<String> {
        rules.iter().map(|r| r.to_string()).collect()
    }

    fn of<'a>(all: &'a [RuleJudgement], rule: &str) -> &'a RuleJudgement {
        all.iter()
            .find(|j| j.rule == rule)
            .unwrap_or_else(|| panic!("{rule} judged in {all:?}"))
    }

    #[test]
    fn a_run_that_stops_not_applicable_still_judges_what_ran_before() {
        let steps = [
            step("1", Some("a.first"), StepStatus::Passed),
            step("2", Some("b.steer"), StepStatus::NotApplicable),
            step("3", Some("c.later"), StepStatus::Skipped),
        ];
        let all = judge(
            &listed(&["a.first", "b.steer", "c.later", "d.monitor"]),
            &steps,
            &[],
            None,
        );
        assert_eq!(of(&all, "a.first").judged, Judged::Kept);
        let steer = of(&all, "b.steer");
        assert_eq!(steer.judged, Judged::NotJudged);
        assert!(
            steer
                .why
                .as_deref()
                .unwrap_or("")
                .contains("needs the capability `steer`")
        );
        let later = of(&all, "c.later");
        assert_eq!(later.judged, Judged::NotJudged);
        assert!(
            later
                .why
                .as_deref()
                .unwrap_or("")
                .contains("step 2 (line 20) did not apply"),
            "{later:?}"
        );
        // A monitor that did not watch the whole run is not said to have judged it.
        assert_eq!(of(&all, "d.monitor").judged, Judged::NotJudged);
    }

    #[test]
    fn findings_and_failed_steps_break_their_rules_and_a_full_run_keeps_its_monitors() {
        let steps = [
            step("1", Some("a.first"), StepStatus::Passed),
            step("2", None, StepStatus::Skipped),
        ];
        let all = judge(&listed(&["a.first", "d.monitor"]), &steps, &[], None);
        assert_eq!(of(&all, "d.monitor").judged, Judged::Kept);
        assert!(of(&all, "d.monitor").why.is_some());
        // A `when` that left a step out: that step's rule is not judged, and says why.
        let steps = [
            step("1", Some("a.first"), StepStatus::Passed),
            step("2", Some("e.other"), StepStatus::Skipped),
        ];
        let all = judge(&listed(&["e.other"]), &steps, &[], None);
        assert!(
            of(&all, "e.other")
                .why
                .as_deref()
                .unwrap_or("")
                .contains("`when`")
        );

        let finding = Finding::new("d.monitor", "sent a thing twice");
        let steps = [step("1", Some("a.first"), StepStatus::Failed)];
        let all = judge(&listed(&["d.monitor"]), &steps, &[finding], None);
        assert_eq!(of(&all, "d.monitor").judged, Judged::Broken);
        assert_eq!(of(&all, "a.first").judged, Judged::Broken);
    }

    #[test]
    fn a_run_that_never_applied_judges_nothing_and_says_why() {
        let steps = [step("1", Some("a.first"), StepStatus::Skipped)];
        let all = judge(
            &listed(&["a.first", "d.monitor"]),
            &steps,
            &[],
            Some("nothing arranged `answer_cards`"),
        );
        assert!(all.iter().all(|j| !j.was_judged()), "{all:?}");
        assert!(
            of(&all, "d.monitor")
                .why
                .as_deref()
                .unwrap_or("")
                .contains("answer_cards")
        );
    }
}
