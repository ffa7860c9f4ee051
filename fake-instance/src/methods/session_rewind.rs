//! `_lembas/session/rewind`: an edit or a regeneration from a turn, as the web UI asks it (the
//! chat's rewind and its new turn live with the chats).

use std::time::Duration;

use crate::actions::{Acted, InstanceActor, RewindChat};

impl InstanceActor {
    /// Rewinds a chat to before a turn, and sends the new text when there is one.
    pub(crate) async fn rewind(&self, rewind: RewindChat, timeout: Duration) -> Acted {
        let (peer, facts) = self.ready_for(timeout, "rewind", "a rewind").await?;
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
