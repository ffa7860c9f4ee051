//! `_lembas/session/status`: what a session is doing now (who holds it, whether it works, the
//! turns waiting, the last one done, its plan), read without opening a session that is only in
//! the store, so that asking changes nothing.

use harness::rules::{Misbehaviours, ids};
use serde_json::{Value, json};

use super::call::Call;
use crate::answers::{Answer, param_str, refuse};
use crate::registry::Registry;
use crate::store::{StoredSession, TurnLog, TurnState};

/// What a misbehaving device's status says wrong; all off by default.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Faults {
    /// A session it does not have is refused, not said not to exist.
    pub unknown_refused: bool,
    /// `held` is always `none`.
    pub held_none: bool,
    /// `here` and `terminal` the wrong way round.
    pub held_swapped: bool,
    /// Not busy while a turn runs.
    pub busy_unseen: bool,
    /// Busy ever after a turn ran.
    pub still_busy: bool,
    /// The turns waiting are not listed.
    pub queued_unlisted: bool,
    /// The turns waiting are listed while one waits, not while two or more do.
    pub queued_unlisted_past_one: bool,
    /// The running turn stays listed among the waiting ones.
    pub running_listed: bool,
    /// No last turn is named.
    pub last_unnamed: bool,
    /// The oldest finished turn is named as the last one.
    pub last_is_first: bool,
    /// No plan, though the session has one.
    pub plan_none: bool,
}

impl Faults {
    /// The faults `m` asks for.
    pub(crate) fn of(m: &Misbehaviours) -> Faults {
        Faults {
            unknown_refused: m.breaks_way(ids::DEVICE_SESSION_UNKNOWN, "status_error"),
            held_none: m.breaks(ids::DEVICE_STATUS_HELD),
            held_swapped: m.breaks_way(ids::DEVICE_STATUS_HELD, "swapped"),
            busy_unseen: m.breaks(ids::DEVICE_STATUS_BUSY),
            still_busy: m.breaks_way(ids::DEVICE_STATUS_BUSY, "still_busy"),
            queued_unlisted: m.breaks(ids::DEVICE_STATUS_QUEUED),
            queued_unlisted_past_one: m.breaks_way(ids::DEVICE_STATUS_QUEUED, "two_waiting"),
            running_listed: m.breaks_way(ids::DEVICE_STATUS_QUEUED, "running_listed"),
            last_unnamed: m.breaks(ids::DEVICE_STATUS_TURNS),
            last_is_first: m.breaks_way(ids::DEVICE_STATUS_TURNS, "first_done"),
            plan_none: m.breaks_way(ids::DEVICE_PLAN_UPDATE, "status_none"),
        }
    }
}

/// Answers `_lembas/session/status`.
pub(crate) async fn answer(call: Call<'_>, faults: &Faults) -> Answer {
    let (registry, params) = (call.sessions.registry(), call.params);
    let id = param_str(params, "sessionId")?;
    // Misbehaving: a session it does not have is refused, not said not to exist.
    if faults.unknown_refused
        && registry.live_session(id).is_none()
        && registry.store.load_session(id).ok().flatten().is_none()
    {
        return Err(refuse(format!("no session `{id}` on this device")));
    }
    if let Some(live) = registry.live_session(id) {
        let state = live.state.lock().await;
        let running = state.running.as_ref().map(|r| r.turn_id.as_str());
        let shared = registry.is_terminal_session(id);
        let held = match (shared, faults.held_none) {
            (_, true) => "none",
            // Misbehaving: `here` and `terminal` the wrong way round.
            (true, false) if faults.held_swapped => "here",
            (false, false) if faults.held_swapped => "terminal",
            (true, false) => "terminal",
            (false, false) => "here",
        };
        let now = Now {
            turns: &state.turns,
            running,
            queued: &state.queued,
            held,
        };
        return Ok(status_of(registry, faults, &state.stored, now));
    }
    // Not open: read from the store without opening it, so a status changes nothing.
    match registry.store.load_session(id).ok().flatten() {
        Some(stored) => {
            let turns = registry.stored_turns(id);
            let now = Now {
                turns: &turns,
                running: None,
                queued: &[],
                held: "none",
            };
            Ok(status_of(registry, faults, &stored, now))
        }
        None => Ok(
            json!({ "sessionId": id, "exists": false, "held": "none", "busy": false, "title": "", "queued": [] }),
        ),
    }
}

/// Where a session's turns stand at the moment of asking.
struct Now<'a> {
    turns: &'a TurnLog,
    running: Option<&'a str>,
    queued: &'a [String],
    held: &'a str,
}

fn status_of(registry: &Registry, faults: &Faults, stored: &StoredSession, now: Now) -> Value {
    let Now {
        turns,
        running,
        queued,
        held,
    } = now;
    let mut result = json!({
        "sessionId": stored.id,
        "exists": true,
        "held": held,
        // Misbehaving: not busy while a turn runs, or busy ever after one ran.
        "busy": (running.is_some() && !faults.busy_unseen)
            || (running.is_none()
                && faults.still_busy
                && stored.messages.iter().any(|m| m.role == "user")),
        "title": stored.title,
        "queued": [],
    });
    if registry.has("turns") {
        // Misbehaving: the turns waiting are not listed (at all, or when more than one waits).
        let unlisted =
            faults.queued_unlisted || (faults.queued_unlisted_past_one && queued.len() > 1);
        if !unlisted {
            result["queued"] = json!(queued);
        }
        if let Some(turn) = running
            && faults.running_listed
        {
            // Misbehaving: the running turn stays listed among the waiting ones.
            let mut waiting = vec![turn.to_string()];
            waiting.extend(queued.iter().cloned());
            result["queued"] = json!(waiting);
        }
        if let Some(turn) = running {
            result["turnId"] = json!(turn);
        }
        if let Some(last) = turns.last_done()
            && !faults.last_unnamed
        {
            result["lastTurnId"] = json!(last.turn_id);
            // Misbehaving: the oldest finished turn named as the last one.
            if faults.last_is_first
                && let Some(first) = turns.turns.iter().find(|t| t.state == TurnState::Done)
            {
                result["lastTurnId"] = json!(first.turn_id);
            }
        }
    }
    if registry.has("plan_state") {
        result["plan"] = stored.plan.clone().unwrap_or(Value::Null);
        if faults.plan_none {
            // Misbehaving: status gives no plan though the session has one.
            result["plan"] = Value::Null;
        }
    }
    result
}
