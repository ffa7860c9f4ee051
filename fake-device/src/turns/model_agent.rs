//! The model agent (`--agent model`): a turn the instance's chat-completions model drives. Each
//! step asks the model with the conversation so far, says its text, and runs the tools it calls
//! with the cards they need, until it calls none (or [`MAX_STEPS`] calls were made).

use serde_json::{Value, json};
use tokio::sync::watch;

use super::Turns;
use crate::cards::Cards;
use crate::command_set::Slash;
use crate::completion::Completion;
use crate::events::Client;
use crate::instance_model::ModelClient;
use crate::open_session::{Job, OpenSession, State};

/// The most model calls one turn makes: a model that keeps calling tools is stopped there, and
/// the turn ends with `max_turn_requests`.
pub const MAX_STEPS: usize = 8;

/// What a model's turn leaves in the history besides its text: the model's reasoning and the
/// tool calls it ran (spec, `_lembas/session/history`).
#[derive(Debug, Default)]
pub(super) struct TurnRecord {
    /// The reasoning of every step, in order.
    pub reasoning: String,
    /// `{id, name, args, output, isError}` of each tool call.
    pub tools: Vec<Value>,
}

/// One model turn's context: the session, the model it asks, the turn, and who hears it.
pub(super) struct Asking<'a> {
    /// The session the turn runs in.
    pub live: &'a OpenSession,
    /// The instance's model.
    pub model: &'a ModelClient,
    /// The turn.
    pub job: &'a Job,
    /// The session's client, if one is there.
    pub client: Option<&'a Client>,
    /// The session's id.
    pub session_id: &'a str,
}

impl Turns<'_> {
    /// A turn the instance's model drives: each step asks the model, says its text, and runs its
    /// tool calls with the cards they need, until it calls no tool (at most [`MAX_STEPS`]).
    /// What the history keeps besides the text (reasoning, tools) goes to `record`.
    pub(super) async fn model_turn(
        &self,
        asking: Asking<'_>,
        cancelled: &mut watch::Receiver<bool>,
        record: &mut TurnRecord,
    ) -> (String, &'static str) {
        let Asking {
            live,
            model,
            job,
            client,
            session_id,
        } = asking;
        // The account's personalization stands in for the device's own (spec, HTTP API).
        let personal = self.registry.config.account.personal_prompt().await;
        let command_model = self.command_model(job);
        let (model_id, mut messages) = self
            .conversation(live, command_model.as_ref(), client, personal.as_deref())
            .await;
        messages.push(json!({ "role": "user", "content": job.text }));
        let model_id = match model_id {
            Some(id) => id,
            None => match model.first_chat_model().await {
                Ok(id) => id,
                Err(e) => return self.model_failed(client, session_id, &e),
            },
        };
        let mut reply = String::new();
        for step in 0..MAX_STEPS {
            // Steer messages reach the model at its next step (spec, `_lembas/steer`).
            if step > 0 {
                for text in live.take_steers(client, session_id).await {
                    messages.push(json!({ "role": "user", "content": text }));
                }
            }
            // A cancel stops the turn while the model thinks, too.
            let tools = crate::instance_model::tools();
            let asked = model.complete(&model_id, &messages, &tools);
            let completion = tokio::select! {
                answer = asked => match answer {
                    Ok(c) => c,
                    Err(e) => return self.model_failed(client, session_id, &e),
                },
                _ = cancelled.wait_for(|c| *c) => return (reply, "cancelled"),
            };
            tell_usage_and_reasoning(client, session_id, &completion, record);
            let (said, was_cancelled) = self
                .speak(live, client, session_id, &completion.text, false, cancelled)
                .await;
            reply.push_str(&said);
            if was_cancelled {
                return (reply, "cancelled");
            }
            if completion.tool_calls.is_empty() {
                return (reply, "end_turn");
            }
            if self
                .run_tool_calls(client, session_id, &completion, &mut messages, record)
                .await
            {
                return (reply, "end_turn");
            }
        }
        (reply, "max_turn_requests")
    }

    /// The model a command names for its own prompt, when it names one.
    fn command_model(&self, job: &Job) -> Option<String> {
        // A command's own model holds for its prompt only (spec, `session/prompt`): the
        // session's stays as it was.
        match &job.command {
            Some(Slash::Prompt {
                model: Some(model), ..
            }) if !self.faults.model.command_model_ignored => Some(model.clone()),
            // Misbehaving (`ignored`): the command's model is not used for its prompt.
            _ => None,
        }
    }

    /// The model the turn asks (`None`: the instance's first chat model) and the conversation
    /// so far, the device's system text first.
    async fn conversation(
        &self,
        live: &OpenSession,
        command_model: Option<&String>,
        client: Option<&Client>,
        personal: Option<&str>,
    ) -> (Option<String>, Vec<Value>) {
        let mut state = live.state.lock().await;
        if let Some(model) = command_model
            && self.faults.model.command_model_kept
        {
            // Misbehaving: the command's model stays the session's.
            state.stored.model = Some(model.clone());
        }
        let running_on = command_model.or(state.stored.model.as_ref());
        // Requests go to the instance's `/v1` with the served id, not the device's ref
        // (spec, how the device names an instance's models).
        let keeps_ref = self.faults.model.model_ref_sent;
        let model_id = running_on.map(|m| {
            if keeps_ref {
                m.to_string()
            } else {
                crate::model_ref::served_id(&self.registry.config.connection, m)
                    .unwrap_or(m)
                    .to_string()
            }
        });
        let system = self.system_text(&state, client, personal);
        let mut messages = vec![json!({ "role": "system", "content": system })];
        for m in state.stored.messages.iter().filter(|m| !m.reverted) {
            messages.push(json!({ "role": m.role, "content": m.text }));
        }
        (model_id, messages)
    }

    /// The device composes its own prompt, with the pieces of the client's `Context` (spec,
    /// `session/new`).
    fn system_text(
        &self,
        state: &State,
        client: Option<&Client>,
        personal: Option<&str>,
    ) -> String {
        let nobody_to_ask =
            client.is_some_and(|client| !Cards::new(self.registry).may_ask(client, "ask"));
        crate::system_prompt::Composing {
            context: &state.stored.context,
            instance: &self.registry.config.connection,
            own_personal: personal,
            nobody_to_ask,
            misreads: self.faults.model.system,
        }
        .text()
    }

    /// Runs the tool calls of one step, telling the model each outcome; `true` when the turn
    /// stops there (a question nobody answers, a plan nobody can approve).
    async fn run_tool_calls(
        &self,
        client: Option<&Client>,
        session_id: &str,
        completion: &Completion,
        messages: &mut Vec<Value>,
        record: &mut TurnRecord,
    ) -> bool {
        let calls: Vec<Value> = completion
            .tool_calls
            .iter()
            .map(|c| json!({ "id": c.id, "type": "function", "function": { "name": c.name, "arguments": c.arguments.to_string() } }))
            .collect();
        messages
            .push(json!({ "role": "assistant", "content": completion.text, "tool_calls": calls }));
        let mut plan_kept = false;
        for call in &completion.tool_calls {
            let outcome = Cards::new(self.registry)
                .tool_step(client, session_id, call)
                .await;
            // History lists each call with its output, and whether it failed.
            record.tools.push(json!({ "id": call.id, "name": call.name, "args": call.arguments, "output": outcome.text, "isError": !outcome.ran }));
            messages
                .push(json!({ "role": "tool", "tool_call_id": call.id, "content": outcome.text }));
            // Misbehaving: a question ends the turn, the model told nothing.
            if outcome.text == crate::methods::question::TURN_STOPS {
                return true;
            }
            plan_kept |= call.name == "plan_submit"
                && client.is_some_and(|c| !Cards::new(self.registry).may_ask(c, "plan"));
        }
        // Nobody to approve a plan (an editor, a protocol-1 client): it is kept, and the turn
        // stops there (spec, serve --stdio).
        plan_kept
    }

    /// A model call that failed: the client hears why, and the turn ends with nothing said.
    fn model_failed(
        &self,
        client: Option<&Client>,
        session_id: &str,
        why: &str,
    ) -> (String, &'static str) {
        tracing::warn!("the model failed: {why}");
        if let Some(client) = client {
            client.event(session_id, json!({ "type": "error", "message": why }));
        }
        (String::new(), "end_turn")
    }
}

/// What the provider counted goes to the client as a `usage` event, as it came; the step's
/// reasoning goes to the history and to the client.
fn tell_usage_and_reasoning(
    client: Option<&Client>,
    session_id: &str,
    completion: &Completion,
    record: &mut TurnRecord,
) {
    if let (Some(Value::Object(usage)), Some(client)) = (&completion.usage, client) {
        let mut event = serde_json::Map::new();
        event.insert("type".into(), json!("usage"));
        event.extend(usage.iter().map(|(k, v)| (k.clone(), v.clone())));
        client.event(session_id, Value::Object(event));
    }
    if let Some(reasoning) = &completion.reasoning {
        record.reasoning.push_str(reasoning);
    }
    if let (Some(reasoning), Some(client)) = (&completion.reasoning, client) {
        client.update(session_id, json!({ "sessionUpdate": "agent_thought_chunk", "content": { "type": "text", "text": reasoning } }));
        client.event(
            session_id,
            json!({ "type": "reasoning", "text": reasoning }),
        );
    }
}
