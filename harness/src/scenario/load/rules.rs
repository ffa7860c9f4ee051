//! The scenario's ties to the rule catalogue: every rule it names must exist, and (for
//! `harness check`) every step that can fail the peer must name one.

use serde_saphyr::Spanned;

use super::error::{LoadError, place, span_of};
use super::steps::step_key;
use super::yaml::top_key_at;
use crate::scenario::model::{Scenario, Step};

/// The first step of `scenario` (read from `file`) that can fail the peer yet names no rule,
/// as the error `harness check` gives: a failure there would name no rule, so it could be
/// neither looked up nor baselined as `scenario:rule`.
pub fn unruled(scenario: &Scenario, file: &str) -> Option<LoadError> {
    let step = judging_steps(&scenario.steps)
        .into_iter()
        .find(|step| step.rule.is_none())?;
    Some(LoadError::found(
        file,
        step.at,
        step.path,
        "this step can fail the peer, so it names the catalogue rule it checks \
         (`rule: ID`, see `harness rules`): a failure then says which rule the peer \
         broke, and a baseline can cite it"
            .into(),
    ))
}

/// A step that can fail the peer, as the rule checks find it.
struct JudgingStep<'a> {
    /// Its key path (`steps[3].when.steps[0].expect.rule`).
    path: String,
    /// The rule it names, if any.
    rule: Option<&'a str>,
    /// Where the step is written (line, column).
    at: (Option<u32>, Option<u32>),
}

/// Every step of `steps` that can fail the peer, groups unfolded, in order.
fn judging_steps(steps: &[Spanned<Step>]) -> Vec<JudgingStep<'_>> {
    fn walk<'a>(steps: &'a [Spanned<Step>], base: &str, found: &mut Vec<JudgingStep<'a>>) {
        for (i, step) in steps.iter().enumerate() {
            let path = format!("{base}[{i}]");
            match &step.value {
                Step::AnyOrder(inner) => walk(inner, &format!("{path}.any_order"), found),
                Step::When(w) => walk(&w.steps, &format!("{path}.when.steps"), found),
                other => {
                    if let Some(rule) = other.judges() {
                        found.push(JudgingStep {
                            path: format!("{path}.{}.rule", step_key(other)),
                            rule,
                            at: span_of(step),
                        });
                    }
                }
            }
        }
    }
    let mut found = Vec::new();
    walk(steps, "steps", &mut found);
    found
}

/// Every rule a scenario names must be in the catalogue: a typo would make a check that
/// cites nothing, and the self-test could not pair it with its misbehaviour.
pub(super) fn check_rules(scenario: &Scenario, file: &str, text: &str) -> Result<(), LoadError> {
    let catalogue = crate::rules::catalogue();
    let unknown = |key_path: String, id: &str, at: (Option<u32>, Option<u32>)| {
        let message = format!("`{id}` is not a rule of the catalogue (conformance/rules/)");
        LoadError::found(file, at, key_path, message)
    };
    for (i, id) in scenario.rules.iter().enumerate() {
        if catalogue.get(id).is_none() {
            let at = place(top_key_at(text, "rules"));
            return Err(unknown(format!("rules[{i}]"), id, at));
        }
    }
    for step in judging_steps(&scenario.steps) {
        // A step naming no rule is loaded all the same (a quick scenario of one's own need not
        // cite the catalogue); `harness check` refuses it, see [`unruled`].
        if let Some(id) = step.rule
            && catalogue.get(id).is_none()
        {
            return Err(unknown(step.path, id, step.at));
        }
    }
    Ok(())
}
