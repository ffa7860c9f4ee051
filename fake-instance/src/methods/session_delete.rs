//! `_lembas/session/delete` and `_lembas/session/deleted`: a chat deleted in the web UI (its
//! delete kept and sent again until a device answers), and a session the device says it
//! deleted, with what a misbehaving instance does with one it never had.

use std::time::Duration;

use harness::lembas::methods;
use harness::rules::{Misbehaviours, ids};
use serde_json::{Value, json};

use crate::actions::{Acted, InstanceActor};
use crate::methods::links::OnLink;

/// What the instance gets wrong about deleted sessions on purpose; all off by default.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Faults {
    /// A delete of a chat it never had is taken as a broken link (deleted.ignore).
    pub closes_link: bool,
    /// After a delete of a chat it never had, nothing on the link is answered any more
    /// (deleted.ignore/stalls).
    pub stalls: bool,
    /// The deleted chat's delete is sent back to the device as if the person had deleted it
    /// (deleted.removes_chat/sends_delete).
    pub sends_delete: bool,
}

impl Faults {
    /// The delete faults among `misbehave`.
    pub(crate) fn of(misbehave: &Misbehaviours) -> Self {
        Self {
            closes_link: misbehave.breaks(ids::INSTANCE_DELETED_IGNORE),
            stalls: misbehave.breaks_way(ids::INSTANCE_DELETED_IGNORE, "stalls"),
            sends_delete: misbehave.breaks_way(ids::INSTANCE_DELETED_REMOVES_CHAT, "sends_delete"),
        }
    }
}

/// The device deleted a session (`_lembas/session/deleted`): the chats learn it on their own
/// (as every notification); only a misbehaving instance does something here.
pub(crate) fn on_deleted(link: &OnLink<'_>, params: &Value, faults: &Faults) {
    let id = params.get("sessionId").and_then(Value::as_str);
    let unknown = || id.is_some_and(|id| link.chats.chat(id).is_none());
    if faults.closes_link && unknown() {
        // Misbehaving: a delete of a chat it never had is taken as a broken link.
        link.peer.close(1011, "unknown session");
    }
    if faults.stalls
        && unknown()
        && let Ok(mut links) = link.links.lock()
    {
        // Misbehaving: the link stays up, and nothing on it is answered any more.
        links.entry(link.peer.link()).or_default().stalled = true;
    }
    if faults.sends_delete
        && let Some(id) = id
        && link.chats.chat(id).is_some()
    {
        // Misbehaving: the chat goes, and its delete is sent to the device as if the person
        // had deleted it.
        let answer = link.peer.begin_request(
            methods::LEMBAS_SESSION_DELETE,
            json!({ "sessionId": id }),
            Duration::from_secs(5),
        );
        tokio::spawn(answer);
    }
}

impl InstanceActor {
    /// Deletes a chat. A delete is kept even with no device linked: it goes when one links.
    pub(crate) async fn delete_chat(&self, chat: String) -> Acted {
        let link = self.chats.ready_link(&self.hub, Duration::ZERO).await.ok();
        Ok(self.chats.delete(link, &chat).await?)
    }
}
