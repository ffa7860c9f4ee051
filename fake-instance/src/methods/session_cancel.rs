//! `session/cancel`: the web UI's stop button, a notification that stops a chat's running turn
//! (the turn's answer then comes back `cancelled`, and the chat follows it as any other).

use std::sync::Arc;
use std::time::Duration;

use harness::jsonrpc::Peer;
use harness::lembas::methods;
use harness::rules::{Misbehaviours, ids};
use serde_json::json;

use crate::actions::{Acted, InstanceActor};

/// What the instance gets wrong about stopping a turn on purpose; all off by default.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Faults {
    /// The stop button stops the stream in the browser only (cancel.stop).
    pub browser_only: bool,
    /// The stop names a session the device never gave (cancel.stop/other_session).
    pub other_session: bool,
    /// The stop goes as a request (cancel.is_notification).
    pub as_request: bool,
}

impl Faults {
    /// The cancel faults among `misbehave`.
    pub(crate) fn of(misbehave: &Misbehaviours) -> Self {
        Self {
            browser_only: misbehave.breaks(ids::INSTANCE_CANCEL_STOP),
            other_session: misbehave.breaks_way(ids::INSTANCE_CANCEL_STOP, "other_session"),
            as_request: misbehave.breaks(ids::INSTANCE_CANCEL_IS_NOTIFICATION),
        }
    }
}

impl InstanceActor {
    /// Stops the chat's running turn (`session/cancel`).
    pub(crate) async fn cancel(&self, chat: String, timeout: Duration) -> Acted {
        let (peer, _) = self.chats.ready_link(&self.hub, timeout).await?;
        let faults = Faults::of(self.chats.misbehaviours());
        cancel(&peer, &chat, self.chats.patience(), &faults);
        Ok(json!({ "sessionId": chat }))
    }
}

/// Stops a chat's running turn; a request that wrongly waits for an answer waits `patience`.
fn cancel(peer: &Arc<Peer>, chat: &str, patience: Duration, faults: &Faults) {
    // Misbehaving: the stop button stops the stream in the browser only.
    if faults.browser_only {
        return;
    }
    let mut params = json!({ "sessionId": chat });
    if faults.other_session {
        // Misbehaving: the stop names a session the device never gave, not the chat's.
        params = json!({ "sessionId": "ses_never_given" });
    }
    if faults.as_request {
        // Misbehaving: the stop goes as a request, waiting for an answer nobody owes.
        let answer = peer.begin_request(methods::SESSION_CANCEL, params, patience);
        tokio::spawn(answer);
        return;
    }
    peer.notify(methods::SESSION_CANCEL, params);
}
