//! A tool call of the model, as the client sees it: its `tool_call` update and events, and the
//! card it needs, from the room of that card's spec section — an approval before a command runs
//! ([`crate::methods::request_permission`]), questions ([`crate::methods::question`]), a plan to
//! approve ([`crate::methods::plan`]) — or the plan's update ([`crate::methods::plan_update`]).

use serde_json::json;

use crate::completion::{ToolCall, ToolOutcome};
use crate::events::Client;
use crate::methods::card::{Asker, may_ask};
use crate::methods::{plan, plan_update, question, request_permission};
use crate::registry::Registry;

/// The cards of the device's sessions, over its registry.
#[derive(Debug, Clone, Copy)]
pub struct Cards<'r> {
    registry: &'r Registry,
}

impl<'r> Cards<'r> {
    /// Cards over `registry`.
    pub fn new(registry: &'r Registry) -> Cards<'r> {
        Cards { registry }
    }

    /// One tool call, as the client sees it: its `tool_call` update and `tool_start` event, the
    /// card it needs, then its end (`tool_end`, or `tool_denied` when it did not run).
    pub(crate) async fn tool_step(
        &self,
        client: Option<&Client>,
        session_id: &str,
        call: &ToolCall,
    ) -> ToolOutcome {
        let Some(client) = client else {
            return ToolOutcome {
                text: "Nobody is there to approve it.".into(),
                ran: false,
            };
        };
        client.update(session_id, json!({ "sessionUpdate": "tool_call", "toolCallId": call.id, "title": call.name, "kind": "execute", "status": "pending", "rawInput": call.arguments }));
        client.event(session_id, json!({ "type": "tool_start", "id": call.id, "name": call.name, "args": call.arguments }));
        let outcome = self.run_tool(client, session_id, call).await;
        let status = if outcome.ran { "completed" } else { "failed" };
        client.update(session_id, json!({ "sessionUpdate": "tool_call_update", "toolCallId": call.id, "status": status, "content": [{ "type": "content", "content": { "type": "text", "text": outcome.text } }] }));
        let kind = if outcome.ran {
            "tool_end"
        } else {
            "tool_denied"
        };
        client.event(
            session_id,
            json!({ "type": kind, "id": call.id, "name": call.name, "output": outcome.text }),
        );
        outcome
    }

    /// Whether this client may be asked questions and plans now.
    pub(crate) fn may_ask(&self, client: &Client, capability: &str) -> bool {
        may_ask(self.registry, client, capability)
    }

    /// Runs one tool call of the model, with the card it needs.
    pub(crate) async fn run_tool(
        &self,
        client: &Client,
        session_id: &str,
        call: &ToolCall,
    ) -> ToolOutcome {
        let asker = Asker::new(self.registry, client, session_id);
        match call.name.as_str() {
            "ask_user" => question::ask_user(&asker, call).await,
            "plan_submit" => plan::submit(&asker, call).await,
            "plan_write" => plan_update::write(self.registry, client, session_id, call).await,
            "library_search" => {
                crate::library::search_library(self.registry, session_id, call).await
            }
            _ => request_permission::approve_and_run(&asker, call).await,
        }
    }
}
