//! The turns a device finished, kept across the links of a run (spec, `session/prompt`, turn
//! ids: a finished turn keeps its answer in a file that outlives a restart). One that starts
//! again on a later link ran twice: the device forgot it, whether it restarted in between or
//! only lost the link. A turn cut short by a restart may run again, and is never kept here: only
//! a prompt answered with a result is.

use std::collections::{HashMap, VecDeque};

use serde_json::Value;

use crate::finding::Finding;
use crate::rules::ids;

/// The finished turns a run keeps at most (oldest forgotten first), and the longest turn id or
/// session id kept: what a device can make the model hold stays bounded.
const MOST_KEPT: usize = 10_000;
const LONGEST_ID: usize = 512;

/// Each finished turn of the run, by session and turn id, with the link its answer came on.
#[derive(Debug, Default)]
pub struct FinishedTurns {
    links: HashMap<(String, String), u32>,
    order: VecDeque<(String, String)>,
}

impl FinishedTurns {
    /// A prompt (sent with `request_params`) was answered on `link`: with a result, its turn is
    /// finished (the answer names it, or the prompt did).
    pub fn answered(&mut self, link: u32, request_params: &Value, outcome: &Result<Value, Value>) {
        let Ok(result) = outcome else {
            return;
        };
        let turn = result
            .pointer("/_meta/lembas/turnId")
            .or_else(|| request_params.pointer("/_meta/lembas/turnId"))
            .and_then(Value::as_str);
        let session = request_params.get("sessionId").and_then(Value::as_str);
        let (Some(session), Some(turn)) = (session, turn) else {
            return;
        };
        if session.len() > LONGEST_ID || turn.len() > LONGEST_ID {
            return;
        }
        let key = (session.to_string(), turn.to_string());
        if self.links.contains_key(&key) {
            return;
        }
        if self.order.len() >= MOST_KEPT
            && let Some(oldest) = self.order.pop_front()
        {
            self.links.remove(&oldest);
        }
        self.order.push_back(key.clone());
        self.links.insert(key, link);
    }

    /// A `_lembas/event` came on `link`: a `task` start of a turn finished on an earlier link is
    /// a finding (on the same link, the link's own model judges it).
    pub fn event(&self, link: u32, params: &Value) -> Option<Finding> {
        let event = params.get("event")?;
        if event.get("type").and_then(Value::as_str) != Some("task")
            || event.get("state").and_then(Value::as_str) != Some("start")
        {
            return None;
        }
        let session = params.get("sessionId").and_then(Value::as_str)?;
        let turn = event.get("turnId").and_then(Value::as_str)?;
        let finished_on = *self.links.get(&(session.to_string(), turn.to_string()))?;
        (finished_on != link).then(|| {
            Finding::new(
                ids::DEVICE_TURNS_PERSIST,
                format!(
                    "turn `{turn}` of session {session} finished on link {finished_on} and started again on link {link}: a finished turn keeps its answer across links and restarts, and does not run again"
                ),
            )
            .with_detail(format!(
                "expected its prompt, sent again, to get the first answer without a `task` start; came: {params}"
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::finding::rules_of;
    use serde_json::json;

    fn start(turn: &str) -> Value {
        json!({"sessionId": "s", "event": {"type": "task", "state": "start", "turnId": turn}})
    }

    fn prompt(turn: &str) -> Value {
        json!({"sessionId": "s", "_meta": {"lembas": {"turnId": turn}}})
    }

    #[test]
    fn a_finished_turn_that_starts_on_a_later_link_is_a_finding() {
        let mut finished = FinishedTurns::default();
        finished.answered(1, &prompt("t1"), &Ok(json!({"stopReason": "end_turn"})));
        assert_eq!(
            rules_of(
                &finished
                    .event(2, &start("t1"))
                    .into_iter()
                    .collect::<Vec<_>>()
            ),
            [ids::DEVICE_TURNS_PERSIST]
        );
        // The same link is the link's own model's to judge; another turn is no finding.
        assert!(finished.event(1, &start("t1")).is_none());
        assert!(finished.event(2, &start("t2")).is_none());
    }

    #[test]
    fn a_refused_or_unanswered_turn_may_run_again_and_what_is_kept_is_bounded() {
        let mut finished = FinishedTurns::default();
        finished.answered(1, &prompt("t1"), &Err(json!({"code": -32602})));
        assert!(finished.event(2, &start("t1")).is_none());
        for i in 0..(MOST_KEPT + 5) {
            finished.answered(1, &prompt(&format!("t{i}")), &Ok(json!({})));
        }
        assert_eq!(finished.links.len(), MOST_KEPT);
        assert!(finished.event(2, &start("t0")).is_none(), "the oldest went");
    }
}
