//! The steps that look at what the peer sent: `expect` (one message, or a group in any order),
//! `expect_none` (silence), and `check` (a captured value against a pattern).

use serde_json::{Map, Value, json};
use serde_saphyr::Spanned;
use tokio::time::Instant;

use super::Outcome;
use crate::engine::applicability::{Applies, Intent};
use crate::engine::inbox::Entry;
use crate::engine::runner::Runner;
use crate::engine::runner::describe::{describe, describe_value};
use crate::engine::verdict::Failure;
use crate::pattern::{MatchOutcome, Pattern, render_diff};
use crate::scenario::model::*;

impl Runner {
    pub(super) async fn expect(&self, e: &ExpectStep) -> Outcome {
        let timeout = self.timeout(e.timeout);
        let (wanted, pattern) = match self.expect_pattern(&e.method, &e.params, &e.message) {
            Ok(p) => p,
            Err(err) => return Outcome::Error(err),
        };
        let what = describe(&e.method);
        if let Applies::No(why) = self.hub.applies(Intent::Await { pattern: &wanted }) {
            return Outcome::NotApplicable(why);
        }
        let after = match self.after_start(&e.after) {
            Ok(after) => after,
            Err(why) => return Outcome::Error(why),
        };
        let since = self.mark();
        let deadline = Instant::now() + timeout;
        match self.hub.inbox.wait_take(&pattern, after, deadline).await {
            Some((entry, outcome)) => self.took(e, &entry, &outcome, deadline).await,
            None => match self.missed_applies(&wanted) {
                Some(why) => Outcome::NotApplicable(why),
                None => {
                    Outcome::failed(self.missing(&e.rule, &wanted, &pattern, &what, timeout, since))
                }
            },
        }
    }

    /// What an `expect` that matched comes to: the message's link becomes the one the scenario
    /// talks on, and the step's captures are set from the message (with this double's answer
    /// to it, when a capture reads `answer`).
    async fn took(
        &self,
        e: &ExpectStep,
        entry: &Entry,
        outcome: &MatchOutcome,
        deadline: Instant,
    ) -> Outcome {
        self.focus_on(entry.link);
        let message = match self
            .with_answer(&entry.message, entry.link, &e.capture, deadline)
            .await
        {
            Ok(message) => message,
            // Our own answer is missing (a held request): the scenario's doing.
            Err(why) => return Outcome::Error(why),
        };
        match self.capture(&message, outcome, &e.capture, Some(entry.link)) {
            Ok(()) => Outcome::Passed,
            Err(err) => Outcome::failed(Failure {
                rule: e.rule.clone(),
                summary: err,
                ..Failure::default()
            }),
        }
    }

    pub(super) async fn any_order(&self, group: &[Spanned<Step>]) -> Outcome {
        let mut expects = Vec::new();
        for step in group {
            let Step::Expect(e) = &step.value else {
                return Outcome::Error("only `expect` steps can be in `any_order`".into());
            };
            match self.expect_pattern(&e.method, &e.params, &e.message) {
                Ok((wanted, pattern)) => expects.push((e, wanted, pattern)),
                Err(err) => return Outcome::Error(err),
            }
        }
        let timeout = expects
            .iter()
            .filter_map(|(e, _, _)| e.timeout)
            .map(|d| d.0)
            .max()
            .unwrap_or(self.default_timeout);
        let deadline = Instant::now() + timeout;
        let since = self.mark();
        for (_, wanted, _) in &expects {
            if let Applies::No(why) = self.hub.applies(Intent::Await { pattern: wanted }) {
                return Outcome::NotApplicable(why);
            }
        }
        // One deadline for the group: each is waited for in turn, but any order of arrival
        // passes, since every one looks at the whole inbox.
        for (e, wanted, pattern) in &expects {
            match self.hub.inbox.wait_take(pattern, 0, deadline).await {
                Some((entry, outcome)) => {
                    let took = self.took(e, &entry, &outcome, deadline).await;
                    if !matches!(took, Outcome::Passed) {
                        return took;
                    }
                }
                None => {
                    if let Some(why) = self.missed_applies(wanted) {
                        return Outcome::NotApplicable(why);
                    }
                    return Outcome::failed(self.missing(
                        &e.rule,
                        wanted,
                        pattern,
                        &describe(&e.method),
                        timeout,
                        since,
                    ));
                }
            }
        }
        Outcome::Passed
    }

    pub(super) fn check(&self, c: &CheckStep) -> Outcome {
        let (that, wanted) = match (self.render(&c.that), self.render(&c.matches)) {
            (Ok(that), Ok(wanted)) => (that, wanted),
            (Err(e), _) | (_, Err(e)) => return Outcome::Error(e),
        };
        let pattern = match Pattern::compile(&wanted) {
            Ok(p) => p,
            Err(e) => return Outcome::Error(format!("bad pattern: {e}")),
        };
        let outcome = pattern.matches(&that);
        if outcome.is_match() {
            return match self.capture(&that, &outcome, &Captures::new(), None) {
                Ok(()) => Outcome::Passed,
                Err(e) => Outcome::Error(e),
            };
        }
        Outcome::failed(Failure {
            rule: c.rule.clone(),
            summary: format!("{} is not what the spec says", describe_value(&c.that)),
            awaited: None,
            diff: Some(render_diff(&wanted, &that, &outcome)),
            expected: Some(wanted),
            nearest: Some(that),
        })
    }

    pub(super) async fn expect_none(&self, e: &ExpectNoneStep) -> Outcome {
        let (wanted, pattern) = match self.expect_pattern(&e.method, &e.params, &e.message) {
            Ok(p) => p,
            Err(err) => return Outcome::Error(err),
        };
        let after = match self.after_start(&e.after) {
            Ok(after) => after,
            Err(why) => return Outcome::Error(why),
        };
        // Whatever earlier steps did not consume counts too: a message that came during the
        // previous step (a repeated event while a request was answered) is just as unwanted.
        match self.hub.inbox.watch(&pattern, after, e.duration.0).await {
            None => Outcome::Passed,
            Some(entry) => Outcome::failed(Failure {
                rule: e.rule.clone(),
                summary: format!(
                    "{} came, though nothing like it should for {}",
                    describe(&e.method),
                    e.duration
                ),
                awaited: Some(format!("silence for {}", e.duration)),
                expected: Some(json!({ "$not": wanted })),
                nearest: Some(entry.message),
                diff: None,
            }),
        }
    }

    fn expect_pattern(
        &self,
        method: &Option<String>,
        params: &Option<Value>,
        message: &Option<Value>,
    ) -> Result<(Value, Pattern), String> {
        // `method` and `params` are merged into `message` when it is a mapping; a `message` that
        // is not one (`$any`) stands alone, and the loader refuses it beside `method`/`params`.
        let wanted = match message {
            Some(whole) if !whole.is_object() => whole.clone(),
            _ => {
                let mut wanted = match message {
                    Some(Value::Object(m)) => m.clone(),
                    _ => Map::new(),
                };
                if let Some(method) = method {
                    wanted.insert("method".into(), json!(method));
                }
                if let Some(params) = params {
                    wanted.insert("params".into(), params.clone());
                }
                Value::Object(wanted)
            }
        };
        let wanted = self.render(&wanted)?;
        let pattern = Pattern::compile(&wanted).map_err(|e| format!("bad pattern: {e}"))?;
        Ok((wanted, pattern))
    }

    /// The matched message with `answer` beside its fields when a capture reads it (`capture:
    /// { chat: answer.result.sessionId }`): what this double answered the request, waited for
    /// until the step's deadline.
    async fn with_answer(
        &self,
        message: &Value,
        link: u32,
        paths: &Captures,
        deadline: Instant,
    ) -> Result<Value, String> {
        let wants_answer = paths
            .values()
            .any(|p| p == "answer" || p.starts_with("answer.") || p.starts_with("answer["));
        let Some(id) = message.get("id").filter(|_| wants_answer) else {
            return Ok(message.clone());
        };
        match self.hub.wait_answer(link, id, deadline).await {
            Some(answer) => {
                let mut message = message.clone();
                message["answer"] = answer;
                Ok(message)
            }
            None => Err(format!(
                "this double did not answer request {id} before the step's deadline, so `answer` cannot be captured (a request held by a handler is answered by a `reply`)"
            )),
        }
    }

    /// The inbox's newest arrival when the `start` named `after` sent its request (0: every
    /// message counts).
    fn after_start(&self, after: &Option<String>) -> Result<u64, String> {
        let Some(name) = after else {
            return Ok(0);
        };
        self.start_marks
            .lock()
            .ok()
            .and_then(|marks| marks.get(name).copied())
            .ok_or_else(|| {
                format!(
                    "`after: {name}`: no `start` or `send` step named `as: {name}` ran before this step"
                )
            })
    }
}
