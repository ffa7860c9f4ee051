//! Commands that act on the session instead of (or before) reaching an agent: `/compact`,
//! `/undo`, `/review` with nothing to review, `/plan` alone (plan mode), and a command's own
//! mode. What each did goes into the answer's `_meta.lembas`.

use serde_json::{Map, Value, json};

use super::Turns;
use super::turn::Underway;
use crate::command_set::Slash;
use crate::open_session::{Job, OpenSession};
use crate::registry::ModeReport;

/// Whether a command is `/plan` with nothing after it.
fn plan_mode_only(command: Option<&Slash>) -> bool {
    matches!(command, Some(Slash::PlanMode))
}

/// Whether a command is `/plan <task>`.
fn is_plan_task(command: Option<&Slash>) -> bool {
    matches!(command, Some(Slash::Prompt { name, .. }) if name == "plan")
}

impl Turns<'_> {
    /// Acts on the turn's command; `true` when it was an action, so nothing goes to the agent.
    /// What it did goes into `extra`.
    pub(super) async fn act(
        &self,
        live: &OpenSession,
        job: &Job,
        turn: &Underway,
        extra: &mut Map<String, Value>,
    ) -> bool {
        let faults = &self.faults.commands;
        let client = turn.client.as_ref();
        match &job.command {
            Some(Slash::Compact) => {
                let summary = self.summary(live).await;
                turn.say(json!({ "type": "compacted", "summary": summary }));
                extra.insert("summary".into(), json!(summary));
                true
            }
            Some(Slash::Undo) => self.undo(live, extra).await,
            Some(Slash::Prompt { name, .. })
                if name == "review" && !crate::review::has_changes(&turn.project) =>
            {
                self.nothing_to_review(extra);
                true
            }
            Some(Slash::PlanMode) if faults.plan_mode_unreported => {
                // Misbehaving: the mode changes, and no `current_mode_update` says so.
                self.registry
                    .put_mode(live, "plan", client, ModeReport::EventOnly)
                    .await;
                extra.insert("mode".into(), json!("plan"));
                true
            }
            Some(Slash::PlanMode) if faults.plan_mode_old_reported => {
                self.plan_mode_told_old(live, turn).await;
                extra.insert("mode".into(), json!("plan"));
                true
            }
            // `/plan` alone: plan mode. Misbehaving: `/plan <task>` taken for it, the task
            // dropped.
            Some(Slash::PlanMode) | Some(Slash::Prompt { .. })
                if plan_mode_only(job.command.as_ref())
                    || (is_plan_task(job.command.as_ref()) && faults.plan_task_dropped) =>
            {
                let mode = self.registry.change_mode(live, "plan", client).await;
                extra.insert("mode".into(), json!(mode));
                true
            }
            // Misbehaving: a built-in prompt command runs as an action, sending nothing.
            Some(Slash::Prompt { name, .. })
                if crate::command_set::is_builtin(name) && faults.builtin_sends_nothing =>
            {
                true
            }
            // Misbehaving: a `/name` outside the command set is swallowed, as if an action.
            None if job.typed.starts_with('/') && faults.unknown_swallowed => true,
            // Misbehaving: `/plan <task>` runs the task in the mode the session was in.
            Some(Slash::Prompt { name, .. }) if name == "plan" && faults.plan_task_in_mode => false,
            // Misbehaving: a command's mode is lowered past `max_mode`, to plan.
            Some(Slash::Prompt { mode: Some(_), .. }) if faults.mode_too_low => {
                self.registry
                    .put_mode(live, "plan", client, ModeReport::Both)
                    .await;
                false
            }
            // Misbehaving: a command's mode is put as it is, above `max_mode` or not.
            Some(Slash::Prompt {
                mode: Some(mode), ..
            }) if faults.mode_unlowered => {
                self.registry
                    .put_mode(live, mode, client, ModeReport::Both)
                    .await;
                false
            }
            Some(Slash::Prompt {
                mode: Some(mode), ..
            }) => {
                self.registry.change_mode(live, mode, client).await;
                false
            }
            _ => false,
        }
    }

    /// `/undo`: the last turn leaves the conversation, and the answer says which prompt it was;
    /// `true` unless (misbehaving) nothing to undo goes on to the model.
    async fn undo(&self, live: &OpenSession, extra: &mut Map<String, Value>) -> bool {
        let faults = &self.faults.commands;
        let undone = self.undo_last(live).await;
        let to_model = undone.is_none() && faults.undo_nothing_to_model;
        // Misbehaving: nothing to undo is told as an empty turn undone.
        let nothing = match faults.undo_nothing_as_empty {
            true => json!({ "prompt": "", "files": [] }),
            false => Value::Null,
        };
        extra.insert(
            "undone".into(),
            undone.map_or(nothing, |prompt| json!({ "prompt": prompt, "files": [] })),
        );
        // Misbehaving: with nothing to undo, `/undo` goes on to the model.
        !to_model
    }

    /// Nothing to review: said instead, and nothing goes to the model.
    fn nothing_to_review(&self, extra: &mut Map<String, Value>) {
        let faults = &self.faults.commands;
        if faults.nothing_message_flag {
            // Misbehaving: a flag in place of the sentence.
            extra.insert("message".into(), json!(true));
        } else if !faults.nothing_message_omitted {
            extra.insert("message".into(), json!(crate::review::NOTHING));
        }
    }

    /// Misbehaving: `/plan` puts plan mode, and the `current_mode_update` names the mode the
    /// session was in.
    async fn plan_mode_told_old(&self, live: &OpenSession, turn: &Underway) {
        let client = turn.client.as_ref();
        let (id, before) = {
            let state = live.state.lock().await;
            (state.stored.id.clone(), state.stored.mode.clone())
        };
        self.registry
            .put_mode(live, "plan", client, ModeReport::EventOnly)
            .await;
        if let Some(client) = client {
            client.update(
                &id,
                json!({ "sessionUpdate": "current_mode_update", "currentModeId": before }),
            );
        }
    }
}
