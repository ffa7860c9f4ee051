//! `session/new`: a chat opened in the web UI on a device (its folder picked with
//! `_lembas/directories`, its `Context` from the chat and the account), and the session the
//! device's answer gives it.

use std::time::Duration;

use harness::lembas::methods;
use serde_json::{Value, json};

use crate::actions::{Acted, InstanceActor, OpenChat, PickFolder};
use crate::chats::Chats;

/// The device answered a `session/new` (`request`: what was asked): the chats learn the
/// session it made.
pub(crate) fn answered(chats: &Chats, link: u32, request: &Value, result: &Value) {
    chats.learn(link, methods::SESSION_NEW, request, result);
}

impl InstanceActor {
    /// Opens a chat on a device (`session/new`).
    pub(crate) async fn open_chat(&self, open: OpenChat, timeout: Duration) -> Acted {
        let (peer, facts) = self
            .chats
            .ready_link_of(&self.hub, timeout, open.device.as_deref())
            .await?;
        // `Context` fields the device did not list are left out, as the web UI does; a
        // scenario that relies on them says so in its `needs`.
        let mut context = context_of(&open);
        if open.account_personalization && !context.contains_key("personalization") {
            context.insert("personalization".into(), self.account_personalization());
        }
        Ok(self
            .chats
            .open(
                &peer,
                &facts,
                open.cwd.as_deref(),
                open.mode.as_deref(),
                open.model.as_deref(),
                context,
            )
            .await?)
    }

    /// The new chat's folder picker (`_lembas/directories`).
    pub(crate) async fn pick_folder(&self, pick: PickFolder, timeout: Duration) -> Acted {
        let (peer, _) = self
            .ready_for(timeout, "directories", "the folder picker")
            .await?;
        Ok(crate::chat_menu::pick_folder(&self.chats, &peer, pick.path.as_deref()).await?)
    }

    /// The account's personalization as a chat's `Context` carries it: its three fields while it
    /// is on and available, else `null` (the device's own apply). A misbehaving web UI sends
    /// instructions the account never had.
    fn account_personalization(&self) -> Value {
        let mut saved = self.http.personalization();
        if self.chats.misbehaves_way(
            harness::rules::ids::INSTANCE_CONTEXT_PERSONALIZATION_SOURCE,
            "stale",
        ) {
            // Misbehaving: the account's personalization as it was before its writes.
            let first = self.http.personalization_at_start();
            saved.personality = first.personality;
            saved.personality_custom = first.personality_custom;
            saved.instructions = first.instructions;
        }
        if self
            .chats
            .misbehaves(harness::rules::ids::INSTANCE_CONTEXT_PERSONALIZATION_SOURCE)
        {
            return json!({
                "personality": saved.personality,
                "personality_custom": saved.personality_custom,
                "instructions": format!("{} (remembered from another account)", saved.instructions),
            });
        }
        if !(saved.enabled && saved.available) {
            return Value::Null;
        }
        json!({
            "personality": saved.personality,
            "personality_custom": saved.personality_custom,
            "instructions": saved.instructions,
        })
    }
}

/// The `Context` fields a chat is opened with.
fn context_of(open: &OpenChat) -> serde_json::Map<String, Value> {
    let mut context = serde_json::Map::new();
    if let Some(prompt) = &open.system_prompt {
        context.insert("system_prompt".into(), json!(prompt));
    }
    for (field, value) in [
        ("personalization", &open.personalization),
        ("library", &open.library),
        ("prototypes", &open.prototypes),
    ] {
        if let Some(value) = value {
            context.insert(field.into(), value.clone());
        }
    }
    context
}
