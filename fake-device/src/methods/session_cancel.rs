//! `session/cancel`: a notification that stops a session's running turn (the turn then ends
//! `cancelled`, see [`crate::turns`]); nothing to answer, and nothing to stop while no turn
//! runs. The client must send it as a notification, which the device checks.

use harness::finding::Finding;
use harness::rules::{Misbehaviours, ids};
use serde_json::Value;

use crate::sessions::Sessions;

/// What a misbehaving device gets wrong about cancelling; all off by default.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Faults {
    /// `session/cancel` stops nothing.
    pub ignored: bool,
    /// A cancel that came while nothing ran is kept for the next turn.
    pub idle_kept: bool,
    /// A cancel that came while nothing ran refuses the next prompt.
    pub idle_refuses_next: bool,
}

impl Faults {
    /// The faults `m` asks for.
    pub(crate) fn of(m: &Misbehaviours) -> Faults {
        Faults {
            ignored: m.breaks(ids::DEVICE_CANCEL_TURN),
            idle_kept: m.breaks(ids::DEVICE_CANCEL_IDLE),
            idle_refuses_next: m.breaks_way(ids::DEVICE_CANCEL_IDLE, "refuses_next"),
        }
    }
}

/// Takes `session/cancel`: stops the running turn of the session it names, if any.
pub(crate) async fn take(sessions: &Sessions, params: &Value, faults: &Faults) {
    let Some(id) = params.get("sessionId").and_then(Value::as_str) else {
        return;
    };
    let Some(live) = sessions.open(id).await else {
        return;
    };
    if faults.ignored {
        return;
    }
    let mut state = live.state.lock().await;
    match &state.running {
        Some(running) => running.cancel(),
        // Misbehaving: a cancel that came while nothing ran is kept for the next turn.
        None if faults.idle_kept => state.cancel_kept = true,
        // Misbehaving: a cancel that came while nothing ran refuses the next prompt.
        None if faults.idle_refuses_next => state.refuse_next = true,
        None => {}
    }
}

/// The client's `session/cancel` came as a request (`request`: it had an id), not as the
/// notification it is.
pub(crate) fn came_as_request(params: &Value, request: bool) -> Option<Finding> {
    request.then(|| {
        Finding::new(
            ids::INSTANCE_CANCEL_IS_NOTIFICATION,
            "`session/cancel` came as a request (with an id); it is a notification",
        )
        .with_detail(format!("params: {params}"))
    })
}
