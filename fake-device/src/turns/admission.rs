//! Admitting a read prompt, under the session's lock and in the link's order: a turn id the
//! session knows is not run again (a finished turn gets the first run's answer, a running or
//! queued one is waited for); a new one is queued behind the turns before it and handed to the
//! session's worker.

use harness::jsonrpc::RpcError;
use serde_json::{Value, json};
use tokio::sync::oneshot;

use super::Turns;
use super::intake::{Admitting, ReadPrompt};
use crate::answers::{Reply, refuse};
use crate::open_session::{Job, OpenSession, State};
use crate::store::{StoredTurn, TurnState};

impl Turns<'_> {
    /// Reads the prompt's `Context` into the session and admits its turn: `Some` when the
    /// prompt is answered now, `None` when `waiter` will hear the answer.
    pub(super) async fn admit(
        &self,
        live: &OpenSession,
        admitting: Admitting<'_>,
        read: ReadPrompt,
        waiter: oneshot::Sender<Value>,
    ) -> Result<Option<Reply>, RpcError> {
        let faults = &self.faults.intake;
        let turn_id = admitting.turn_id;
        let mut state = live.state.lock().await;
        if std::mem::take(&mut state.refuse_next) {
            return Err(refuse("the session was cancelled"));
        }
        // Newer `Context` replaces older, on every prompt.
        if !faults.context_unread {
            self.registry.read_context(admitting.meta, &mut state);
        }
        self.registry.report_to(&mut state, admitting.client);
        state.stored.given = true;
        match self.known_turn(&state, turn_id) {
            Some(turn) if turn.state == TurnState::Done && faults.done_turn_refused => {
                // Misbehaving: a finished turn sent again is refused, not given its answer.
                Err(refuse(format!("turn `{turn_id}` has already run")))
            }
            Some(turn) if turn.state == TurnState::Done => {
                // A known turn does not run again: it gets the first run's answer.
                match turn.answer {
                    Some(answer) => Ok(Some(Reply::Now(Ok(answer)))),
                    None => Err(refuse(format!(
                        "turn `{turn_id}` finished without an answer"
                    ))),
                }
            }
            Some(_) => {
                state
                    .waiters
                    .entry(turn_id.to_string())
                    .or_default()
                    .push(waiter);
                Ok(None)
            }
            None if state.running.is_some() && faults.busy_refused => {
                // Misbehaving: a prompt that comes while a turn runs is refused.
                Err(refuse("the session is working"))
            }
            None if state.running.is_some() && faults.busy_answered_unrun => {
                // Misbehaving: a prompt that comes while a turn runs is answered at once, and
                // never runs.
                Ok(Some(Reply::Now(Ok(json!({
                    "stopReason": "end_turn",
                    "_meta": { "lembas": { "turnId": turn_id } }
                })))))
            }
            None => {
                self.enqueue(live, &mut state, &admitting, read, waiter)?;
                Ok(None)
            }
        }
    }

    /// The session's turn with this id, when the device de-duplicates it.
    fn known_turn(&self, state: &State, turn_id: &str) -> Option<StoredTurn> {
        let faults = &self.faults.intake;
        state
            .turns
            .get(turn_id)
            .cloned()
            .filter(|_| !faults.no_dedup)
            // Misbehaving: a turn still running, sent again, runs once more after it.
            .filter(|turn| turn.state == TurnState::Done || !faults.running_turn_runs_twice)
    }

    /// A new turn: its attachments written, it runs at once in an idle session or waits its
    /// turn, and goes to the session's worker.
    fn enqueue(
        &self,
        live: &OpenSession,
        state: &mut State,
        admitting: &Admitting<'_>,
        read: ReadPrompt,
        waiter: oneshot::Sender<Value>,
    ) -> Result<(), RpcError> {
        let turn_id = admitting.turn_id.to_string();
        // Only a new turn keeps its attachments.
        let ReadPrompt {
            dir,
            prepared,
            typed,
        } = read;
        let written = prepared.write(dir.as_deref()).map_err(refuse)?;
        // A prompt to an idle session runs at once; otherwise it waits its turn.
        state.turns.set(&turn_id, TurnState::Queued, None);
        if state.running.is_none() && state.queued.is_empty() {
            state.mark_running(&turn_id);
        } else {
            state.queued.push(turn_id.clone());
        }
        state
            .waiters
            .entry(turn_id.clone())
            .or_default()
            .push(waiter);
        self.registry.save(state);
        let command = self.command_of(&typed);
        let mut given_text = self.agent_text(state, &typed, command.as_ref());
        given_text.push_str(&written.attached_text);
        let job = Job {
            turn_id,
            text: given_text,
            typed: typed.text,
            command,
            attachments: written
                .attachments
                .iter()
                .map(crate::attachments::Attachment::to_value)
                .collect(),
            made_id: admitting.made_id,
        };
        if live.jobs.send(job).is_err() {
            return Err(refuse("the session is closing"));
        }
        Ok(())
    }
}
