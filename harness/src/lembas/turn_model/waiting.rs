//! The prompts a device was sent and has not answered, per session and in the order they went,
//! held to what its status says of its queue (spec, `_lembas/session/status`, the turn fields): a
//! prompt that waits is listed in `queued`, or is the turn running, or the last one done.
//!
//! The wire leaves readings open, and each is accepted. A device may handle its messages side by
//! side, so a prompt sent just before a status request may not be admitted yet when the status is
//! made: only a prompt that went out [`ADMITTED_WITHIN`] before the request is taken as admitted.
//! A turn may end just before the status is made while its answer comes after the status's: a
//! turn is accounted for when it, or any prompt of its session sent after it, is named by the
//! status. What is left becomes a finding only when the turn is seen to start afterwards (so it
//! had neither ended nor been dropped); its refusal, or a cancel or delete of its session sent
//! before the status came, excuses it. A device that says no `task` events is not judged here.

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::finding::Finding;
use crate::rules::ids;

/// How long after its prompt went out a turn is taken to be admitted (queued or running): a
/// device handling its messages side by side may answer a status before it has admitted a
/// prompt sent just before it, which the spec allows; a quarter second is far past any
/// admission on a device that has not stalled.
pub const ADMITTED_WITHIN: Duration = Duration::from_millis(250);

/// What the model keeps at most of what a peer can make it hold: prompts and status requests
/// unanswered, answers that came early, turns a status left out.
const MOST_KEPT: usize = 10_000;
/// The turn ids kept of each session's order, and the sessions kept.
const MOST_ORDERED: usize = 200;
const MOST_SESSIONS: usize = 1_000;

/// The prompts waiting for their answers and what status said of them.
#[derive(Debug, Default)]
pub(super) struct Waiting {
    /// Prompts sent and not answered, by request id.
    prompts: HashMap<String, Sent>,
    /// Each session's turn ids in the order their prompts went on this link.
    order: HashMap<String, VecDeque<String>>,
    /// Status requests not yet answered, by request id: their session and when they went.
    asked: HashMap<String, (String, Instant)>,
    /// Turns a status left out, by session and turn id: the finding, told if they start.
    unlisted: HashMap<(String, String), Finding>,
    /// Prompt answers that came before the model saw their request go.
    answered_early: HashSet<String>,
}

#[derive(Debug)]
struct Sent {
    session: String,
    turn: String,
    at: Instant,
    /// A cancel or a delete of its session went after it: it may end unrun and unlisted.
    excused: bool,
}

impl Waiting {
    /// A `session/prompt` went out. One without a turn id, or with one this link sent before,
    /// makes no new entry in the queue the model can follow.
    pub(super) fn prompt_sent(&mut self, id: String, params: &Value, at: Instant) {
        if self.answered_early.remove(&id) {
            return;
        }
        let (Some(session), Some(turn)) = (
            params.get("sessionId").and_then(Value::as_str),
            params
                .pointer("/_meta/lembas/turnId")
                .and_then(Value::as_str),
        ) else {
            return;
        };
        if !self.order.contains_key(session) && self.order.len() >= MOST_SESSIONS {
            return;
        }
        let order = self.order.entry(session.to_string()).or_default();
        if order.iter().any(|t| t == turn) || self.prompts.len() >= MOST_KEPT {
            return;
        }
        if order.len() >= MOST_ORDERED {
            order.pop_front();
        }
        order.push_back(turn.to_string());
        self.prompts.insert(
            id,
            Sent {
                session: session.to_string(),
                turn: turn.to_string(),
                at,
                excused: false,
            },
        );
    }

    /// A cancel or a delete of `session` went out: what waits in it may end without running.
    pub(super) fn stopped(&mut self, session: &str) {
        for sent in self.prompts.values_mut().filter(|s| s.session == session) {
            sent.excused = true;
        }
    }

    /// A `_lembas/session/status` request went out.
    pub(super) fn status_sent(&mut self, id: String, params: &Value, at: Instant) {
        if let Some(session) = params.get("sessionId").and_then(Value::as_str)
            && self.asked.len() < MOST_KEPT
        {
            self.asked.insert(id, (session.to_string(), at));
        }
    }

    /// A prompt was answered: it waits no more, and a status that left it out is excused when
    /// it never started.
    pub(super) fn prompt_answered(&mut self, id: String) {
        match self.prompts.remove(&id) {
            Some(sent) => {
                self.unlisted.remove(&(sent.session, sent.turn));
            }
            None if self.answered_early.len() < MOST_KEPT => {
                self.answered_early.insert(id);
            }
            None => {}
        }
    }

    /// A status was answered: each prompt of its session that waited long enough and is still
    /// unanswered must be accounted for by it (`lists_turns`: the device lists capability
    /// `turns`, without which the turn fields are not given).
    pub(super) fn status_answered(
        &mut self,
        id: &str,
        outcome: &Result<Value, Value>,
        lists_turns: bool,
    ) {
        let Some((session, asked_at)) = self.asked.remove(id) else {
            return;
        };
        let Ok(status) = outcome else {
            return;
        };
        if !lists_turns
            || status.get("exists") != Some(&Value::Bool(true))
            || status.get("held").and_then(Value::as_str) != Some("here")
        {
            return;
        }
        let named = named_turns(status);
        let Some(order) = self.order.get(&session) else {
            return;
        };
        let accounted = |turn: &str| {
            order
                .iter()
                .skip_while(|t| t.as_str() != turn)
                .any(|t| named.contains(t.as_str()))
        };
        for sent in self.prompts.values() {
            let admitted = asked_at
                .checked_duration_since(sent.at)
                .is_some_and(|before| before >= ADMITTED_WITHIN);
            if sent.session != session || sent.excused || !admitted || accounted(&sent.turn) {
                continue;
            }
            if self.unlisted.len() >= MOST_KEPT {
                break;
            }
            let finding = Finding::new(
                ids::DEVICE_STATUS_QUEUED,
                format!(
                    "turn `{}` of session {session} waited, unanswered, when its status was made, and ran after it; the status did not list it",
                    sent.turn
                ),
            )
            .with_detail(format!(
                "expected `{}` in queued (or as turnId or lastTurnId, or a later turn of the session there): its prompt went out {} ms before the status request; the status: {status}",
                sent.turn,
                asked_at.duration_since(sent.at).as_millis()
            ));
            self.unlisted
                .insert((session.clone(), sent.turn.clone()), finding);
        }
    }

    /// A turn started: a status that left it out while it waited is a finding now.
    pub(super) fn started(&mut self, session: &str, turn: &str) -> Option<Finding> {
        self.unlisted
            .remove(&(session.to_string(), turn.to_string()))
    }
}

/// The turn ids a status names: the running one, the waiting ones, the last one done.
fn named_turns(status: &Value) -> HashSet<&str> {
    let mut named: HashSet<&str> = ["turnId", "lastTurnId"]
        .iter()
        .filter_map(|field| status.get(*field).and_then(Value::as_str))
        .collect();
    if let Some(queued) = status.get("queued").and_then(Value::as_array) {
        named.extend(queued.iter().filter_map(Value::as_str));
    }
    named
}
