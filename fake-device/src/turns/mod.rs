//! Turns: a prompt runs once per turn id, one at a time per session, in arrival order; a
//! repeated turn id gets the first run's answer; a turn stops when cancelled and takes in the
//! steer messages left for it at its next step. The default agent echoes the prompt back
//! in a few pieces.
//!
//! A prompt is read ([`intake`]) and admitted ([`admission`]) on the link, in its order; the
//! session's [`worker`] then runs its turns one by one ([`run`]): an action ([`actions`]), or a
//! script, the model ([`model_agent`]) or the echo agent ([`echo`]), then its end ([`finish`]).
//! [`history`] holds the conversation steps that actions share with the methods' rooms. What a
//! misbehaving device gets wrong in a turn is resolved once into [`Faults`]; steer, cancel,
//! rewind and compact, which reach a session's turns from outside, have rooms of their own in
//! [`crate::methods`].

use std::sync::Weak;
use std::time::Duration;

use tokio::time::Instant;

use crate::open_session::{JobQueue, OpenSession};
use crate::registry::Registry;

mod actions;
mod admission;
mod echo;
mod faults;
mod finish;
mod history;
mod intake;
mod model_agent;
mod run;
mod turn;

pub use faults::Faults;

/// The turns of the device's sessions, over its registry, with the faults it was started with.
#[derive(Debug, Clone, Copy)]
pub struct Turns<'r> {
    registry: &'r Registry,
    faults: &'r Faults,
}

impl<'r> Turns<'r> {
    /// Turns over `registry`, misbehaving as `faults` say.
    pub fn new(registry: &'r Registry, faults: &'r Faults) -> Turns<'r> {
        Turns { registry, faults }
    }
}

/// A session's turn worker: one turn at a time, in order, until the session goes.
pub async fn worker(
    registry: Weak<Registry>,
    live: Weak<OpenSession>,
    mut queue: JobQueue,
    faults: Faults,
) {
    if faults.intake.quick_alongside {
        return worker_alongside(registry, live, queue, faults).await;
    }
    while let Some(job) = queue.recv().await {
        let (Some(registry), Some(live)) = (registry.upgrade(), live.upgrade()) else {
            return;
        };
        Turns::new(&registry, &faults).run(&live, job).await;
    }
}

/// How soon after the turn before it a prompt must come for a device breaking
/// `device.prompt.queued` in its way `alongside` to run it beside that turn.
pub const ALONGSIDE_WINDOW: Duration = Duration::from_millis(50);

/// Misbehaving: the worker of a device that runs a prompt coming within [`ALONGSIDE_WINDOW`] of
/// the turn before it beside that turn (as a device whose queue is a lock taken a little late
/// does); a prompt that comes later waits its turn.
async fn worker_alongside(
    registry: Weak<Registry>,
    live: Weak<OpenSession>,
    mut queue: JobQueue,
    faults: Faults,
) {
    let mut running = tokio::task::JoinSet::new();
    let mut last_began: Option<Instant> = None;
    while let Some(job) = queue.recv().await {
        let (Some(registry), Some(live)) = (registry.upgrade(), live.upgrade()) else {
            return;
        };
        if last_began.is_none_or(|began| began.elapsed() >= ALONGSIDE_WINDOW) {
            while running.join_next().await.is_some() {}
        }
        last_began = Some(Instant::now());
        running.spawn(async move { Turns::new(&registry, &faults).run(&live, job).await });
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::echo::pieces;
    use super::intake::{MAX_KEPT_CONTEXT_BYTES, MAX_TURN_ID_BYTES, check_kept_sizes};

    #[test]
    fn the_echo_comes_back_in_at_most_three_pieces() {
        assert_eq!(
            pieces("one two three four five").concat(),
            "one two three four five"
        );
        assert!(pieces("one two three four five").len() <= 3);
        assert_eq!(pieces(""), vec![String::new()]);
    }

    #[test]
    fn a_turn_id_or_context_past_what_the_store_keeps_is_refused_with_32602() {
        let prompt =
            |lembas: Value| json!({"sessionId": "s", "prompt": [], "_meta": {"lembas": lembas}});
        let long_id = "t".repeat(MAX_TURN_ID_BYTES + 1);
        let refused =
            check_kept_sizes(&prompt(json!({"turnId": long_id})), true, true).expect_err("refused");
        assert_eq!(refused.code, harness::jsonrpc::INVALID_PARAMS);
        assert!(refused.message.contains("turnId"), "{}", refused.message);
        // Not kept, not judged: a device without `turns` ignores the id.
        assert!(check_kept_sizes(&prompt(json!({"turnId": long_id})), false, true).is_ok());
        let fits = "t".repeat(MAX_TURN_ID_BYTES);
        assert!(check_kept_sizes(&prompt(json!({"turnId": fits})), true, true).is_ok());
        let big = json!({"system_prompt": "x".repeat(MAX_KEPT_CONTEXT_BYTES)});
        assert!(check_kept_sizes(&prompt(big.clone()), true, true).is_err());
        assert!(check_kept_sizes(&prompt(big), true, false).is_ok());
    }
}
