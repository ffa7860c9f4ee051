//! The methods that reach a session's running turn from outside it: `_lembas/steer` hands it a
//! message for its next step, `session/cancel` stops it. Neither waits for the turn.

use harness::jsonrpc::RpcError;
use serde_json::{Value, json};

use super::Turns;
use crate::answers::{Answer, param_str, refuse};
use crate::live::Live;

impl Turns<'_> {
    /// `_lembas/steer`: a message for the running turn, taken in at its next step.
    pub(crate) async fn steer(&self, live: &Live, params: &Value) -> Answer {
        let faults = &self.faults.controls;
        let text = param_str(params, "text")?;
        let mut state = live.state.lock().await;
        let message_id = params
            .get("messageId")
            .and_then(Value::as_str)
            .map(String::from);
        match state
            .running
            .as_mut()
            .filter(|_| !faults.steer_running_unseen)
        {
            Some(running) if faults.steer_dropped => {
                // Misbehaving: the steer is said to be queued, and never given to the model.
                Ok(json!({ "queued": running.steers.len() + 1 }))
            }
            Some(running) => {
                running.steers.push((text.to_string(), message_id));
                Ok(json!({ "queued": running.steers.len() }))
            }
            None if faults.steer_idle_accepted => Ok(json!({ "queued": 0 })),
            None if faults.steer_idle_internal_error => {
                // Misbehaving: refused as an internal error, not with -32602.
                Err(RpcError::new(
                    -32603,
                    "nothing runs in this session: send it as a prompt",
                ))
            }
            None => Err(refuse("nothing runs in this session: send it as a prompt")),
        }
    }

    /// `session/cancel`: stops the running turn (a notification: nothing to answer).
    pub async fn cancel(&self, live: &Live) {
        let faults = &self.faults.controls;
        if faults.cancel_ignored {
            return;
        }
        let mut state = live.state.lock().await;
        match &state.running {
            Some(running) => running.cancel(),
            // Misbehaving: a cancel that came while nothing ran is kept for the next turn.
            None if faults.idle_cancel_kept => state.cancel_kept = true,
            // Misbehaving: a cancel that came while nothing ran refuses the next prompt.
            None if faults.idle_cancel_refuses_next => state.refuse_next = true,
            None => {}
        }
    }
}
