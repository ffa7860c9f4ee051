//! A reference model of a device's turns, written from the spec's `session/prompt` section (turn
//! ids, the queue, the stop reasons) and its `_lembas/session/status` (the turn fields), and fed
//! only what crosses one link: what the client sent, the `task` events a device sends and its
//! answers. It holds what the device's turns may be at each moment and says where what came
//! cannot be: a turn id that runs twice, two turns of a session running at once, an answer with a
//! stop reason the spec does not have, a status that leaves out a turn that waits (`waiting`),
//! and, across the links of a run, a finished turn that runs again ([`FinishedTurns`]).
//!
//! It judges only what the wire shows without a race: an event's order against another event of
//! the same link, an answer's own content. A device that sends no `task` events is judged on its
//! answers alone.

mod finished;
mod waiting;

use std::collections::{HashMap, VecDeque};
use std::time::Instant;

use serde_json::Value;

use crate::finding::Finding;
use crate::lembas::methods;
use crate::rules::ids;

pub use finished::FinishedTurns;
pub use waiting::ADMITTED_WITHIN;

/// The stop reasons a prompt's answer may give (spec, `session/prompt`, the result).
pub const STOP_REASONS: [&str; 4] = ["end_turn", "max_turn_requests", "max_tokens", "cancelled"];

/// The sessions a model follows at most on one link, and the turn ids it keeps of each (the
/// spec keeps a session's last 200 turn ids): what a peer can make it hold stays bounded.
const MOST_SESSIONS: usize = 1_000;
const MOST_TURNS: usize = 200;
/// A turn id longer than this is not kept (its shape is another rule's to judge).
const LONGEST_TURN_ID: usize = 512;

/// What one link has shown of each session's turns.
#[derive(Debug, Default)]
pub struct TurnModel {
    sessions: HashMap<String, SessionTurns>,
    waiting: waiting::Waiting,
}

#[derive(Debug, Default)]
struct SessionTurns {
    /// The turn running now, by its `task` start.
    running: Option<String>,
    /// The turn ids that started on this link, oldest first.
    started: VecDeque<String>,
}

impl TurnModel {
    /// A message the client sent: a prompt joins its session's queue, a status request is
    /// remembered for its answer, a cancel or delete may end what waits unrun.
    pub fn sent(&mut self, message: &Value) {
        self.sent_at(message, Instant::now());
    }

    fn sent_at(&mut self, message: &Value, at: Instant) {
        let params = message.get("params").unwrap_or(&Value::Null);
        let id = message.get("id").map(Value::to_string);
        match (message.get("method").and_then(Value::as_str), id) {
            (Some(methods::SESSION_PROMPT), Some(id)) => self.waiting.prompt_sent(id, params, at),
            (Some(methods::LEMBAS_SESSION_STATUS), Some(id)) => {
                self.waiting.status_sent(id, params, at);
            }
            (Some(methods::SESSION_CANCEL | methods::LEMBAS_SESSION_DELETE), _) => {
                if let Some(session) = params.get("sessionId").and_then(Value::as_str) {
                    self.waiting.stopped(session);
                }
            }
            _ => {}
        }
    }

    /// An answer of the device's to the client's request `request_id` (`method`, sent with
    /// `request_params`); `lists_turns`: the device listed capability `turns`.
    pub fn answered(
        &mut self,
        request_id: &Value,
        method: &str,
        request_params: &Value,
        outcome: &Result<Value, Value>,
        lists_turns: bool,
    ) -> Vec<Finding> {
        match method {
            methods::SESSION_PROMPT => {
                self.waiting.prompt_answered(request_id.to_string());
                self.prompt_answered(request_params, outcome)
            }
            methods::LEMBAS_SESSION_STATUS => {
                self.waiting
                    .status_answered(&request_id.to_string(), outcome, lists_turns);
                Vec::new()
            }
            _ => Vec::new(),
        }
    }

    /// A `_lembas/event`'s params: a `task` start or end moves the session's turns on.
    pub fn event(&mut self, params: &Value) -> Vec<Finding> {
        let (Some(session), Some(event)) = (
            params.get("sessionId").and_then(Value::as_str),
            params.get("event"),
        ) else {
            return Vec::new();
        };
        if event.get("type").and_then(Value::as_str) != Some("task") {
            return Vec::new();
        }
        let Some(turn) = event
            .get("turnId")
            .and_then(Value::as_str)
            .filter(|t| t.len() <= LONGEST_TURN_ID)
        else {
            return Vec::new();
        };
        if !self.sessions.contains_key(session) && self.sessions.len() >= MOST_SESSIONS {
            return Vec::new();
        }
        let turns = self.sessions.entry(session.to_string()).or_default();
        match event.get("state").and_then(Value::as_str) {
            Some("start") => {
                let mut found = turns.start(session, turn);
                found.extend(self.waiting.started(session, turn));
                found
            }
            Some("end") => {
                if turns.running.as_deref() == Some(turn) {
                    turns.running = None;
                }
                Vec::new()
            }
            _ => Vec::new(),
        }
    }

    /// The answer to a `session/prompt` (its params and what came): its turn no longer runs,
    /// and a result's stop reason is one the spec has.
    fn prompt_answered(
        &mut self,
        request_params: &Value,
        outcome: &Result<Value, Value>,
    ) -> Vec<Finding> {
        if let Some(turns) = request_params
            .get("sessionId")
            .and_then(Value::as_str)
            .and_then(|s| self.sessions.get_mut(s))
        {
            let answered = outcome
                .as_ref()
                .ok()
                .and_then(|r| r.pointer("/_meta/lembas/turnId"))
                .or_else(|| request_params.pointer("/_meta/lembas/turnId"))
                .and_then(Value::as_str);
            // An answer that names no turn may be the running one's: the model forgets what it
            // cannot tell apart rather than judge the next start by a guess.
            if answered.is_none_or(|a| turns.running.as_deref() == Some(a)) {
                turns.running = None;
            }
        }
        let Ok(result) = outcome else {
            return Vec::new();
        };
        match result.get("stopReason").and_then(Value::as_str) {
            Some(reason) if STOP_REASONS.contains(&reason) => Vec::new(),
            said => vec![
                Finding::new(
                    ids::DEVICE_PROMPT_ANSWER,
                    format!(
                        "a prompt was answered with stopReason {}, which the spec does not have",
                        said.map_or("(none)".to_string(), |s| format!("`{s}`"))
                    ),
                )
                .with_detail(format!(
                    "expected one of {}; the answer: {result}",
                    STOP_REASONS.join(", ")
                )),
            ],
        }
    }
}

impl SessionTurns {
    fn start(&mut self, session: &str, turn: &str) -> Vec<Finding> {
        let mut found = Vec::new();
        if self.started.iter().any(|t| t == turn) {
            found.push(Finding::new(
                ids::DEVICE_TURNS_DEDUP,
                format!("turn `{turn}` of session {session} started a second time: a turn id the session accepted does not run again"),
            ));
        }
        if let Some(running) = self.running.as_deref().filter(|r| *r != turn) {
            found.push(Finding::new(
                ids::DEVICE_PROMPT_QUEUED,
                format!("turn `{turn}` of session {session} started while turn `{running}` still ran: a prompt waits for the running turn"),
            ));
        }
        if self.started.len() >= MOST_TURNS {
            self.started.pop_front();
        }
        self.started.push_back(turn.to_string());
        self.running = Some(turn.to_string());
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::finding::rules_of;
    use serde_json::json;

    fn prompt_of(turn: &str) -> Value {
        json!({"sessionId": "s", "_meta": {"lembas": {"turnId": turn}}})
    }

    fn task(session: &str, turn: &str, state: &str) -> Value {
        json!({"sessionId": session, "event": {"type": "task", "state": state, "turnId": turn}})
    }

    #[test]
    fn turns_that_follow_each_other_are_kept_and_the_spec_s_stop_reasons_pass() {
        let mut model = TurnModel::default();
        for turn in ["t1", "t2"] {
            assert!(model.event(&task("s", turn, "start")).is_empty());
            assert!(model.event(&task("s", turn, "end")).is_empty());
        }
        // Two sessions run side by side: each has its own queue.
        assert!(model.event(&task("s", "t3", "start")).is_empty());
        assert!(model.event(&task("other", "t1", "start")).is_empty());
        let prompt = json!({"sessionId": "s", "_meta": {"lembas": {"turnId": "t3"}}});
        for reason in STOP_REASONS {
            assert!(
                model
                    .prompt_answered(&prompt, &Ok(json!({"stopReason": reason})))
                    .is_empty()
            );
        }
        assert!(
            model
                .prompt_answered(&prompt, &Err(json!({"code": -32602})))
                .is_empty()
        );
    }

    #[test]
    fn a_turn_id_that_runs_twice_is_a_dedup_finding() {
        let mut model = TurnModel::default();
        model.event(&task("s", "t1", "start"));
        model.event(&task("s", "t1", "end"));
        assert_eq!(
            rules_of(&model.event(&task("s", "t1", "start"))),
            [ids::DEVICE_TURNS_DEDUP]
        );
    }

    #[test]
    fn a_turn_that_starts_while_another_runs_is_a_queue_finding_until_the_answer_ends_it() {
        let mut model = TurnModel::default();
        model.event(&task("s", "t1", "start"));
        assert_eq!(
            rules_of(&model.event(&task("s", "t2", "start"))),
            [ids::DEVICE_PROMPT_QUEUED]
        );
        // An answer ends its turn even when no `end` event came, a refusal too; one that names
        // no turn may be the running one's.
        let prompt = json!({"sessionId": "s", "_meta": {"lembas": {"turnId": "t2"}}});
        model.prompt_answered(&prompt, &Ok(json!({"stopReason": "end_turn"})));
        assert!(model.event(&task("s", "t3", "start")).is_empty());
        model.prompt_answered(&prompt_of("t3"), &Err(json!({"code": -32603})));
        assert!(model.event(&task("s", "t4", "start")).is_empty());
        model.prompt_answered(
            &json!({"sessionId": "s"}),
            &Ok(json!({"stopReason": "end_turn"})),
        );
        assert!(model.event(&task("s", "t5", "start")).is_empty());
        // An answer to another turn leaves the running one running.
        model.prompt_answered(&prompt_of("t1"), &Ok(json!({"stopReason": "end_turn"})));
        assert_eq!(
            rules_of(&model.event(&task("s", "t6", "start"))),
            [ids::DEVICE_PROMPT_QUEUED]
        );
    }

    #[test]
    fn a_stop_reason_the_spec_does_not_have_is_an_answer_finding() {
        let mut model = TurnModel::default();
        for answer in [json!({"stopReason": "done"}), json!({})] {
            let found = model.prompt_answered(&json!({"sessionId": "s"}), &Ok(answer));
            assert_eq!(rules_of(&found), [ids::DEVICE_PROMPT_ANSWER]);
        }
    }

    /// A prompt of session `s` with turn id `turn`, as request `id`.
    fn prompt_message(id: u64, turn: &str) -> Value {
        json!({"jsonrpc": "2.0", "id": id, "method": methods::SESSION_PROMPT, "params": prompt_of(turn)})
    }

    /// Three prompts sent long enough before a status request; the first runs.
    fn three_waiting(model: &mut TurnModel) -> Instant {
        let then = Instant::now() - 2 * ADMITTED_WITHIN;
        for (id, turn) in [(1, "t1"), (2, "t2"), (3, "t3")] {
            model.sent_at(&prompt_message(id, turn), then);
        }
        model.event(&task("s", "t1", "start"));
        then
    }

    fn ask_status(model: &mut TurnModel, id: u64, status: Value) {
        let request = json!({"id": id, "method": methods::LEMBAS_SESSION_STATUS, "params": {"sessionId": "s"}});
        model.sent(&request);
        let mut answer =
            json!({"sessionId": "s", "exists": true, "held": "here", "busy": true, "title": ""});
        if let (Some(fields), Some(extra)) = (answer.as_object_mut(), status.as_object()) {
            fields.extend(extra.clone());
        }
        assert!(
            model
                .answered(
                    &json!(id),
                    methods::LEMBAS_SESSION_STATUS,
                    &json!({}),
                    &Ok(answer),
                    true
                )
                .is_empty()
        );
    }

    fn end_and_start_next(model: &mut TurnModel, ended: (u64, &str), next: &str) -> Vec<Finding> {
        model.event(&task("s", ended.1, "end"));
        let mut found = model.answered(
            &json!(ended.0),
            methods::SESSION_PROMPT,
            &prompt_of(ended.1),
            &Ok(json!({"stopReason": "end_turn"})),
            true,
        );
        found.extend(model.event(&task("s", next, "start")));
        found
    }

    #[test]
    fn a_status_that_leaves_out_a_waiting_turn_is_a_finding_once_that_turn_starts() {
        let mut model = TurnModel::default();
        three_waiting(&mut model);
        ask_status(&mut model, 9, json!({"turnId": "t1", "queued": []}));
        let found = end_and_start_next(&mut model, (1, "t1"), "t2");
        assert_eq!(rules_of(&found), [ids::DEVICE_STATUS_QUEUED]);
        assert!(found[0].summary.contains("`t2`"), "{:?}", found[0]);
        let found = end_and_start_next(&mut model, (2, "t2"), "t3");
        assert_eq!(rules_of(&found), [ids::DEVICE_STATUS_QUEUED]);
    }

    #[test]
    fn a_status_that_names_each_waiting_turn_or_a_later_one_passes() {
        for status in [
            json!({"turnId": "t1", "queued": ["t2", "t3"]}),
            // t1 and t2 ended before the status was made, their answers still on the way.
            json!({"turnId": "t3", "queued": [], "lastTurnId": "t2"}),
            json!({"busy": false, "queued": [], "lastTurnId": "t3"}),
        ] {
            let mut model = TurnModel::default();
            three_waiting(&mut model);
            ask_status(&mut model, 9, status.clone());
            let found = end_and_start_next(&mut model, (1, "t1"), "t2");
            assert!(found.is_empty(), "{status}: {found:?}");
        }
    }

    #[test]
    fn a_turn_left_out_is_excused_when_refused_cancelled_or_sent_just_before_the_status() {
        // Refused: it never waited.
        let mut model = TurnModel::default();
        three_waiting(&mut model);
        ask_status(&mut model, 9, json!({"turnId": "t1", "queued": []}));
        model.answered(
            &json!(2),
            methods::SESSION_PROMPT,
            &prompt_of("t2"),
            &Err(json!({"code": -32602})),
            true,
        );
        assert!(end_and_start_next(&mut model, (1, "t1"), "t2").is_empty());
        // A cancel went before the status: what waited may end unrun.
        let mut model = TurnModel::default();
        three_waiting(&mut model);
        model.sent(&json!({"method": methods::SESSION_CANCEL, "params": {"sessionId": "s"}}));
        ask_status(&mut model, 9, json!({"turnId": "t1", "queued": []}));
        assert!(end_and_start_next(&mut model, (1, "t1"), "t2").is_empty());
        // Sent just before the status: the device may not have admitted it yet.
        let mut model = TurnModel::default();
        model.sent(&prompt_message(1, "t1"));
        model.sent(&prompt_message(2, "t2"));
        model.event(&task("s", "t1", "start"));
        ask_status(&mut model, 9, json!({"turnId": "t1", "queued": []}));
        assert!(end_and_start_next(&mut model, (1, "t1"), "t2").is_empty());
        // A device without `turns` gives no turn fields.
        let mut model = TurnModel::default();
        three_waiting(&mut model);
        let request = json!({"id": 9, "method": methods::LEMBAS_SESSION_STATUS, "params": {"sessionId": "s"}});
        model.sent(&request);
        let status = json!({"sessionId": "s", "exists": true, "held": "here", "busy": true, "title": "", "queued": []});
        model.answered(
            &json!(9),
            methods::LEMBAS_SESSION_STATUS,
            &json!({}),
            &Ok(status),
            false,
        );
        assert!(end_and_start_next(&mut model, (1, "t1"), "t2").is_empty());
    }

    #[test]
    fn what_a_peer_makes_it_keep_stays_bounded() {
        let mut model = TurnModel::default();
        for i in 0..(MOST_SESSIONS + 10) {
            model.event(&task(&format!("s{i}"), "t", "start"));
        }
        assert_eq!(model.sessions.len(), MOST_SESSIONS);
        for i in 0..(MOST_TURNS + 10) {
            model.event(&task("s0", &format!("t{i}"), "start"));
        }
        assert_eq!(model.sessions["s0"].started.len(), MOST_TURNS);
        model.event(&task("s0", &"x".repeat(LONGEST_TURN_ID + 1), "start"));
        assert_eq!(model.sessions["s0"].started.len(), MOST_TURNS);
    }
}
