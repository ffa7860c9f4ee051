//! The steps that judge the answers to this double's requests: an `await` of a `start`ed
//! request (or its silence, with `none_for`), and the judging a `request` shares with it.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

use super::Outcome;
use crate::engine::runner::Runner;
use crate::engine::runner::describe::{Expected, answer_summary};
use crate::engine::verdict::Failure;
use crate::jsonrpc::RpcError;
use crate::pattern::{Pattern, render_diff};
use crate::scenario::Dur;
use crate::scenario::model::*;

impl Runner {
    pub(super) async fn await_answer(&self, a: &AwaitStep) -> Outcome {
        let Some((method, timeout, answer)) = self
            .started
            .lock()
            .ok()
            .and_then(|mut s| s.remove(&a.request))
        else {
            return Outcome::Error(format!(
                "`await.request`: no request started `as: {}` before this step",
                a.request
            ));
        };
        if let Some(quiet) = a.none_for {
            return self
                .await_silence(a, method, timeout, answer, quiet.0)
                .await;
        }
        // The request carries its own deadline from `start`; this step may shorten it.
        let wait = a.timeout.map(|d| d.0).unwrap_or(timeout);
        let deadline = Instant::now() + wait;
        if let Err(unadmitted) = self
            .admit_answer(&method, &a.result, &a.answer, deadline)
            .await
        {
            answer.abort();
            return unadmitted.outcome(&a.rule, &method);
        }
        let wait = deadline.saturating_duration_since(Instant::now());
        let awaited = Some(format!(
            "the answer to `{method}` (started as `{}`), for {}",
            a.request,
            Dur(wait)
        ));
        match tokio::time::timeout(wait, answer).await {
            Err(_) => Outcome::failed(Failure {
                rule: a.rule.clone(),
                summary: format!("no answer to `{method}` within {}", Dur(wait)),
                awaited,
                ..Failure::default()
            }),
            Ok(Err(e)) => Outcome::Error(format!("the request task failed: {e}")),
            Ok(Ok(Err(e))) => Outcome::failed(Failure {
                rule: a.rule.clone(),
                summary: e.to_string(),
                awaited,
                ..Failure::default()
            }),
            Ok(Ok(Ok(answer))) => {
                let expected = Expected::of(&a.result, &a.error, &a.answer);
                self.judge_answer(&method, answer, expected, &a.capture, &a.rule)
            }
        }
    }

    /// `await` with `none_for`: the peer must not answer for that long.
    async fn await_silence(
        &self,
        a: &AwaitStep,
        method: String,
        timeout: Duration,
        mut answer: tokio::task::JoinHandle<
            Result<Result<Value, RpcError>, crate::jsonrpc::RequestError>,
        >,
        quiet: Duration,
    ) -> Outcome {
        match tokio::time::timeout(quiet, &mut answer).await {
            Err(_) => {
                // Still unanswered, as it should be: a later `await` may take the answer.
                if let Ok(mut started) = self.started.lock() {
                    started.insert(
                        a.request.clone(),
                        (method, timeout.saturating_sub(quiet), answer),
                    );
                }
                Outcome::Passed
            }
            Ok(Err(e)) => Outcome::Error(format!("the request task failed: {e}")),
            // Its own deadline passed, or the link ended: no answer came, which is what was asked.
            Ok(Ok(Err(_))) => Outcome::Passed,
            Ok(Ok(Ok(answered))) => {
                let got = match answered {
                    Ok(result) => json!({ "result": result }),
                    Err(error) => json!({ "error": error.to_value() }),
                };
                Outcome::failed(Failure {
                    rule: a.rule.clone(),
                    summary: format!(
                        "`{method}` (started as `{}`) was answered, but should not have been within {}",
                        a.request,
                        Dur(quiet)
                    ),
                    awaited: Some(format!("no answer to `{method}` for {}", Dur(quiet))),
                    nearest: Some(got),
                    ..Failure::default()
                })
            }
        }
    }

    /// Judges a request's answer against the step's `result`, `error` or `answer` pattern, and
    /// captures.
    pub(super) fn judge_answer(
        &self,
        method: &str,
        answer: Result<Value, RpcError>,
        expected: Expected<'_>,
        capture: &Captures,
        rule: &Option<String>,
    ) -> Outcome {
        let response = match &answer {
            Ok(result) => json!({ "result": result }),
            Err(error) => json!({ "error": error.to_value() }),
        };
        let wanted = match expected {
            Expected::Answer(whole) => whole.clone(),
            Expected::Error(error) => json!({ "error": error }),
            Expected::Result(result) => json!({ "result": result }),
            Expected::AnyResult => json!({ "result": "$any" }),
        };
        let wanted = match self.render(&wanted) {
            Ok(w) => w,
            Err(e) => return Outcome::Error(e),
        };
        let pattern = match Pattern::compile(&wanted) {
            Ok(p) => p,
            Err(e) => return Outcome::Error(format!("bad pattern: {e}")),
        };
        let outcome = pattern.matches(&response);
        if !outcome.is_match() {
            return Outcome::failed(Failure {
                rule: rule.clone(),
                summary: answer_summary(method, &answer, expected),
                awaited: Some(format!("the answer to `{method}`")),
                diff: Some(render_diff(&wanted, &response, &outcome)),
                expected: Some(wanted),
                nearest: Some(response),
            });
        }
        match self.capture(&response, &outcome, capture, None) {
            Ok(()) => Outcome::Passed,
            Err(e) => Outcome::failed(Failure {
                rule: rule.clone(),
                summary: e,
                ..Failure::default()
            }),
        }
    }
}
