//! `_lembas/session/title` and `_lembas/session/compact`: the chat menu's rename and compact,
//! each only when the device listed it.

use std::time::Duration;

use crate::actions::{Acted, InstanceActor, RenameChat};

impl InstanceActor {
    /// Renames a chat (the title cut to 200 characters).
    pub(crate) async fn rename(&self, rename: RenameChat, timeout: Duration) -> Acted {
        let (peer, _) = self.ready_for(timeout, "title", "a rename").await?;
        Ok(crate::chat_menu::rename(&self.chats, &peer, &rename.chat, &rename.title).await?)
    }

    /// Compacts a chat between its prompts.
    pub(crate) async fn compact(&self, chat: String, timeout: Duration) -> Acted {
        let (peer, _) = self.ready_for(timeout, "compact", "a compaction").await?;
        Ok(crate::chat_menu::compact(&self.chats, &peer, &chat).await?)
    }
}
