//! `_lembas/configure` and `session/set_mode`: a chat's model, effort and mode, as the web UI
//! changes them (the change itself, deferred while a turn runs, is [`crate::configure`]'s).

use std::time::Duration;

use crate::actions::{Acted, ConfigureChat, InstanceActor, SetMode};

impl InstanceActor {
    /// Changes a chat's model and/or effort.
    pub(crate) async fn configure(&self, change: ConfigureChat, timeout: Duration) -> Acted {
        let (peer, _) = self
            .ready_for(timeout, "configure", "a model or effort change")
            .await?;
        let change = crate::configure::Change {
            chat: change.chat,
            model: change.model,
            effort: change.effort,
        };
        Ok(crate::configure::configure(&self.chats, &peer, change).await?)
    }

    /// Switches a chat's mode to one the device offered for it.
    pub(crate) async fn set_mode(&self, switch: SetMode, timeout: Duration) -> Acted {
        let (peer, _) = self.chats.ready_link(&self.hub, timeout).await?;
        Ok(crate::modes::set_mode(&self.chats, &peer, &switch.chat, &switch.mode).await?)
    }
}
