//! `_lembas/session/rewind`: a turn and every later one leave a session's conversation
//! (between turns only; the files they wrote stay), and the client must name a turn it sent in
//! that session's prompts, which the device checks.

use std::collections::HashSet;

use harness::finding::Finding;
use harness::jsonrpc::{INTERNAL_ERROR, RpcError};
use harness::rules::{Misbehaviours, ids};
use serde_json::json;

use super::call::Call;
use crate::answers::{Answer, param_str, refuse};
use crate::open_session::State;

/// What a misbehaving device gets wrong about rewinding; all off by default.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Faults {
    /// A rewind while the session works is not refused.
    pub while_working: bool,
    /// A rewind while the session works is refused as an internal error.
    pub working_internal_error: bool,
    /// A rewind to an unknown turn is answered `reverted: 0`, not refused.
    pub unknown_accepted: bool,
    /// A rewind to an unknown turn is refused as an internal error.
    pub unknown_internal_error: bool,
    /// A rewind says it rewound, and keeps every turn.
    pub keeps_turns: bool,
    /// A rewind reverts the turn before the one named too.
    pub one_more: bool,
    /// The plan files the reverted turns wrote are removed with them.
    pub removes_plans: bool,
    /// The plan files the reverted turns wrote are moved to a hidden folder.
    pub moves_plans: bool,
}

impl Faults {
    /// The faults `m` asks for.
    pub(crate) fn of(m: &Misbehaviours) -> Faults {
        Faults {
            while_working: m.breaks(ids::DEVICE_REWIND_WORKING),
            working_internal_error: m.breaks_way(ids::DEVICE_REWIND_WORKING, "other_code"),
            unknown_accepted: m.breaks(ids::DEVICE_REWIND_UNKNOWN),
            unknown_internal_error: m.breaks_way(ids::DEVICE_REWIND_UNKNOWN, "other_code"),
            keeps_turns: m.breaks(ids::DEVICE_REWIND_REVERTS),
            one_more: m.breaks_way(ids::DEVICE_REWIND_REVERTS, "one_more"),
            removes_plans: m.breaks(ids::DEVICE_REWIND_FILES_KEPT),
            moves_plans: m.breaks_way(ids::DEVICE_REWIND_FILES_KEPT, "moved_aside"),
        }
    }
}

/// Answers `_lembas/session/rewind`.
pub(crate) async fn answer(call: Call<'_>, faults: &Faults) -> Answer {
    let params = call.params;
    let live = call.sessions.session(params).await?;
    let turn_id = param_str(params, "turnId")?;
    let mut state = live.state.lock().await;
    if state.running.is_some() && !faults.while_working {
        // Misbehaving: refused as an internal error rather than invalid params.
        if faults.working_internal_error {
            return Err(RpcError::new(INTERNAL_ERROR, "the session is working"));
        }
        return Err(refuse("the session is working: rewind it between turns"));
    }
    let Some(first) = state
        .stored
        .messages
        .iter()
        .position(|m| m.turn_id == turn_id && !m.reverted)
    else {
        if faults.unknown_accepted {
            return Ok(json!({ "reverted": 0 }));
        }
        // Misbehaving: refused as an internal error rather than invalid params.
        if faults.unknown_internal_error {
            return Err(RpcError::new(
                INTERNAL_ERROR,
                format!("this session has no turn `{turn_id}`"),
            ));
        }
        return Err(refuse(format!("this session has no turn `{turn_id}`")));
    };
    if faults.keeps_turns {
        // Misbehaving: says it rewound, and keeps every turn.
        return Ok(json!({ "reverted": 1 }));
    }
    // Misbehaving: the turn before the one named is reverted too.
    let first = if faults.one_more {
        state.stored.messages[..first]
            .iter()
            .rposition(|m| m.role == "user" && !m.reverted)
            .unwrap_or(first)
    } else {
        first
    };
    let reverted = revert_from(&mut state, first, faults);
    call.sessions.registry().save(&state);
    Ok(json!({ "reverted": reverted.len() }))
}

/// Reverts the messages from `first` on; gives the turns that left the conversation.
fn revert_from(state: &mut State, first: usize, faults: &Faults) -> Vec<String> {
    // That turn and every later one leave the conversation; files are not touched.
    let mut reverted: Vec<String> = Vec::new();
    let cwd = state.stored.cwd.clone();
    for message in state
        .stored
        .messages
        .iter_mut()
        .skip(first)
        .filter(|m| !m.reverted)
    {
        message.reverted = true;
        // Misbehaving: the plan files the reverted turns wrote are removed with them.
        if faults.removes_plans {
            for tool in message.tools.iter().filter(|t| t["name"] == "plan_submit") {
                let file = cwd.join(super::plan::plan_path(&tool["args"]));
                let _ = std::fs::remove_file(file);
            }
        }
        // Misbehaving: the plan files the reverted turns wrote are moved to a hidden folder.
        if faults.moves_plans {
            for tool in message.tools.iter().filter(|t| t["name"] == "plan_submit") {
                let path = super::plan::plan_path(&tool["args"]);
                let aside = cwd.join(".reverted").join(&path);
                if let Some(parent) = aside.parent() {
                    let _ = std::fs::create_dir_all(parent);
                }
                let _ = std::fs::rename(cwd.join(&path), aside);
            }
        }
        if !reverted.contains(&message.turn_id) {
            reverted.push(message.turn_id.clone());
        }
    }
    reverted
}

/// The client's rewind of `session` names `turn`, which is not among the turn ids it `sent` in
/// that session's prompts.
pub(crate) fn unknown_turn(
    session: &str,
    turn: &str,
    sent: &HashSet<String>,
    params: &serde_json::Value,
) -> Option<Finding> {
    if sent.contains(turn) {
        return None;
    }
    let mut sorted: Vec<&String> = sent.iter().collect();
    sorted.sort();
    Some(
        Finding::new(
            ids::INSTANCE_REWIND_KNOWN_TURN,
            format!(
                "the rewind of session `{session}` names turn `{turn}`, which the client never sent in that session's prompts"
            ),
        )
        .with_detail(format!("turns it sent there: {sorted:?}; params: {params}")),
    )
}
