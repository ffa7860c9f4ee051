//! The walk through a scenario's steps: numbering them, unfolding each `when` into its steps
//! or skipping them, stopping at the first step that fails, errs or does not apply (the rest
//! are skipped), and turning each step's outcome into its verdict.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use serde_json::Value;
use serde_saphyr::Spanned;
use tokio::time::Instant;

use super::Runner;
use super::describe::title;
use super::steps::Outcome;
use crate::engine::applicability::{Applies, Intent};
use crate::engine::hub::Hub;
use crate::engine::verdict::{Failure, StepStatus, StepVerdict};
use crate::pattern::Pattern;
use crate::scenario::model::*;

impl Runner {
    /// Walks `steps`, numbering each after `prefix` (`3.` for the steps of the third step's
    /// `when`). Boxed, as a `when` walks its own steps through it.
    pub(super) fn steps<'a>(
        &'a mut self,
        steps: &'a [Spanned<Step>],
        prefix: &'a str,
    ) -> Pin<Box<dyn Future<Output = ()> + Send + 'a>> {
        Box::pin(async move {
            for (i, step) in steps.iter().enumerate() {
                let index = format!("{prefix}{}", i + 1);
                match &step.value {
                    Step::When(when) => self.when(step, when, index).await,
                    _ => self.one(step, index).await,
                }
            }
        })
    }

    /// A `when`: its steps run when the run is in the cell it names, its value matches and the
    /// peer claimed what it needs, and are skipped otherwise. A value that cannot be judged is
    /// the scenario's error, and stops the run.
    async fn when(&mut self, step: &Spanned<Step>, when: &WhenStep, index: String) {
        let in_cell = when.protocol.is_none_or(|p| p == self.cell.protocol())
            && when.spec.as_ref().is_none_or(|s| self.cell.spec_is(s));
        let mut holds = match (in_cell && !self.stopped, &when.that, &when.matches) {
            (true, Some(that), Some(matches)) => self.holds(that, matches),
            (in_cell, _, _) => Ok(in_cell),
        };
        if matches!(holds, Ok(true)) && !when.needs.is_empty() {
            let intent = Intent::Claims { needs: &when.needs };
            let deadline = Instant::now() + self.default_timeout;
            holds = Ok(self.admit(intent, deadline).await.is_ok());
        }
        match holds {
            Ok(true) if !self.stopped => {
                self.steps(&when.steps, &format!("{index}.")).await;
            }
            Ok(_) => self.skip_all(&when.steps, &format!("{index}.")),
            Err(message) => {
                self.stopped = true;
                // A `when` that cannot be judged did not run either, and is the step in error.
                let erred = StepVerdict {
                    status: StepStatus::Error,
                    failure: Some(Failure {
                        summary: message,
                        ..Failure::default()
                    }),
                    rule: None,
                    ..self.skipped(step, index)
                };
                self.verdicts.push(erred);
            }
        }
    }

    /// One step other than a `when`: skipped once the run has stopped (or reached the finding
    /// it ends at), else run to its verdict, which the run's watchers hear of.
    async fn one(&mut self, step: &Spanned<Step>, index: String) {
        if let Some(rule) = &self.end_at
            && self.hub.findings().has(rule)
        {
            self.stopped = true;
        }
        if self.stopped {
            let skipped = self.skipped(step, index);
            self.verdicts.push(skipped);
            return;
        }
        let (line, title) = (step.referenced.line(), title(&step.value));
        let started = Instant::now();
        let started_ms = self.hub.journal().elapsed_ms();
        tracing::debug!(step = %index, line, "{title}");
        if self.reports_progress {
            self.hub.progress().step_started(&index, &title, line);
        }
        let outcome = self.outcome(&step.value).await;
        let elapsed_ms = started.elapsed().as_secs_f64() * 1000.0;
        let (status, failure, not_applicable) = self.settle(outcome);
        self.stopped |= status != StepStatus::Passed;
        let verdict = StepVerdict {
            index,
            line,
            title,
            status,
            elapsed_ms,
            started_ms,
            failure,
            not_applicable,
            rule: rule_of(&step.value),
        };
        if self.reports_progress {
            self.hub.progress().step_ended(&verdict);
        }
        self.verdicts.push(verdict);
    }

    /// Runs a step, unless the double already knows the scenario does not apply; a run that
    /// ends at a finding stops waiting on the step when the finding comes.
    async fn outcome(&mut self, step: &Step) -> Outcome {
        // What the whole scenario relies on, as far as the double knows by now.
        match self.hub.applies(Intent::Step) {
            Applies::No(why) => Outcome::NotApplicable(why),
            Applies::Yes | Applies::NotYet => match self.end_at.clone() {
                None => self.step(step).await,
                Some(rule) => {
                    let hub = self.hub.clone();
                    tokio::select! {
                        outcome = self.step(step) => outcome,
                        () = found(&hub, &rule) => Outcome::Ended,
                    }
                }
            },
        }
    }

    /// A step's outcome as the parts of its verdict: its status, failure and why it did not
    /// apply. A step that did not apply makes the whole run not apply.
    fn settle(&mut self, outcome: Outcome) -> (StepStatus, Option<Failure>, Option<String>) {
        match outcome {
            Outcome::Passed => (StepStatus::Passed, None, None),
            Outcome::Failed(f) => (StepStatus::Failed, Some(*f), None),
            Outcome::Error(message) => (
                StepStatus::Error,
                Some(Failure {
                    summary: message,
                    ..Failure::default()
                }),
                None,
            ),
            Outcome::NotApplicable(why) => {
                self.not_applicable = Some(why.clone());
                (StepStatus::NotApplicable, None, Some(why))
            }
            Outcome::Ended => (StepStatus::Skipped, None, None),
        }
    }

    /// Skips every step of `steps`, and of the `when`s among them, each with its own number.
    fn skip_all(&mut self, steps: &[Spanned<Step>], prefix: &str) {
        for (i, step) in steps.iter().enumerate() {
            let index = format!("{prefix}{}", i + 1);
            if let Step::When(when) = &step.value {
                self.skip_all(&when.steps, &format!("{index}."));
                continue;
            }
            let skipped = self.skipped(step, index);
            self.verdicts.push(skipped);
        }
    }

    /// The verdict of a step that did not run.
    fn skipped(&self, step: &Spanned<Step>, index: String) -> StepVerdict {
        StepVerdict {
            index,
            line: step.referenced.line(),
            title: title(&step.value),
            status: StepStatus::Skipped,
            elapsed_ms: 0.0,
            started_ms: self.hub.journal().elapsed_ms(),
            failure: None,
            not_applicable: None,
            rule: rule_of(&step.value),
        }
    }

    /// Whether a `when`'s value matches its pattern now. A `that` naming a field the peer left
    /// out of a value it did send (`${init._meta.lembas.connection}`, `init` captured) is
    /// absent, which `$none` matches: a `when` branches on what the peer said, and leaving an
    /// optional field out is saying something. A variable never set is still the scenario's
    /// mistake.
    fn holds(&self, that: &Value, matches: &Value) -> Result<bool, String> {
        let that = match self.render(that) {
            Ok(value) => value,
            Err(_) if self.names_an_absent_field(that) => Value::Null,
            Err(e) => return Err(e),
        };
        let wanted = self.render(matches)?;
        let pattern = Pattern::compile(&wanted).map_err(|e| format!("bad pattern: {e}"))?;
        Ok(pattern.matches(&that).is_match())
    }

    /// Whether `that` is exactly `${var.path}` with `var` set and the path leading nowhere.
    fn names_an_absent_field(&self, that: &Value) -> bool {
        let Some(path) = that
            .as_str()
            .and_then(|s| s.strip_prefix("${"))
            .and_then(|s| s.strip_suffix('}'))
        else {
            return false;
        };
        let root = &path[..path.find(['.', '[']).unwrap_or(path.len())];
        root != path && {
            let vars = self.vars();
            vars.lookup(root).is_some() && vars.lookup(path).is_none()
        }
    }
}

/// The rule a step checks, for its verdict.
fn rule_of(step: &Step) -> Option<String> {
    step.judges().flatten().map(str::to_string)
}

/// Resolves once the hub holds a finding under `rule`. Findings have one observer (the control
/// API's), so this looks every 20 ms instead of taking it.
async fn found(hub: &Hub, rule: &str) {
    while !hub.findings().has(rule) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
