//! One queued turn from start to end, as the session's worker runs it: it is marked running,
//! its `prompt` and `task` events are said, a command that is an action acts
//! ([`super::actions`]), and otherwise a script, the model ([`super::model_agent`]) or the echo
//! agent ([`super::echo`]) answers; then the turn is finished ([`super::finish`]).

use serde_json::{Value, json};
use tokio::sync::watch;

use super::Turns;
use super::model_agent::TurnRecord;
use super::turn::Underway;
use crate::command_set::Slash;
use crate::open_session::{Job, OpenSession};
use crate::scripted_turn::Scripted;

impl Turns<'_> {
    /// Runs one turn, reporting to the session's client.
    pub(super) async fn run(&self, live: &OpenSession, job: Job) {
        let Some((mut cancelled, turn)) = self.begin(live, &job).await else {
            return;
        };
        turn.say(self.prompt_event(&job));
        turn.say(self.task_event(&job, &turn.session_id, "start"));
        if self.faults.events.start_twice {
            // Misbehaving: the turn's start is said twice.
            turn.say(self.task_event(&job, &turn.session_id, "start"));
        }
        let mut extra = self.command_named(&job);
        let action = self.act(live, &job, &turn, &mut extra).await;
        let mut record = TurnRecord::default();
        let (reply, stop) = self
            .agent_reply(live, &job, &turn, action, &mut cancelled, &mut record)
            .await;
        turn.say(self.task_event(&job, &turn.session_id, "end"));
        if self.faults.events.end_twice {
            // Misbehaving: the turn's end is said twice.
            turn.say(self.task_event(&job, &turn.session_id, "end"));
        }
        turn.say(json!({ "type": "done", "stopReason": stop }));
        let ended = super::turn::Ended {
            extra,
            reply,
            stop,
            record,
            action,
        };
        self.finish(live, &job, &turn, ended).await;
    }

    /// Marks the turn running (and cancelled, when a cancel was kept for it); `None` when the
    /// session was deleted, or nothing runs.
    async fn begin(
        &self,
        live: &OpenSession,
        job: &Job,
    ) -> Option<(watch::Receiver<bool>, Underway)> {
        let mut state = live.state.lock().await;
        // A deleted session runs nothing more (its waiting turns were answered).
        if state.deleted {
            return None;
        }
        if state
            .running
            .as_ref()
            .is_none_or(|r| r.turn_id != job.turn_id)
        {
            state.mark_running(&job.turn_id);
        }
        if std::mem::take(&mut state.cancel_kept)
            && let Some(running) = &state.running
        {
            running.cancel();
        }
        let cancelled = state.running.as_ref().map(|r| r.cancelled());
        self.registry.save(&state);
        let turn = Underway {
            client: state.client.clone(),
            session_id: state.stored.id.clone(),
            project: state.stored.cwd.clone(),
        };
        Some((cancelled?, turn))
    }

    /// The `prompt` event: the prompt as typed (misbehaving, a command's expanded text), with
    /// its attachments.
    fn prompt_event(&self, job: &Job) -> Value {
        let faults = &self.faults.events;
        let both;
        let shown = match &job.command {
            Some(Slash::Prompt { .. }) if faults.prompt_expanded => &job.text,
            // Misbehaving: the text as typed, followed by the command's expanded body.
            Some(Slash::Prompt { .. }) if faults.prompt_typed_and_expanded => {
                both = format!("{}\n{}", job.typed, job.text);
                &both
            }
            // Misbehaving: a command turn shown as nothing at all.
            Some(Slash::Prompt { .. }) if faults.prompt_empty => "",
            _ => &job.typed,
        };
        let mut prompt_event = json!({ "type": "prompt", "text": shown, "turnId": job.turn_id });
        if !job.attachments.is_empty() && !faults.attachments_unlisted {
            prompt_event["attachments"] = json!(job.attachments);
        }
        prompt_event
    }

    /// A `task` event of the turn in `state` (`start` or `end`).
    fn task_event(&self, job: &Job, session_id: &str, state: &str) -> Value {
        let faults = &self.faults.events;
        if faults.terminal_task_unnamed && self.registry.is_terminal_session(session_id) {
            json!({ "type": "task", "state": state })
        } else if faults.terminal_task_other_id && self.registry.is_terminal_session(session_id) {
            // Misbehaving: the task events carry another made id than the prompt event.
            json!({ "type": "task", "state": state, "turnId": format!("{}-task", job.turn_id) })
        } else if !job.made_id && faults.task_other_turn_id {
            // Misbehaving: the task events carry another turn id than the client's.
            json!({ "type": "task", "state": state, "turnId": format!("{}-run", job.turn_id) })
        } else {
            json!({ "type": "task", "state": state, "turnId": job.turn_id })
        }
    }

    /// What the answer's `_meta.lembas` says of the command the prompt is: its name.
    fn command_named(&self, job: &Job) -> serde_json::Map<String, Value> {
        let faults = &self.faults.events;
        let mut extra = serde_json::Map::new();
        if let Some(command) = &job.command {
            // Misbehaving: a prompt command's answer does not name it.
            let unnamed = matches!(command, Slash::Prompt { .. }) && faults.command_unnamed;
            if !unnamed {
                extra.insert("command".into(), json!(command.name()));
            }
        } else if faults.plain_named {
            // Misbehaving: a plain prompt is named as a command, by its first word.
            let word = job.typed.split_whitespace().next().unwrap_or("prompt");
            extra.insert("command".into(), json!(word));
        }
        extra
    }

    /// The agent's reply and stop reason: nothing for an action, else a script the text
    /// matches, the model, or the echo agent.
    async fn agent_reply(
        &self,
        live: &OpenSession,
        job: &Job,
        turn: &Underway,
        action: bool,
        cancelled: &mut watch::Receiver<bool>,
        record: &mut TurnRecord,
    ) -> (String, &'static str) {
        let client = turn.client.as_ref();
        let session_id = turn.session_id.as_str();
        let script = self
            .registry
            .config
            .scripts
            .iter()
            .find(|s| s.answers(&job.text));
        match (script, &self.registry.config.model) {
            // An action sends nothing to the model.
            _ if action => (String::new(), "end_turn"),
            (Some(script), _) => {
                Scripted::new(self.registry)
                    .turn(live, script, client, session_id, cancelled)
                    .await
            }
            (None, Some(model)) => {
                let asking = super::model_agent::Asking {
                    live,
                    model,
                    job,
                    client,
                    session_id,
                };
                self.model_turn(asking, cancelled, record).await
            }
            (None, None) => {
                self.echo_turn(live, client, session_id, &job.text, cancelled)
                    .await
            }
        }
    }
}
