//! Deleting a chat as the web UI does: `_lembas/session/delete` now when its device is linked,
//! else kept (in the pending deletes) and sent again on the device's next link, until
//! answered or refused [`DELETE_REFUSALS`] times.

use std::collections::BTreeMap;
use std::sync::Arc;

use harness::jsonrpc::Peer;
use harness::lembas::methods;
use harness::rules::ids;
use serde_json::{Value, json};

use super::{Chats, DELETE_REFUSALS, LinkFacts, PendingDelete};

impl Chats {
    /// Deletes a chat: `_lembas/session/delete` now when a device is linked; otherwise, or when
    /// it is not answered or refused, kept and sent again on the next link.
    pub async fn delete(
        &self,
        link: Option<(Arc<Peer>, LinkFacts)>,
        chat: &str,
    ) -> Result<Value, String> {
        if self.breaks(ids::INSTANCE_DELETE_ON_CHAT) {
            // Misbehaving: the chat goes from the web UI, and the device is never told.
            self.lock().book.remove(chat);
            self.save_chats();
            return Ok(json!({ "sent": false }));
        }
        let pending = {
            let mut inner = self.lock();
            let known = inner.book.remove(chat).map(|c| c.device);
            // A chat it never had goes to the device linked now (or, unlinked, to the next).
            let device = known
                .or_else(|| link.as_ref().map(|(_, facts)| facts.device.clone()))
                .unwrap_or_default();
            inner.pending_deletes.keep(chat, device);
            inner.pending_deletes.kept().clone()
        };
        self.save_pending_deletes(&pending);
        self.save_chats();
        let owner = self.lock().pending_deletes.owner(chat);
        let delivered = match link {
            // Misbehaving: the delete names a session other than the chat's.
            Some((peer, facts))
                if facts.capabilities.iter().any(|c| c == "delete")
                    && self.misbehaves_way(ids::INSTANCE_DELETE_ON_CHAT, "other_session") =>
            {
                self.lock().pending_deletes.remove(chat);
                self.deliver(&peer, &format!("{chat}_other")).await
            }
            Some((peer, facts))
                if facts.capabilities.iter().any(|c| c == "delete")
                    && owner.is_none_or(|o| o.is_empty() || o == facts.device) =>
            {
                self.deliver(&peer, chat).await
            }
            _ => false,
        };
        Ok(json!({ "delivered": delivered }))
    }

    /// Sends one kept delete; gives whether it was answered (and so is done).
    async fn deliver(&self, peer: &Arc<Peer>, chat: &str) -> bool {
        let answer = peer
            .request(
                methods::LEMBAS_SESSION_DELETE,
                json!({ "sessionId": chat }),
                self.config.patience,
            )
            .await;
        let pending: BTreeMap<String, PendingDelete> = {
            let mut inner = self.lock();
            match &answer {
                Ok(Ok(_)) => {
                    inner.pending_deletes.remove(chat);
                }
                Ok(Err(_)) => {
                    let give_up = !self.breaks(ids::INSTANCE_DELETE_GIVE_UP);
                    // Misbehaving: given up after a sixth refusal, not the fifth.
                    let limit = if self.misbehaves_way(ids::INSTANCE_DELETE_GIVE_UP, "one_more") {
                        DELETE_REFUSALS + 1
                    } else {
                        DELETE_REFUSALS
                    };
                    inner.pending_deletes.refused(chat, limit, give_up);
                }
                // Not answered: kept as it is, for the next link.
                Err(_) => {}
            }
            inner.pending_deletes.kept().clone()
        };
        self.save_pending_deletes(&pending);
        matches!(answer, Ok(Ok(_)))
    }

    /// The kept deletes for a device: its own, and those made for no device in particular.
    pub(super) fn deletes_for(&self, device: &str) -> Vec<String> {
        self.lock().pending_deletes.for_device(device)
    }

    /// Sends every kept delete on a link that has just come up.
    pub(super) async fn redeliver(&self, peer: &Arc<Peer>, device: &str) {
        let pending = self.deletes_for(device);
        // Misbehaving: with two or more kept, only the first is sent again, the rest forgotten.
        let only_one = self.misbehaves_way(ids::INSTANCE_DELETE_REDELIVER, "only_one");
        for (at, chat) in pending.into_iter().enumerate() {
            if peer.is_closed() {
                return;
            }
            if only_one && at > 0 {
                let kept = {
                    let mut inner = self.lock();
                    inner.pending_deletes.remove(&chat);
                    inner.pending_deletes.kept().clone()
                };
                self.save_pending_deletes(&kept);
                continue;
            }
            // Misbehaving: a kept delete waits one link more before it is sent again.
            if self.misbehaves_way(ids::INSTANCE_DELETE_REDELIVER, "one_link_late")
                && self.lock().pending_deletes.hold_back(&chat)
            {
                continue;
            }
            self.lock().pending_deletes.release(&chat);
            self.deliver(peer, &chat).await;
        }
    }

    /// The deletes waiting to be delivered.
    #[cfg(test)]
    pub fn pending_deletes(&self) -> BTreeMap<String, PendingDelete> {
        self.lock().pending_deletes.kept().clone()
    }
}
