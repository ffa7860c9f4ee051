//! The plugin's link to the daemon: it dials and redials forever with capped, jittered
//! exponential backoff, says hello with the session snapshot, and gives up on a link the daemon
//! never welcomes. A daemon that is down changes nothing for the agent.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};

use super::config::backoff;
use super::{GOING_AWAY, Plugin};
use crate::jsonrpc::Peer;
use crate::lvmh::envelope::{Envelope, fields, kinds};
use crate::lvmh::rules;
use crate::transport::ws_client;

/// How long a plugin waits for `welcome` after its hello before it tries another link.
const WELCOME_WITHIN: Duration = Duration::from_secs(30);

impl Plugin {
    /// The plugin's network goes away for `span`: its link is closed at once (without a word,
    /// as a cable pulled) and it dials again only after `span`; the agent goes on meanwhile.
    pub fn unplug(&self, span: Duration) {
        let links = match self.state.lock() {
            Ok(mut state) => {
                state.unplugged_until = Some(tokio::time::Instant::now() + span);
                [state.live.take(), state.waiting.take()]
            }
            Err(_) => return,
        };
        for peer in links.into_iter().flatten() {
            peer.close(GOING_AWAY, "unplugged");
        }
    }

    /// Whether `peer` is the link the daemon welcomed and it is still up.
    fn is_live_on(&self, peer: &Arc<Peer>) -> bool {
        self.state
            .lock()
            .is_ok_and(|s| s.live.as_ref().is_some_and(|l| Arc::ptr_eq(l, peer)))
    }

    /// Whether the daemon welcomed `peer` (it may have ended since).
    fn welcomed_link(&self, peer: &Arc<Peer>) -> bool {
        self.state
            .lock()
            .is_ok_and(|s| s.last_welcomed == Some(peer.link()))
    }

    /// Whether a daemon welcomed the current link.
    pub fn is_live(&self) -> bool {
        self.state.lock().is_ok_and(|s| s.live.is_some())
    }

    /// Forgets a link that closed, whether welcomed or still waiting.
    pub(super) fn on_closed(&self, peer: &Arc<Peer>) {
        if let Ok(mut state) = self.state.lock() {
            if state.live.as_ref().is_some_and(|l| Arc::ptr_eq(l, peer)) {
                state.live = None;
            }
            if state.waiting.as_ref().is_some_and(|w| Arc::ptr_eq(w, peer)) {
                state.waiting = None;
            }
        }
    }

    /// Says hello on a new link (spec: the first frame), as the misbehaviours bend it.
    fn greet(&self, peer: &Arc<Peer>) {
        if self.config.misbehave.breaks(rules::HELLO_FIRST) {
            peer.send_frame(Envelope::frame(
                kinds::AGENT_SETTLED,
                &self.session_id(),
                0,
                Map::new(),
            ));
        }
        let mut hello = self.hello();
        if self
            .config
            .misbehave
            .breaks_way(rules::HELLO_FIRST, "no_session")
            && let Value::Object(fields) = &mut hello
        {
            // Misbehaving: a hello without the session snapshot.
            fields.remove("session");
        }
        peer.send_frame(hello);
    }

    /// The hello frame, with the session snapshot as it is now (a rename shows).
    fn hello(&self) -> Value {
        let session = self
            .state
            .lock()
            .map(|s| s.session.clone())
            .unwrap_or_else(|_| self.config.session.clone());
        Envelope::frame(
            kinds::HELLO,
            &self.session_id(),
            0,
            fields(json!({ "session": session })),
        )
    }

    /// Dials until stopped: a link, hello, then waits for it to end; between dials, the
    /// backoff. A daemon that is down changes nothing for the agent.
    pub(super) async fn dial_forever(self: Arc<Self>) {
        if !self.config.dial {
            return;
        }
        let mut attempt: u32 = 0;
        while !self.stopped() {
            let unplugged = self.state.lock().ok().and_then(|s| s.unplugged_until);
            if let Some(until) = unplugged {
                tokio::select! {
                    () = tokio::time::sleep_until(until) => {}
                    () = self.until_stopped() => break,
                }
            }
            let request = ws_client::ClientRequest {
                url: self.config.url.clone(),
                bearer_token: Some(self.config.token.clone()),
                headers: Vec::new(),
                timeout: Duration::from_secs(10),
            };
            match ws_client::connect(request, self.config.limits).await {
                Ok(connection) => {
                    let peer = self.hub.attach(connection);
                    if let Ok(mut state) = self.state.lock() {
                        state.waiting = Some(peer.clone());
                    }
                    self.greet(&peer);
                    // A daemon that never welcomes the link is left for another try.
                    let unwelcomed = async {
                        tokio::time::sleep(WELCOME_WITHIN).await;
                        if !self.is_live_on(&peer) {
                            peer.close(GOING_AWAY, "no welcome");
                        }
                        std::future::pending::<()>().await;
                    };
                    tokio::select! {
                        _ = peer.closed() => {}
                        () = self.until_stopped() => {}
                        () = unwelcomed => {}
                    }
                    // Only a link the daemon welcomed starts the backoff over: one that is
                    // refused by a close right after the upgrade backs off as any refusal.
                    if self.welcomed_link(&peer) {
                        attempt = 0;
                    }
                    if self.config.misbehave.breaks(rules::RECONNECT) {
                        // Gives up: the agent goes on, the daemon never hears of it again.
                        break;
                    }
                }
                Err(e) => {
                    tracing::debug!(url = %self.config.url, "the daemon is not there: {e}");
                    // Misbehaving: a refused dial ends the dialing (once a link was up).
                    if self
                        .config
                        .misbehave
                        .breaks_way(rules::RECONNECT, "refused")
                        && self.state.lock().is_ok_and(|s| s.last_welcomed.is_some())
                    {
                        break;
                    }
                }
            }
            if self.stopped() {
                break;
            }
            let pause = backoff(self.config.backoff, attempt);
            attempt = attempt.saturating_add(1);
            tokio::select! {
                () = tokio::time::sleep(pause) => {}
                () = self.until_stopped() => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lvmh::BACKOFF_CAP;

    #[test]
    fn the_backoff_doubles_to_its_cap_and_jitter_only_shortens_it() {
        let first = Duration::from_millis(250);
        for attempt in 0..40 {
            let full = (first * (1u32 << attempt.min(20))).min(BACKOFF_CAP);
            let pause = backoff(first, attempt);
            assert!(pause <= BACKOFF_CAP, "attempt {attempt}: {pause:?}");
            assert!(
                pause >= full / 2 && pause <= full,
                "attempt {attempt}: {pause:?}"
            );
        }
    }
}
