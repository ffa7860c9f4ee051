//! Handlers: a scenario's rules for answering the peer's requests in place of the default
//! behaviour, for the whole run or a number of times.

use std::sync::Mutex;
use std::time::Duration;

use serde_json::Value;
use serde_saphyr::Spanned;

use crate::jsonrpc::IncomingRequest;
use crate::pattern::{Pattern, PatternError};
use crate::scenario::Handler;

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

struct Live {
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
    live: Mutex<Vec<Live>>,
}

impl std::fmt::Debug for HandlerSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HandlerSet")
    }
}

impl HandlerSet {
    /// Compiles a scenario's handlers (the loader has checked them already).
    pub fn compile(handlers: &[Spanned<Handler>]) -> Result<HandlerSet, PatternError> {
        let mut live = Vec::with_capacity(handlers.len());
        for spanned in handlers {
            let h = &spanned.value;
            let answer = match (&h.result, &h.error) {
                (Some(result), _) => Answer::Result(result.clone()),
                (None, Some(error)) => Answer::Error(error.clone()),
                (None, None) => Answer::Hold,
            };
            live.push(Live {
                method: h.method.clone(),
                params: h.params.as_ref().map(Pattern::compile).transpose()?,
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
