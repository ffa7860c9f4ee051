//! The other double's part, done for a real peer by hooks: timed set-up (a person shares a
//! session 300 ms in) and `peer.steps`, each run in the background by a runner of its own whose
//! every action is a hook.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::actor::HookActor;
use super::run::HookContext;
use crate::engine::{Cell, Hub, Runner};
use crate::scenario::{Dur, LoadError, Scenario, Spanned, Step};

/// Why the steps hooks do for a real peer could not be made: the scenario text they are
/// written as (from set-up names and values) did not read.
#[derive(Debug, thiserror::Error)]
pub enum StepsError {
    /// A name or value would not go into JSON.
    #[error("{0}")]
    Json(#[from] serde_json::Error),
    /// The steps did not load.
    #[error("{0}")]
    Load(#[from] LoadError),
}

/// One timed set-up action: this long after the peer's first link, do this action with these
/// fields.
#[derive(Debug, Clone, PartialEq)]
pub struct Timed {
    /// When, from the peer's first link.
    pub at: Duration,
    /// The action (and its hook's) name.
    pub action: String,
    /// Its fields.
    pub value: Value,
}

/// How long the timed set-up waits for the peer's first link before giving up.
const LINK_WAIT: Duration = Duration::from_secs(60);

/// Timed actions as steps: once the peer has linked, in order of time, with `wait` steps
/// between. Times count from the link, not from the run's start: a scenario's "half a second
/// after the CLI links" must not fire before a slow-starting CLI has said hello.
pub fn steps_of(timeline: &[Timed]) -> Result<Vec<Spanned<Step>>, StepsError> {
    if timeline.is_empty() {
        return Ok(Vec::new());
    }
    let mut sorted = timeline.to_vec();
    sorted.sort_by_key(|t| t.at);
    let mut yaml = String::from("name: set-up\nabout: timed set-up\nsteps:\n");
    let mut now = Duration::ZERO;
    for timed in &sorted {
        if timed.at > now {
            yaml.push_str(&format!("  - wait: {}\n", Dur(timed.at - now)));
            now = timed.at;
        }
        // JSON is YAML: names and values go in whatever they hold.
        let name = serde_json::to_string(&timed.action)?;
        yaml.push_str(&format!("  - act: {{ {name}: {} }}\n", timed.value));
    }
    let timed = crate::scenario::load_str(&yaml, "the timed set-up", None)?.steps;
    from_first_link(&timed)
}

/// `peer.steps` as a real peer's hooks do them: from the peer's first link, as the other double
/// does them in the self-test (a person acts on a linked peer; a wait in them counts from the
/// link, not from a start that may be slow under load). None: none.
pub fn from_first_link(steps: &[Spanned<Step>]) -> Result<Vec<Spanned<Step>>, StepsError> {
    if steps.is_empty() {
        return Ok(Vec::new());
    }
    let yaml = format!(
        "name: link\nabout: the first link\nsteps:\n  - expect_link: {{ within: {} }}\n",
        Dur(LINK_WAIT)
    );
    // Read, not loaded as a scenario: a wait of the set-up's own, which judges no rule.
    let mut all =
        crate::scenario::load::parse::<crate::scenario::Scenario>(&yaml, "the peer's own steps")?
            .steps;
    all.extend(steps.iter().cloned());
    Ok(all)
}

/// `steps` (as [`from_first_link`] makes them) once the double has also raised `signal`: a
/// double whose link is usable only later than it opens (a device once it has answered
/// `initialize`, which is when a web UI shows it linked) says so by a signal of its own. None:
/// none.
pub fn after_signal(
    mut steps: Vec<Spanned<Step>>,
    signal: &str,
) -> Result<Vec<Spanned<Step>>, StepsError> {
    if steps.is_empty() {
        return Ok(steps);
    }
    let yaml = format!(
        "name: ready\nabout: the link usable\nsteps:\n  - wait_for_signal: {{ name: {}, within: {} }}\n",
        serde_json::to_string(signal)?,
        Dur(LINK_WAIT)
    );
    let wait = crate::scenario::load_str(&yaml, "the peer's own steps", None)?.steps;
    // After the first step, the wait for the first link.
    let at = steps.len().min(1);
    steps.splice(at..at, wait);
    Ok(steps)
}

/// Runs `steps` in the background over `hub`, each action through its hook; a step that could
/// not be done is in the hooks' record (and so in the verdict). The task ends with the steps,
/// or when aborted.
pub fn drive(
    hub: Arc<Hub>,
    cell: Cell,
    context: Arc<HookContext>,
    name: &str,
    steps: Vec<Spanned<Step>>,
) -> Option<tokio::task::JoinHandle<()>> {
    if steps.is_empty() {
        return None;
    }
    let runner =
        Runner::new(hub.clone(), cell, None, None).with_actor(Arc::new(HookActor(context.clone())));
    let steps = Scenario::of_steps(name, steps);
    Some(tokio::spawn(async move {
        let outcome = runner.run(&steps).await;
        if let Some(why) = &outcome.not_applicable {
            hub.set_up_not_done(why.clone());
        }
        // A hook that failed is in the record already; a step that erred otherwise (a capture
        // its result lacked) is put there, so the run says its set-up broke.
        let erred = outcome
            .steps
            .iter()
            .find(|s| s.status == crate::engine::StepStatus::Error);
        if let Some(step) = erred
            && !context.runs().iter().any(|r| !r.ok)
        {
            context.note_failure(
                &steps.name,
                format!(
                    "step {} ({}): {}",
                    step.index,
                    step.title,
                    step.failure
                        .as_ref()
                        .map(|f| f.summary.clone())
                        .unwrap_or_default()
                ),
            );
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn timed_actions_become_acts_in_order_with_waits_between() {
        let steps = steps_of(&[
            Timed {
                at: Duration::from_millis(800),
                action: "terminal_prompt".into(),
                value: json!("typed at the terminal"),
            },
            Timed {
                at: Duration::from_millis(500),
                action: "share_session".into(),
                value: json!(true),
            },
        ])
        .expect("steps");
        let titles: Vec<_> = steps
            .iter()
            .map(|s| crate::engine::runner::title(&s.value))
            .collect();
        assert_eq!(
            titles,
            [
                "expect a link within 1m",
                "wait 500ms",
                "act: share_session",
                "wait 300ms",
                "act: terminal_prompt"
            ]
        );
    }

    #[test]
    fn the_peers_own_steps_wait_for_its_first_link() {
        let own = steps_of(&[Timed {
            at: Duration::from_millis(1500),
            action: "set_personalization".into(),
            value: json!({"field": "instructions", "value": "Answer in German."}),
        }])
        .expect("steps");
        let own = own[1..].to_vec();
        let titles: Vec<_> = from_first_link(&own)
            .expect("steps")
            .iter()
            .map(|s| crate::engine::runner::title(&s.value))
            .collect();
        assert_eq!(
            titles,
            [
                "expect a link within 1m",
                "wait 1s 500ms",
                "act: set_personalization"
            ]
        );
        assert!(from_first_link(&[]).expect("none").is_empty());
    }
}
