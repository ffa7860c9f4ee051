//! `_lembas/steer`: a message for a session's running turn, taken in at the turn's next step
//! (the turn itself reads it from the session's state, see [`crate::turns`]); refused while
//! nothing runs, so the client sends it as a prompt. The answer does not wait for the turn.

use harness::jsonrpc::{INTERNAL_ERROR, RpcError};
use harness::rules::{Misbehaviours, ids};
use serde_json::{Value, json};

use super::call::Call;
use crate::answers::{Answer, param_str, refuse};

/// What a misbehaving device gets wrong about steering; all off by default.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Faults {
    /// A steer while a turn runs is answered as if nothing ran.
    pub running_unseen: bool,
    /// A steer is said to be queued, and never given to the model.
    pub dropped: bool,
    /// A steer while nothing runs is answered `queued: 0`, not refused.
    pub idle_accepted: bool,
    /// A steer while nothing runs is refused as an internal error, not with -32602.
    pub idle_internal_error: bool,
}

impl Faults {
    /// The faults `m` asks for.
    pub(crate) fn of(m: &Misbehaviours) -> Faults {
        Faults {
            running_unseen: m.breaks(ids::DEVICE_STEER_RUNNING),
            dropped: m.breaks_way(ids::DEVICE_STEER_RUNNING, "dropped"),
            idle_accepted: m.breaks(ids::DEVICE_STEER_IDLE),
            idle_internal_error: m.breaks_way(ids::DEVICE_STEER_IDLE, "internal_error"),
        }
    }
}

/// Answers `_lembas/steer`.
pub(crate) async fn answer(call: Call<'_>, faults: &Faults) -> Answer {
    let params = call.params;
    let live = call.sessions.session(params).await?;
    let text = param_str(params, "text")?;
    let mut state = live.state.lock().await;
    let message_id = params
        .get("messageId")
        .and_then(Value::as_str)
        .map(String::from);
    match state.running.as_mut().filter(|_| !faults.running_unseen) {
        Some(running) if faults.dropped => {
            // Misbehaving: the steer is said to be queued, and never given to the model.
            Ok(json!({ "queued": running.steers.len() + 1 }))
        }
        Some(running) => {
            running.steers.push((text.to_string(), message_id));
            Ok(json!({ "queued": running.steers.len() }))
        }
        None if faults.idle_accepted => Ok(json!({ "queued": 0 })),
        None if faults.idle_internal_error => {
            // Misbehaving: refused as an internal error, not with -32602.
            Err(RpcError::new(
                INTERNAL_ERROR,
                "nothing runs in this session: send it as a prompt",
            ))
        }
        None => Err(refuse("nothing runs in this session: send it as a prompt")),
    }
}
