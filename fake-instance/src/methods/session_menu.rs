//! `_lembas/session/title` and `_lembas/session/compact`: the chat menu's rename and compact,
//! each only when the device listed it.

use std::time::Duration;

use harness::engine::ActError;
use serde_json::Value;

use crate::actions::{InstanceActor, RenameChat, unlisted};

impl InstanceActor {
    /// Renames a chat (the title cut to 200 characters).
    pub(crate) async fn rename(
        &self,
        rename: RenameChat,
        timeout: Duration,
    ) -> Result<Value, ActError> {
        let (peer, facts) = self.chats.ready_link(&self.hub, timeout).await?;
        unlisted(&facts, "title", "a rename")?;
        Ok(crate::chat_menu::rename(&self.chats, &peer, &rename.chat, &rename.title).await?)
    }

    /// Compacts a chat between its prompts.
    pub(crate) async fn compact(&self, chat: String, timeout: Duration) -> Result<Value, ActError> {
        let (peer, facts) = self.chats.ready_link(&self.hub, timeout).await?;
        unlisted(&facts, "compact", "a compaction")?;
        Ok(crate::chat_menu::compact(&self.chats, &peer, &chat).await?)
    }
}
