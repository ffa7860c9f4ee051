//! The end of a turn: the next queued turn starts running, the prompt's answer is made (its
//! stop reason, its turn id, the steers it never took, what a command did), the turn goes into
//! the history, its answer is kept for a repeated turn id, and every prompt waiting on it hears.

use serde_json::{Map, Value, json};

use super::Turns;
use super::model_agent::TurnRecord;
use super::turn::{Ended, Underway};
use crate::answers::fresh_id;
use crate::open_session::{Job, OpenSession, State};
use crate::store::{StoredMessage, TurnState};

impl Turns<'_> {
    /// Ends the turn: the next one runs, the answer is kept and given to the prompts waiting.
    pub(super) async fn finish(
        &self,
        live: &OpenSession,
        job: &Job,
        turn: &Underway,
        ended: Ended,
    ) {
        let mut state = live.state.lock().await;
        // The turn may have written a command file or made a skill.
        if let Some(client) = &turn.client {
            self.registry
                .commands_changed(&turn.session_id, &state.stored.cwd, client);
        }
        let finished = state.running.take();
        // The next turn is running from the moment this one ends, so a status in between
        // never sees an idle session with turns waiting.
        if let Some(next) = state.queued.first().cloned() {
            state.mark_running(&next);
        }
        let unsent: Vec<String> = finished
            .map(|r| r.steers.into_iter().map(|(t, _)| t).collect())
            .unwrap_or_default();
        let Ended {
            extra,
            reply,
            stop,
            record,
            action,
        } = ended;
        let answer = self.answer(job, stop, unsent, extra);
        // An action leaves nothing in the conversation; a prompt command is kept as typed.
        if !action {
            self.keep_in_history(&mut state, job, reply, record);
        }
        state
            .turns
            .set(&job.turn_id, TurnState::Done, Some(answer.clone()));
        self.registry.save(&state);
        let waiters = state.waiters.remove(&job.turn_id).unwrap_or_default();
        if state.deleted && self.faults.answer.deleted_unanswered {
            // Misbehaving: the deleted session's stopped turn leaves its prompt unanswered.
            std::mem::forget(waiters);
            return;
        }
        for waiter in waiters {
            let _ = waiter.send(answer.clone());
        }
    }

    /// The prompt's answer: its stop reason and `_meta.lembas` (the turn id, the steers never
    /// taken in, what a command did).
    fn answer(
        &self,
        job: &Job,
        stop: &'static str,
        unsent: Vec<String>,
        extra: Map<String, Value>,
    ) -> Value {
        let faults = &self.faults.answer;
        let mut lembas = json!({ "turnId": job.turn_id });
        if job.made_id && faults.made_id_other {
            // Misbehaving: the answer names another made id than the turn's events did.
            lembas = json!({ "turnId": fresh_id("turn_") });
        }
        if job.made_id && faults.made_id_absent {
            // Misbehaving: the answer to a prompt without a turnId names no turn at all.
            lembas = json!({});
        }
        if faults.turn_id_absent {
            lembas = json!({});
        }
        if !unsent.is_empty() && self.registry.has("steer") {
            lembas["unsent"] = json!(unsent);
        }
        if let Some(fields) = lembas.as_object_mut() {
            fields.extend(extra);
        }
        let said_stop = if faults.stop_reason_unknown {
            "done" // Misbehaving: a stop reason the spec does not have.
        } else if stop == "cancelled" && faults.cancelled_as_end_turn {
            "end_turn" // Misbehaving: a cancelled turn said to have ended by itself.
        } else {
            stop
        };
        let mut answer = json!({ "stopReason": said_stop, "_meta": { "lembas": lembas } });
        // Misbehaving: no stop reason at all.
        if faults.stop_reason_absent
            && let Some(fields) = answer.as_object_mut()
        {
            fields.remove("stopReason");
        }
        answer
    }

    /// The turn's prompt and reply go into the conversation.
    fn keep_in_history(&self, state: &mut State, job: &Job, reply: String, record: TurnRecord) {
        let faults = &self.faults.answer;
        // Misbehaving: the user's text is kept with what its attachments added.
        let typed = if faults.history_with_attached {
            job.text.clone()
        } else if !job.attachments.is_empty() && faults.history_no_typed {
            // Misbehaving: what the person typed with attachments is not kept, only them.
            String::new()
        } else {
            job.typed.clone()
        };
        let turn_id = job.turn_id.clone();
        state.stored.messages.push(StoredMessage {
            role: "user".into(),
            text: typed,
            turn_id: turn_id.clone(),
            reasoning: String::new(),
            reverted: false,
            tools: Vec::new(),
            attachments: job.attachments.clone(),
        });
        state.stored.messages.push(StoredMessage {
            role: "assistant".into(),
            text: reply,
            turn_id,
            reasoning: record.reasoning,
            reverted: false,
            tools: record.tools,
            attachments: Vec::new(),
        });
    }
}
