//! The self-test's stand-in for what a real CLI's test does by hand: the limits edited and a
//! session shared, typed in and let go at the terminal, each on a timer from the start.

use std::sync::Arc;

use crate::actions::DeviceActor;

use super::options::{Options, TERMINAL_PROMPT};

/// The self-test's stand-in for what a real CLI's test does by hand, on timers from the start:
/// edit the limits; share a session at the terminal, type in it, let it go.
pub(crate) fn play_on_timers(actor: &Arc<DeviceActor>, options: &Options) {
    if let Some(after) = options.change_limits_after {
        let actor = actor.clone();
        tokio::spawn(async move {
            tokio::time::sleep(after).await;
            if let Err(e) = actor.change_limits(true, None) {
                tracing::warn!("cannot change the limits: {e}");
            }
        });
    }
    let terminal = options.terminal.clone();
    let Some(share_after) = terminal.share_after else {
        return;
    };
    let actor = actor.clone();
    tokio::spawn(async move {
        tokio::time::sleep(share_after).await;
        if actor.share_session().await.is_err() {
            return;
        }
        if let Some(prompt_after) = terminal.prompt_after {
            let actor = actor.clone();
            tokio::spawn(async move {
                tokio::time::sleep(prompt_after).await;
                if let Err(e) = actor.terminal_prompt(TERMINAL_PROMPT).await {
                    tracing::warn!("the terminal's prompt: {e}");
                }
            });
        }
        if let Some(leave_after) = terminal.leave_after {
            tokio::time::sleep(leave_after).await;
            let _ = actor.leave_session().await;
        }
    });
}
