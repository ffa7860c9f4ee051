//! The scripted agent: a turn that does what a scenario's script says (`device.scripts`), step by
//! step, reporting each step as the CLI does — ACP's `session/update` for every client and the
//! matching `_lembas/event` for LLeMbas. Cards go through the same code as the model's tool
//! calls ([`crate::cards`]), so a script's approval, questions and plan behave as a model's do.

use std::time::Duration;

use crate::scripts::AgentScript;
use crate::scripts::{Say, ScriptStep, ScriptTool};
use serde_json::{Value, json};
use tokio::sync::watch;

use crate::answers::fresh_id;
use crate::cards::Cards;
use crate::completion::ToolCall;
use crate::events::Client;
use crate::open_session::{OpenSession, TITLE_MAX};
use crate::registry::Registry;

/// How a step of a script went on.
enum Next<'s> {
    /// Go on with the following step.
    Continue,
    /// Run these steps first (a card's `then` or `otherwise`).
    Branch(&'s [ScriptStep]),
    /// The turn ends here.
    Stop(&'static str),
}

/// The scripted agent of the device's sessions, over its registry.
#[derive(Debug, Clone, Copy)]
pub struct Scripted<'r> {
    registry: &'r Registry,
}

impl<'r> Scripted<'r> {
    /// The scripted agent over `registry`.
    pub fn new(registry: &'r Registry) -> Scripted<'r> {
        Scripted { registry }
    }

    /// Runs a script's turn; gives what was said and the stop reason.
    pub(crate) async fn turn(
        &self,
        live: &OpenSession,
        script: &AgentScript,
        client: Option<&Client>,
        session_id: &str,
        cancelled: &mut watch::Receiver<bool>,
    ) -> (String, &'static str) {
        let mut said = String::new();
        // A stack of step lists rather than recursion: a card's branch runs, then the steps
        // after the card.
        let mut stack = vec![script.steps.iter()];
        while let Some(steps) = stack.last_mut() {
            let Some(step) = steps.next() else {
                stack.pop();
                continue;
            };
            if *cancelled.borrow() {
                return (said, "cancelled");
            }
            // Steer messages are taken in at each step, as the CLI does between model calls.
            live.take_steers(client, session_id).await;
            match self
                .script_step(live, step, client, session_id, cancelled, &mut said)
                .await
            {
                Next::Continue => {}
                Next::Branch(steps) => stack.push(steps.iter()),
                Next::Stop("cancelled") => return (said, "cancelled"),
                Next::Stop(_) => return (said, script.stop.as_str()),
            }
        }
        (said, script.stop.as_str())
    }

    /// Runs one step of a script, reporting it to the client.
    async fn script_step<'s>(
        &self,
        live: &OpenSession,
        step: &'s ScriptStep,
        client: Option<&Client>,
        session_id: &str,
        cancelled: &mut watch::Receiver<bool>,
        said: &mut String,
    ) -> Next<'s> {
        let branch = |ran: bool, then: &'s [ScriptStep], otherwise: &'s [ScriptStep]| {
            Next::Branch(if ran { then } else { otherwise })
        };
        match step {
            ScriptStep::Text(say) => self.say(say, client, session_id, cancelled, said).await,
            ScriptStep::Thought(text) => {
                if let Some(client) = client {
                    client.update(session_id, json!({ "sessionUpdate": "agent_thought_chunk", "content": { "type": "text", "text": text } }));
                    client.event(session_id, json!({ "type": "reasoning", "text": text }));
                }
                Next::Continue
            }
            ScriptStep::Tool(tool) => match client {
                Some(client) => self.tool(tool, client, session_id, cancelled).await,
                None => Next::Continue,
            },
            ScriptStep::Permission(p) => {
                let arguments = json!({ "command": p.command });
                let ran = self.card(client, session_id, "bash", arguments).await;
                branch(ran, &p.then, &p.otherwise)
            }
            ScriptStep::Ask(a) => {
                let arguments = with(json!({ "questions": a.questions }), "why", &a.why);
                let ran = self.card(client, session_id, "ask_user", arguments).await;
                branch(ran, &a.then, &a.otherwise)
            }
            ScriptStep::Plan(plan) => {
                let arguments = json!({ "plan": plan });
                self.card(client, session_id, "plan_write", arguments).await;
                Next::Continue
            }
            ScriptStep::SubmitPlan(p) => {
                let arguments = with(json!({ "text": p.text }), "path", &p.path);
                let ran = self
                    .card(client, session_id, "plan_submit", arguments)
                    .await;
                branch(ran, &p.then, &p.otherwise)
            }
            ScriptStep::Title(title) => {
                self.title(live, title, client, session_id).await;
                Next::Continue
            }
            ScriptStep::Error(message) => {
                if let Some(client) = client {
                    client.event(session_id, json!({ "type": "error", "message": message }));
                }
                Next::Stop("error")
            }
            ScriptStep::Usage(fields) => {
                if let Some(client) = client {
                    client.event(session_id, usage_event(fields));
                }
                Next::Continue
            }
            ScriptStep::Wait(how_long) => match pause(how_long.0, cancelled).await {
                true => Next::Continue,
                false => Next::Stop("cancelled"),
            },
        }
    }

    /// Says a script's text, piece by piece.
    async fn say<'s>(
        &self,
        say: &Say,
        client: Option<&Client>,
        session_id: &str,
        cancelled: &mut watch::Receiver<bool>,
        said: &mut String,
    ) -> Next<'s> {
        let (chunks, delay) = match say {
            Say::Whole(text) => (std::slice::from_ref(text), None),
            Say::Chunked { chunks, delay } => (chunks.as_slice(), delay.map(|d| d.0)),
        };
        for chunk in chunks {
            if !pause(delay.unwrap_or(self.registry.config.step_delay), cancelled).await {
                return Next::Stop("cancelled");
            }
            if let Some(client) = client {
                client.text(session_id, chunk);
            }
            said.push_str(chunk);
        }
        Next::Continue
    }

    /// A tool that needs nobody's approval: its call, its progress, its end.
    async fn tool<'s>(
        &self,
        tool: &ScriptTool,
        client: &Client,
        session_id: &str,
        cancelled: &mut watch::Receiver<bool>,
    ) -> Next<'s> {
        let id = fresh_id("call_");
        let args = tool.args.clone().unwrap_or_else(|| json!({}));
        let title = tool.title.clone().unwrap_or_else(|| tool.name.clone());
        let kind = tool.kind.as_deref().unwrap_or("other");
        client.update(session_id, json!({ "sessionUpdate": "tool_call", "toolCallId": id, "title": title, "kind": kind, "status": "pending", "rawInput": args }));
        client.event(
            session_id,
            json!({ "type": "tool_start", "id": id, "name": tool.name, "args": args }),
        );
        for line in &tool.progress {
            if !pause(self.registry.config.step_delay, cancelled).await {
                return Next::Stop("cancelled");
            }
            client.update(session_id, json!({ "sessionUpdate": "tool_call_update", "toolCallId": id, "status": "in_progress", "content": [text_content(line)] }));
            client.event(
                session_id,
                json!({ "type": "progress", "id": id, "text": line }),
            );
        }
        let status = if tool.fails { "failed" } else { "completed" };
        client.update(session_id, json!({ "sessionUpdate": "tool_call_update", "toolCallId": id, "status": status, "content": [text_content(&tool.output)], "rawOutput": { "output": tool.output } }));
        client.event(session_id, json!({ "type": "tool_end", "id": id, "name": tool.name, "output": tool.output, "error": tool.fails }));
        Next::Continue
    }

    /// A tool call that goes through the model's own code ([`Cards`]), card and all; whether
    /// it ran.
    async fn card(
        &self,
        client: Option<&Client>,
        session_id: &str,
        name: &str,
        arguments: Value,
    ) -> bool {
        let call = ToolCall {
            id: fresh_id("call_"),
            name: name.into(),
            arguments,
        };
        Cards::new(self.registry)
            .tool_step(client, session_id, &call)
            .await
            .ran
    }

    /// Names the session, as far as [`TITLE_MAX`] allows.
    async fn title(
        &self,
        live: &OpenSession,
        title: &str,
        client: Option<&Client>,
        session_id: &str,
    ) {
        let title: String = title.chars().take(TITLE_MAX).collect();
        let mut state = live.state.lock().await;
        state.stored.title = title.clone();
        self.registry.save(&state);
        if let Some(client) = client {
            client.event(
                session_id,
                json!({ "type": "title", "id": session_id, "title": title }),
            );
        }
    }
}

/// `arguments` with `key` set, when the script gives it.
fn with(mut arguments: Value, key: &str, value: &Option<String>) -> Value {
    if let Some(value) = value {
        arguments[key] = json!(value);
    }
    arguments
}

/// A `usage` event with a script's fields (all but `type`).
fn usage_event(fields: &Value) -> Value {
    let mut event = json!({ "type": "usage" });
    if let (Some(event), Some(fields)) = (event.as_object_mut(), fields.as_object()) {
        for (key, value) in fields.iter().filter(|(k, _)| k.as_str() != "type") {
            event.insert(key.clone(), value.clone());
        }
    }
    event
}

/// ACP's text content of a tool call.
fn text_content(text: &str) -> Value {
    json!({ "type": "content", "content": { "type": "text", "text": text } })
}

/// Waits, unless the turn is cancelled first; false: cancelled.
async fn pause(how_long: Duration, cancelled: &mut watch::Receiver<bool>) -> bool {
    tokio::select! {
        () = tokio::time::sleep(how_long) => true,
        _ = cancelled.wait_for(|c| *c) => false,
    }
}
