//! Whether the peer claimed what a step needs, asked of the double before the step sends or
//! awaits anything: a peer is never sent what it did not list, and a message it never claimed
//! to send makes the run not apply rather than fail.

use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

use super::Runner;
use super::steps::Outcome;
use crate::engine::applicability::{Applies, Intent};
use crate::engine::verdict::Failure;

/// How often a step about to send asks again whether the peer has said its capabilities.
const ADMIT_POLL: Duration = Duration::from_millis(10);

impl Runner {
    /// Asks the double whether the peer claimed what `intent` needs. A message about to be sent
    /// waits (up to `deadline`) for a peer that has not said its capabilities yet: a client
    /// never calls before it knows what it may call.
    pub(super) async fn admit(
        &self,
        intent: Intent<'_>,
        deadline: Instant,
    ) -> Result<(), Unadmitted> {
        loop {
            match self.hub.applies(intent) {
                Applies::Yes => return Ok(()),
                Applies::No(why) => return Err(Unadmitted::NotClaimed(why)),
                Applies::NotYet if Instant::now() >= deadline => return Err(Unadmitted::Unsaid),
                Applies::NotYet => tokio::time::sleep(ADMIT_POLL).await,
            }
        }
    }

    /// Whether a message a `notify` or `start` step is about to send may go (always, when the
    /// step says `unlisted: true`); the step's outcome when not.
    pub(super) async fn admit_send(
        &self,
        method: &str,
        params: &Value,
        unlisted: bool,
        deadline: Instant,
    ) -> Result<(), Outcome> {
        if unlisted {
            return Ok(());
        }
        self.admit(Intent::Send { method, params }, deadline)
            .await
            .map_err(|unadmitted| unadmitted.outcome(&None, method))
    }

    /// Whether a message that did not come was one the peer never claimed to send, or whether
    /// the peer never did what would make it: then the run does not apply, and says why.
    pub(super) fn missed_applies(&self, pattern: &Value) -> Option<String> {
        // The other side's project does not do what its set-up was to make the peer do.
        if let Some(why) = self.hub.set_up_undone() {
            return Some(why);
        }
        for intent in [Intent::Await { pattern }, Intent::Missed { pattern }] {
            if let Applies::No(why) = self.hub.applies(intent) {
                return Some(why);
            }
        }
        None
    }

    /// Whether the peer claimed what a request needs: its method and params, and the fields
    /// its result pattern names.
    pub(super) async fn admit_request(
        &self,
        method: &str,
        params: &Value,
        result: &Option<Value>,
        answer: &Option<Value>,
        deadline: Instant,
    ) -> Result<(), Unadmitted> {
        self.admit(Intent::Send { method, params }, deadline)
            .await?;
        self.admit_answer(method, result, answer, deadline).await
    }

    /// Whether the peer claimed what the fields an answer's pattern names need: the `result`
    /// pattern, or the `result` of an `answer` pattern (each alternative of a `$one_of`).
    pub(super) async fn admit_answer(
        &self,
        method: &str,
        result: &Option<Value>,
        answer: &Option<Value>,
        deadline: Instant,
    ) -> Result<(), Unadmitted> {
        let mut results = Vec::new();
        if let Some(result) = result {
            results.push(result.clone());
        }
        if let Some(answer) = answer {
            let alternatives = match answer.get("$one_of").and_then(Value::as_array) {
                Some(alternatives) => alternatives.clone(),
                None => vec![answer.clone()],
            };
            results.extend(alternatives.iter().filter_map(|a| a.get("result").cloned()));
        }
        for result in results {
            // A pattern that does not render is the judge's to report.
            if let Ok(result) = self.render(&result) {
                let intent = Intent::Answer {
                    method,
                    result: &result,
                };
                self.admit(intent, deadline).await?;
            }
        }
        Ok(())
    }
}

/// Why a message a step is about to send was not sent.
pub(super) enum Unadmitted {
    /// The peer did not claim what it needs: the run does not apply.
    NotClaimed(String),
    /// The peer had not said what it claims by the step's deadline (no answer to initialize):
    /// nothing it might not have listed is sent, and the step fails.
    Unsaid,
}

impl Unadmitted {
    /// What the step comes to: not applicable, or failed under the step's rule.
    pub(super) fn outcome(self, rule: &Option<String>, method: &str) -> Outcome {
        match self {
            Unadmitted::NotClaimed(why) => Outcome::NotApplicable(why),
            Unadmitted::Unsaid => Outcome::failed(Failure {
                rule: rule.clone(),
                summary: format!(
                    "`{method}` was not sent: by the step's deadline the peer had not said what it supports (its answer to initialize), and nothing it may not have listed is sent"
                ),
                awaited: Some("the peer's capabilities".into()),
                ..Failure::default()
            }),
        }
    }
}
