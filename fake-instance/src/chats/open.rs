//! Opening a chat on a device (`session/new` with the chat's folder, mode, model and Context),
//! and opening it anew on a later link when the device keeps no session past its link.

use std::sync::Arc;

use harness::jsonrpc::Peer;
use harness::lembas::methods;
use harness::rules::ids;
use serde_json::{Value, json};

use super::{Chat, Chats, LinkFacts};
use harness::lembas::answers::offered_modes;

impl Chats {
    /// Opens a chat: `session/new` in `cwd` (default: the device's first root).
    pub async fn open(
        &self,
        peer: &Arc<Peer>,
        facts: &LinkFacts,
        cwd: Option<&str>,
        mode: Option<&str>,
        model: Option<&str>,
        context: serde_json::Map<String, Value>,
    ) -> Result<Value, String> {
        if self.breaks(ids::INSTANCE_CHAT_OPEN) {
            return Err("misbehaving on purpose: the chat is opened on no device".into());
        }
        let chat = Chat {
            context,
            device: facts.device.clone(),
            link: peer.link(),
            ..Chat::default()
        };
        let cwd = match cwd {
            Some(cwd) => cwd.to_string(),
            None => facts
                .roots
                .first()
                .cloned()
                .ok_or("the device has no root to open a chat in")?,
        };
        let cwd = if self.misbehaves_way(ids::INSTANCE_CHAT_OPEN, "outside_roots") {
            // Misbehaving: the chat opened in the folder holding the device's root, outside it.
            std::path::Path::new(&cwd)
                .parent()
                .map_or("/".to_string(), |p| p.display().to_string())
        } else {
            cwd
        };
        let mut params = json!({ "cwd": cwd, "mcpServers": [] });
        if let Some(mode) = mode {
            params["_meta"]["mode"] = json!(mode);
        }
        if let Some(model) = model {
            params["_meta"]["lembas_model"] = json!(self.served_model(facts, model));
        }
        // Misbehaving: the chat's Context is left off session/new (the prompts carry it).
        if let Some(context) = chat
            .context(facts)
            .filter(|_| !self.breaks(ids::INSTANCE_CONTEXT_SENT))
        {
            params["_meta"]["lembas"] = context;
        }
        let answer = peer
            .request(methods::SESSION_NEW, params, self.config.patience)
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| format!("the device refused session/new: {}", e.message))?;
        let id = answer
            .get("sessionId")
            .and_then(Value::as_str)
            .ok_or("session/new answered without a sessionId")?
            .to_string();
        self.lock().book.insert_unless_gone(
            id.clone(),
            Chat {
                session_id: id.clone(),
                modes: offered_modes(&answer),
                ..chat
            },
        );
        self.save_chats();
        Ok(json!({ "sessionId": id, "device": facts.device }))
    }

    /// The chat's model, by the name this instance serves it under (misbehaving: in the
    /// device's ref form, `<connection>/<served name>`).
    fn served_model(&self, facts: &LinkFacts, model: &str) -> String {
        match &facts.connection {
            Some(login) if self.breaks(ids::INSTANCE_MODEL_SERVED_NAME) => {
                format!("{login}/{model}")
            }
            // Misbehaving: the model's own name, its provider left out.
            _ if self
                .config
                .misbehave
                .breaks_way(ids::INSTANCE_MODEL_SERVED_NAME, "model_part") =>
            {
                model
                    .split_once('/')
                    .map_or(model, |(_, part)| part)
                    .to_string()
            }
            _ => model.to_string(),
        }
    }

    /// Before a chat is written in on `peer`'s link: to a device that does not list `sessions`,
    /// a session opened on an earlier link is no longer to be relied on (spec: Versions and
    /// discovery, and the capability table's `sessions`), so the chat moves to a new session
    /// opened on this link, with its Context and what it said. Gives the session to write to.
    pub(super) async fn renewed(
        &self,
        peer: &Arc<Peer>,
        facts: &LinkFacts,
        chat: &str,
    ) -> Result<String, String> {
        let lasts = facts.capabilities.iter().any(|c| c == "sessions");
        let Some(old) = self.chat(chat) else {
            return Ok(chat.to_string());
        };
        // Misbehaving: the old session id relied on, as if the device listed `sessions`.
        if lasts
            || old.link == peer.link()
            || old.from_terminal
            || self.breaks(ids::INSTANCE_SESSIONS_UNLISTED)
        {
            return Ok(chat.to_string());
        }
        let opened = self
            .open(peer, facts, None, None, None, old.context.clone())
            .await?;
        let new = opened
            .get("sessionId")
            .and_then(Value::as_str)
            .ok_or("session/new answered without a sessionId")?
            .to_string();
        self.lock().book.moved(chat, &new, old);
        self.save_chats();
        // Misbehaving: the new session opened, and the message still sent to the old one.
        if self.misbehaves_way(ids::INSTANCE_SESSIONS_UNLISTED, "old_id_kept") {
            return Ok(chat.to_string());
        }
        Ok(new)
    }
}
