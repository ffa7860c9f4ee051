//! The failure of a wait for a message that did not come: the nearest message of the same
//! method, or else what the peer sent during the wait, so a person sees what came instead.

use std::time::Duration;

use serde_json::Value;

use super::Runner;
use super::describe::clip;
use crate::engine::verdict::Failure;
use crate::pattern::{Pattern, nearest, render_diff};
use crate::scenario::Dur;

/// A point in the run: the newest inbox message and the journal's clock.
#[derive(Debug, Clone, Copy)]
pub(super) struct Mark {
    seq: u64,
    ms: f64,
}

impl Runner {
    /// Where the run stands now, so a timed-out wait can say what came during it.
    pub(super) fn mark(&self) -> Mark {
        Mark {
            seq: self.hub.inbox.last_seq(),
            ms: self.hub.journal().elapsed_ms(),
        }
    }

    /// The failure of a wait for a message that did not come. The nearest message shown is one
    /// of the same method only (another method is no near miss, only noise); with none, it
    /// says so and what did come during the wait.
    pub(super) fn missing(
        &self,
        rule: &Option<String>,
        wanted: &Value,
        pattern: &Pattern,
        what: &str,
        timeout: Duration,
        since: Mark,
    ) -> Failure {
        let method = wanted.get("method").and_then(Value::as_str);
        let candidates: Vec<_> = self
            .hub
            .inbox
            .unconsumed()
            .into_iter()
            .filter(|e| {
                method.is_none_or(|m| e.message.get("method").and_then(Value::as_str) == Some(m))
            })
            .collect();
        let near = nearest(pattern, candidates.iter().map(|e| &e.message));
        let (nearest_message, diff) = match near {
            Some((message, outcome)) => (
                Some(message.clone()),
                Some(render_diff(wanted, message, &outcome)),
            ),
            None => (None, None),
        };
        let mut summary = format!("{what} did not come within {}", Dur(timeout));
        if nearest_message.is_none() {
            let ever = method.is_some_and(|m| {
                self.hub
                    .inbox
                    .all()
                    .iter()
                    .any(|e| e.message.get("method").and_then(Value::as_str) == Some(m))
            });
            summary.push_str(match (method, ever) {
                (Some(_), false) => ", and none came in the whole run",
                (Some(_), true) => ": none came that an earlier step had not taken",
                (None, _) => ", and nothing like it came",
            });
            summary.push_str(&format!("; {}", self.meanwhile(since)));
        }
        Failure {
            rule: rule.clone(),
            summary,
            awaited: Some(format!("{what}, for {}", Dur(timeout))),
            expected: Some(wanted.clone()),
            nearest: nearest_message,
            diff,
        }
    }

    /// What the peer sent since `since`, in a few words: each method with how often it came,
    /// and the answers to this double's requests.
    fn meanwhile(&self, since: Mark) -> String {
        let mut counts: Vec<(String, usize)> = Vec::new();
        for entry in self.hub.inbox.all().iter().filter(|e| e.seq > since.seq) {
            let method = entry
                .message
                .get("method")
                .and_then(Value::as_str)
                .unwrap_or("a message")
                .to_string();
            match counts.iter_mut().find(|(m, _)| *m == method) {
                Some((_, n)) => *n += 1,
                None => counts.push((method, 1)),
            }
        }
        let recent = self.hub.journal().recent(200);
        let answers: Vec<String> = recent
            .iter()
            .filter(|e| e.t_ms >= since.ms && e.dir == crate::journal::Direction::In)
            .filter(|e| e.msg.get("method").is_none())
            .filter_map(|e| {
                let id = e.msg.get("id")?;
                let asked = recent.iter().rev().find(|o| {
                    o.dir == crate::journal::Direction::Out
                        && o.link == e.link
                        && o.msg.get("id") == Some(id)
                        && o.msg.get("method").is_some()
                })?;
                let method = asked.msg.get("method")?.as_str()?;
                Some(match (e.msg.get("result"), e.msg.get("error")) {
                    (Some(result), _) => format!("the answer to `{method}`: {}", clip(result)),
                    (None, Some(error)) => {
                        format!("the error answering `{method}`: {}", clip(error))
                    }
                    (None, None) => format!("an answer to `{method}`"),
                })
            })
            .collect();
        let mut parts: Vec<String> = counts
            .into_iter()
            .map(|(method, n)| match n {
                1 => format!("`{method}`"),
                n => format!("{n} × `{method}`"),
            })
            .collect();
        parts.extend(answers);
        if parts.is_empty() {
            "nothing came from the peer during the wait".to_string()
        } else {
            format!("during the wait came {}", parts.join(", "))
        }
    }
}
