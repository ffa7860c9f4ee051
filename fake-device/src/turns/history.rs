//! The methods that change a session's conversation between turns: `_lembas/session/rewind`
//! takes a turn and every later one out of it, `_lembas/session/compact` sums it up; `/undo`
//! and `/compact` (actions run as turns) use the same steps.

use harness::jsonrpc::RpcError;
use serde_json::{Value, json};

use super::Turns;
use crate::answers::{Answer, param_str, refuse};
use crate::events::Client;
use crate::live::{Live, State};

impl Turns<'_> {
    /// `_lembas/session/rewind`: a turn and every later one leave the conversation.
    pub(crate) async fn rewind(&self, live: &Live, params: &Value) -> Answer {
        let faults = &self.faults.controls;
        let turn_id = param_str(params, "turnId")?;
        let mut state = live.state.lock().await;
        if state.running.is_some() && !faults.rewind_while_working {
            // Misbehaving: refused as an internal error rather than invalid params.
            if faults.rewind_working_internal_error {
                return Err(RpcError::new(
                    harness::jsonrpc::INTERNAL_ERROR,
                    "the session is working",
                ));
            }
            return Err(refuse("the session is working: rewind it between turns"));
        }
        let Some(first) = state
            .stored
            .messages
            .iter()
            .position(|m| m.turn_id == turn_id && !m.reverted)
        else {
            if faults.rewind_unknown_accepted {
                return Ok(json!({ "reverted": 0 }));
            }
            // Misbehaving: refused as an internal error rather than invalid params.
            if faults.rewind_unknown_internal_error {
                return Err(RpcError::new(
                    harness::jsonrpc::INTERNAL_ERROR,
                    format!("this session has no turn `{turn_id}`"),
                ));
            }
            return Err(refuse(format!("this session has no turn `{turn_id}`")));
        };
        if faults.rewind_keeps_turns {
            // Misbehaving: says it rewound, and keeps every turn.
            return Ok(json!({ "reverted": 1 }));
        }
        // Misbehaving: the turn before the one named is reverted too.
        let first = if faults.rewind_one_more {
            state.stored.messages[..first]
                .iter()
                .rposition(|m| m.role == "user" && !m.reverted)
                .unwrap_or(first)
        } else {
            first
        };
        let reverted = self.revert_from(&mut state, first);
        self.registry.save(&state);
        Ok(json!({ "reverted": reverted.len() }))
    }

    /// Reverts the messages from `first` on; gives the turns that left the conversation.
    fn revert_from(&self, state: &mut State, first: usize) -> Vec<String> {
        let faults = &self.faults.controls;
        // That turn and every later one leave the conversation; files are not touched.
        let mut reverted: Vec<String> = Vec::new();
        let cwd = state.stored.cwd.clone();
        for message in state
            .stored
            .messages
            .iter_mut()
            .skip(first)
            .filter(|m| !m.reverted)
        {
            message.reverted = true;
            // Misbehaving: the plan files the reverted turns wrote are removed with them.
            if faults.rewind_removes_plans {
                for tool in message.tools.iter().filter(|t| t["name"] == "plan_submit") {
                    let file = cwd.join(crate::methods::plan::plan_path(&tool["args"]));
                    let _ = std::fs::remove_file(file);
                }
            }
            // Misbehaving: the plan files the reverted turns wrote are moved to a hidden folder.
            if faults.rewind_moves_plans {
                for tool in message.tools.iter().filter(|t| t["name"] == "plan_submit") {
                    let path = crate::methods::plan::plan_path(&tool["args"]);
                    let aside = cwd.join(".reverted").join(&path);
                    if let Some(parent) = aside.parent() {
                        let _ = std::fs::create_dir_all(parent);
                    }
                    let _ = std::fs::rename(cwd.join(&path), aside);
                }
            }
            if !reverted.contains(&message.turn_id) {
                reverted.push(message.turn_id.clone());
            }
        }
        reverted
    }

    /// `_lembas/session/compact`: the conversation summed up, between turns.
    pub(crate) async fn compact(&self, live: &Live, params: &Value, client: &Client) -> Answer {
        let faults = &self.faults.controls;
        let id = param_str(params, "sessionId")?;
        let working = live.state.lock().await.running.is_some();
        if working && faults.compact_unserved_while_working {
            // Misbehaving: the listed method is method-not-found while the session works.
            return Err(RpcError::new(
                -32601,
                "_lembas/session/compact is not served while working",
            ));
        }
        if working && faults.compact_cancels_turn {
            // Misbehaving: refused as it should be, but the running turn is cancelled with it.
            if let Some(running) = &live.state.lock().await.running {
                running.cancel();
            }
            return Err(refuse("the session is working: compact it between turns"));
        }
        if working && !faults.compact_while_working {
            return Err(refuse("the session is working: compact it between turns"));
        }
        let summary = self.summary(live).await;
        // Misbehaving: the method's compaction is no event.
        if faults.compact_event_other_summary {
            // Misbehaving: the event carries another summary than the answer.
            client.event(
                id,
                json!({ "type": "compacted", "summary": format!("(earlier) {summary}") }),
            );
        } else if !faults.compact_no_event {
            client.event(id, json!({ "type": "compacted", "summary": summary }));
        }
        if faults.compact_empty_result {
            return Ok(json!({}));
        }
        if faults.compact_summary_object {
            return Ok(json!({ "summary": { "text": summary } }));
        }
        Ok(json!({ "summary": summary }))
    }

    /// What compacting the conversation comes to.
    pub(super) async fn summary(&self, live: &Live) -> String {
        let state = live.state.lock().await;
        let turns = state
            .stored
            .messages
            .iter()
            .filter(|m| m.role == "user" && !m.reverted)
            .count();
        format!(
            "A conversation of {turns} turn(s) in {}.",
            state.stored.cwd.display()
        )
    }

    /// `/undo`: the last turn leaves the conversation; gives its prompt (`None`: nothing to undo).
    pub(super) async fn undo_last(&self, live: &Live) -> Option<String> {
        let mut state = live.state.lock().await;
        let last = state
            .stored
            .messages
            .iter()
            .rev()
            .find(|m| !m.reverted && m.role == "user")
            .map(|m| (m.turn_id.clone(), m.text.clone()))?;
        for message in state
            .stored
            .messages
            .iter_mut()
            .filter(|m| m.turn_id == last.0)
        {
            message.reverted = true;
        }
        self.registry.save(&state);
        Some(last.1)
    }
}
