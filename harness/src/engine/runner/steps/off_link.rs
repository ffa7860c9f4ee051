//! The steps that happen off the link: an action of the double (`act`), and a signal from
//! the test program (`wait_for_signal`).

use tokio::time::Instant;

use super::Outcome;
use crate::engine::applicability::ActError;
use crate::engine::runner::Runner;
use crate::pattern::MatchOutcome;
use crate::scenario::model::*;

impl Runner {
    pub(super) async fn act(&self, a: &ActStep) -> Outcome {
        let Some(actor) = &self.actor else {
            return Outcome::Error("this double has no actions".into());
        };
        // Substituted across the whole action, whatever its keys: the engine does not know
        // which of a double's fields may hold a variable, so every one may.
        let action = match self.render(&a.action()) {
            Ok(action) => action,
            Err(e) => return Outcome::Error(e),
        };
        let result = match actor.act(action, self.timeout(a.timeout)).await {
            Ok(result) => result,
            Err(ActError::NotApplicable(why)) => return Outcome::NotApplicable(why),
            // The double could not do what the scenario asked: the scenario's fault, not the peer's.
            Err(ActError::Failed(why) | ActError::Unknown(why)) => {
                return Outcome::Error(format!("act: {why}"));
            }
        };
        match self.capture(&result, &MatchOutcome::default(), &a.capture, None) {
            Ok(()) => Outcome::Passed,
            Err(e) => Outcome::Error(e),
        }
    }

    /// A signal that never came is the test program's doing, not the peer's: a scenario error
    /// that says what was awaited.
    pub(super) async fn wait_for_signal(&self, step: &WaitForSignalStep) -> Outcome {
        let within = self.timeout(step.within);
        let deadline = Instant::now() + within;
        if self
            .hub
            .progress()
            .wait_signal(&step.name, deadline.into_std())
            .await
        {
            Outcome::Passed
        } else {
            Outcome::Error(format!(
                "no signal `{}` within {} (raise it with POST /v1/signals/{} on the control API)",
                step.name,
                humantime::format_duration(within),
                step.name
            ))
        }
    }
}
