//! Handlers: a scenario's rules for answering the peer's requests in place of the default
//! behaviour, for the whole run or a number of times.

use std::sync::Mutex;
use std::time::Duration;

use serde_json::Value;
use serde_saphyr::Spanned;

use crate::jsonrpc::IncomingRequest;
use crate::pattern::{Pattern, PatternError, SubstError, Vars, substitute};
use crate::scenario::Handler;

/// Why a scenario's handler cannot be compiled, at its line in the scenario.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HandlerError {
    /// Its `params` name a variable that is not known at the start.
    #[error("line {line}: {source}")]
    Vars {
        /// The handler's line.
        line: u64,
        /// What the substitution found.
        source: SubstError,
    },
    /// Its `params` are no pattern.
    #[error("line {line}: {source}")]
    Pattern {
        /// The handler's line.
        line: u64,
        /// What is wrong with the pattern.
        source: PatternError,
    },
}

/// What a handler does with a request it takes.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// Answer with this result (a template: `${...}` is substituted when it is sent).
    Result(Value),
    /// Answer with this error object (a template).
    Error(Value),
    /// Keep it unanswered; a `reply` step may answer it.
    Hold,
}

/// A handler taking a request: how to answer, and after how long.
#[derive(Debug, Clone, PartialEq)]
pub struct Taken {
    /// How to answer.
    pub answer: Answer,
    /// How long to wait first.
    pub delay: Option<Duration>,
    /// The handler's line in the scenario, for the journal and reports.
    pub line: u64,
}

/// A handler as the run holds it: its pattern compiled, and how many requests it still takes.
struct ArmedHandler {
    method: String,
    params: Option<Pattern>,
    answer: Answer,
    delay: Option<Duration>,
    remaining: Option<u32>,
    line: u64,
}

/// A scenario's handlers, in order: the first live one that matches takes the request.
#[derive(Default)]
pub struct HandlerSet {
    live: Mutex<Vec<ArmedHandler>>,
}

impl std::fmt::Debug for HandlerSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HandlerSet")
    }
}

impl HandlerSet {
    /// Compiles a scenario's handlers (the loader has checked them already); `${...}` in their
    /// params patterns is substituted from `vars`, the variables known at the start.
    pub fn compile(handlers: &[Spanned<Handler>], vars: &Vars) -> Result<HandlerSet, HandlerError> {
        let mut live = Vec::with_capacity(handlers.len());
        for spanned in handlers {
            let h = &spanned.value;
            let answer = match (&h.result, &h.error) {
                (Some(result), _) => Answer::Result(result.clone()),
                (None, Some(error)) => Answer::Error(error.clone()),
                (None, None) => Answer::Hold,
            };
            live.push(ArmedHandler {
                method: h.method.clone(),
                params: match &h.params {
                    Some(params) => {
                        let line = spanned.referenced.line();
                        let params = substitute(params, vars)
                            .map_err(|source| HandlerError::Vars { line, source })?;
                        Some(
                            Pattern::compile(&params)
                                .map_err(|source| HandlerError::Pattern { line, source })?,
                        )
                    }
                    None => None,
                },
                answer,
                delay: h.delay.map(|d| d.0),
                remaining: h.times,
                line: spanned.referenced.line(),
            });
        }
        Ok(HandlerSet {
            live: Mutex::new(live),
        })
    }

    /// Finds the first handler for this request that still has answers left, and counts it down.
    pub fn take(&self, request: &IncomingRequest) -> Option<Taken> {
        let mut live = self.live.lock().ok()?;
        let handler = live.iter_mut().find(|h| {
            h.method == request.method
                && h.remaining != Some(0)
                && h.params
                    .as_ref()
                    .is_none_or(|p| p.matches(&request.params).is_match())
        })?;
        if let Some(n) = handler.remaining.as_mut() {
            *n -= 1;
        }
        Some(Taken {
            answer: handler.answer.clone(),
            delay: handler.delay,
            line: handler.line,
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// The handlers of a scenario with these lines under `handlers:` (from line 4 on).
    fn handlers(lines: &str) -> HandlerSet {
        let text = format!("name: t\nabout: a test\nhandlers:\n{lines}steps: []\n");
        let scenario = crate::scenario::load_str(&text, "t.yaml", None)
            .unwrap_or_else(|e| panic!("the test scenario does not load: {e}"));
        HandlerSet::compile(&scenario.handlers, &Vars::default()).expect("handlers compile")
    }

    fn request(method: &str, params: Value) -> IncomingRequest {
        let raw = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        IncomingRequest {
            id: json!(1),
            method: method.into(),
            params,
            raw,
        }
    }

    fn answer(set: &HandlerSet, method: &str, params: Value) -> Option<Answer> {
        set.take(&request(method, params)).map(|t| t.answer)
    }

    #[test]
    fn nothing_takes_a_request_without_handlers() {
        assert_eq!(answer(&HandlerSet::default(), "a", json!({})), None);
    }

    #[test]
    fn a_handler_takes_only_its_method() {
        let set = handlers("  - { method: a, result: 1 }\n");
        assert_eq!(answer(&set, "b", json!({})), None);
        assert_eq!(answer(&set, "a", json!({})), Some(Answer::Result(json!(1))));
        // Without `times`, for ever.
        for _ in 0..10 {
            assert_eq!(answer(&set, "a", json!({})), Some(Answer::Result(json!(1))));
        }
    }

    #[test]
    fn times_counts_down_to_nothing() {
        let set = handlers("  - { method: a, result: 1, times: 2 }\n");
        assert!(answer(&set, "a", json!({})).is_some());
        assert!(answer(&set, "a", json!({})).is_some());
        assert_eq!(answer(&set, "a", json!({})), None);
        assert_eq!(answer(&set, "a", json!({})), None);
    }

    #[test]
    fn times_zero_never_answers() {
        let set = handlers("  - { method: a, result: 1, times: 0 }\n");
        assert_eq!(answer(&set, "a", json!({})), None);
    }

    #[test]
    fn a_request_the_params_pattern_refuses_is_not_taken_nor_counted() {
        let set = handlers("  - { method: a, params: { x: $integer }, result: 1, times: 1 }\n");
        assert_eq!(answer(&set, "a", json!({"x": "one"})), None);
        assert_eq!(answer(&set, "a", json!({})), None);
        assert_eq!(answer(&set, "a", Value::Null), None);
        // Partial: extra params are fine. The refusals above did not use up `times`.
        assert!(answer(&set, "a", json!({"x": 1, "y": 2})).is_some());
        assert_eq!(answer(&set, "a", json!({"x": 1})), None);
    }

    #[test]
    fn the_first_live_match_wins_in_order() {
        let set = handlers(
            "  - { method: a, params: { kind: special }, result: first, times: 1 }\n  - { method: a, result: second }\n  - { method: a, result: never }\n",
        );
        assert_eq!(
            answer(&set, "a", json!({"kind": "plain"})),
            Some(Answer::Result(json!("second")))
        );
        assert_eq!(
            answer(&set, "a", json!({"kind": "special"})),
            Some(Answer::Result(json!("first")))
        );
        // The first is spent: the next in order takes over.
        assert_eq!(
            answer(&set, "a", json!({"kind": "special"})),
            Some(Answer::Result(json!("second")))
        );
    }

    #[test]
    fn taken_carries_answer_delay_and_line() {
        let set = handlers(
            "  - { method: r, result: { echo: \"${params.x}\" } }\n  - { method: e, error: { code: -32000, message: no }, delay: 250ms }\n  - { method: h, hold: true }\n",
        );
        let r = set.take(&request("r", json!({}))).expect("r");
        assert_eq!(r.answer, Answer::Result(json!({"echo": "${params.x}"})));
        assert_eq!((r.delay, r.line), (None, 4));
        let e = set.take(&request("e", json!({}))).expect("e");
        assert_eq!(
            e.answer,
            Answer::Error(json!({"code": -32000, "message": "no"}))
        );
        assert_eq!((e.delay, e.line), (Some(Duration::from_millis(250)), 5));
        let h = set.take(&request("h", json!({}))).expect("h");
        assert_eq!((h.answer, h.line), (Answer::Hold, 6));
    }
}
