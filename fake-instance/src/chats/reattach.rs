//! Reattaching by turn on a new link (spec, `_lembas/session/status`): the turns a dropped
//! link cut short are followed if the device still runs them, imported from its history if
//! done, and sent again (same turn id) if unknown to a device that deduplicates turns.

use std::sync::Arc;

use harness::jsonrpc::Peer;
use harness::lembas::methods;
use harness::rules::ids;
use serde_json::{Value, json};

use super::{Chats, LinkFacts};

impl Chats {
    /// The device's chats with turns not yet answered, and those turns.
    pub(super) fn incomplete(&self, device: &str) -> Vec<(String, Vec<(String, String)>)> {
        self.lock().book.incomplete(device)
    }

    /// Reattaches by turn on a new link (spec, `_lembas/session/status`): for each chat with
    /// incomplete turns it asks status; a turn running or queued is followed (its events end
    /// it), one done is imported from `history`, one the device does not know is sent again
    /// with its turn id.
    pub(super) async fn reattach(
        self: &Arc<Self>,
        peer: &Arc<Peer>,
        facts: &LinkFacts,
        incomplete: Vec<(String, Vec<(String, String)>)>,
    ) {
        for (chat, turns) in incomplete {
            // Misbehaving: the session's history asked where its status should be.
            let asked = if self.misbehaves_way(ids::INSTANCE_REATTACH_STATUS, "history") {
                methods::LEMBAS_SESSION_HISTORY
            } else {
                methods::LEMBAS_SESSION_STATUS
            };
            let status = if facts.capabilities.iter().any(|x| x == "status") {
                self.ask(peer, asked, &chat).await
            } else {
                None
            };
            if self.breaks(ids::INSTANCE_REATTACH_KNOWN) {
                // Misbehaving: whatever status said, every incomplete turn again as a new turn.
                for (_, text) in turns {
                    let fresh = self.fresh_message_id();
                    self.prompt(peer, facts, &chat, &fresh, &text);
                }
                continue;
            }
            if self.misbehaves_way(ids::INSTANCE_REATTACH_KNOWN, "new_chat") {
                self.reopen_turns(peer, facts, &chat, turns).await;
                continue;
            }
            let running = running_turns(status.as_ref());
            self.reattach_turns(peer, facts, &chat, turns, &running)
                .await;
        }
    }

    /// Misbehaving: whatever status said, every incomplete turn again, as a new turn in a
    /// chat of its own.
    async fn reopen_turns(
        self: &Arc<Self>,
        peer: &Arc<Peer>,
        facts: &LinkFacts,
        chat: &str,
        turns: Vec<(String, String)>,
    ) {
        for (turn, text) in turns {
            if let Some(c) = self.lock().book.get_mut(chat) {
                c.drop_turn(&turn);
            }
            let opened = self
                .open(peer, facts, None, None, None, Default::default())
                .await;
            if let Some(new) = opened
                .ok()
                .as_ref()
                .and_then(|o| o.get("sessionId"))
                .and_then(Value::as_str)
            {
                let fresh = self.fresh_message_id();
                self.prompt(peer, facts, new, &fresh, &text);
            }
        }
    }

    /// A chat's cut turns, given those the device still runs or queues (`running`: followed,
    /// their events end them): each other one is imported from the history when done there,
    /// else sent again or given up.
    async fn reattach_turns(
        self: &Arc<Self>,
        peer: &Arc<Peer>,
        facts: &LinkFacts,
        chat: &str,
        turns: Vec<(String, String)>,
        running: &[String],
    ) {
        let has = |c: &str| facts.capabilities.iter().any(|x| x == c);
        let mut history = None;
        for (turn, text) in turns {
            if running.contains(&turn) {
                continue; // followed: its events say when it ends
            }
            if history.is_none() && has("sessions") {
                history = self.ask(peer, methods::LEMBAS_SESSION_HISTORY, chat).await;
            }
            let done = history
                .as_ref()
                .and_then(|h| h.get("turns"))
                .and_then(Value::as_array)
                .and_then(|turns| import(turns, &turn));
            // Misbehaving: only the chat's first turn is looked for in the history; a later
            // one, though done, is sent again as a new turn.
            if done.is_some()
                && self.misbehaves_way(ids::INSTANCE_REATTACH_KNOWN, "later_turn")
                && history.as_ref().and_then(first_user_turn).as_deref() != Some(turn.as_str())
            {
                if let Some(c) = self.lock().book.get_mut(chat) {
                    c.drop_turn(&turn);
                }
                let fresh = self.fresh_message_id();
                self.prompt(peer, facts, chat, &fresh, &text);
                continue;
            }
            match done {
                Some(said) => {
                    if let Some(c) = self.lock().book.get_mut(chat) {
                        c.streaming = said;
                    }
                    self.finished(chat, &turn);
                }
                None if self.breaks(ids::INSTANCE_REATTACH_UNKNOWN) => {
                    if let Some(c) = self.lock().book.get_mut(chat) {
                        c.drop_turn(&turn);
                    }
                }
                // Unknown to the device: sent again; it runs once whatever happened. Only
                // a device that deduplicates turn ids makes that safe; another one gets
                // nothing (the person sends it again if they want).
                // Misbehaving: sent again under a turn id of its own.
                None if has("turns")
                    && self.misbehaves_way(ids::INSTANCE_REATTACH_UNKNOWN, "fresh_id") =>
                {
                    if let Some(c) = self.lock().book.get_mut(chat) {
                        c.drop_turn(&turn);
                    }
                    let fresh = self.fresh_message_id();
                    self.prompt(peer, facts, chat, &fresh, &text);
                }
                None if has("turns") => self.prompt(peer, facts, chat, &turn, &text),
                // Misbehaving: sent again to a device that does not deduplicate turns.
                None if self.breaks(ids::INSTANCE_REATTACH_NO_TURNS) => {
                    self.prompt(peer, facts, chat, &turn, &text);
                }
                None => {
                    if let Some(c) = self.lock().book.get_mut(chat) {
                        c.drop_turn(&turn);
                    }
                }
            }
        }
    }

    /// A session method's result, or `None` when it failed.
    async fn ask(&self, peer: &Arc<Peer>, method: &str, chat: &str) -> Option<Value> {
        peer.request(method, json!({ "sessionId": chat }), self.config.patience)
            .await
            .ok()?
            .ok()
    }
}

/// The turns a session's status says run or wait (`turnId` and `queued`).
fn running_turns(status: Option<&Value>) -> Vec<String> {
    status
        .into_iter()
        .flat_map(|s| {
            s.get("turnId").into_iter().chain(
                s.get("queued")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten(),
            )
        })
        .filter_map(|t| t.as_str().map(String::from))
        .collect()
}

/// The turn id of a history's first user message.
fn first_user_turn(history: &Value) -> Option<String> {
    history
        .get("turns")?
        .as_array()?
        .iter()
        .find(|t| t.get("role").and_then(Value::as_str) == Some("user"))?
        .get("turnId")?
        .as_str()
        .map(String::from)
}

/// The agent's text of turn `turn` in a history, when the history has that turn.
pub(super) fn import(turns: &[Value], turn: &str) -> Option<String> {
    let at = turns.iter().position(|t| {
        t.get("role").and_then(Value::as_str) == Some("user")
            && t.get("turnId").and_then(Value::as_str) == Some(turn)
    })?;
    Some(
        turns[at + 1..]
            .iter()
            .take_while(|t| t.get("role").and_then(Value::as_str) == Some("assistant"))
            .filter_map(|t| t.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(""),
    )
}
