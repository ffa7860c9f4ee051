//! `_lembas/session/rewind`: an edit or a regeneration from a turn, as the web UI asks it (the
//! chat's rewind and its new turn live with the chats).

use std::time::Duration;

use harness::engine::ActError;
use serde_json::Value;

use crate::actions::{InstanceActor, RewindChat, unlisted};

impl InstanceActor {
    /// Rewinds a chat to before a turn, and sends the new text when there is one.
    pub(crate) async fn rewind(
        &self,
        rewind: RewindChat,
        timeout: Duration,
    ) -> Result<Value, ActError> {
        let (peer, facts) = self.chats.ready_link(&self.hub, timeout).await?;
        unlisted(&facts, "rewind", "a rewind")?;
        Ok(self
            .chats
            .rewind(
                &peer,
                &facts,
                &rewind.chat,
                &rewind.turn,
                rewind.text.as_deref(),
            )
            .await?)
    }
}
