//! What the daemon sends the plugin: each frame checked (when the double judges a daemon),
//! then followed: a `welcome` starts the replay, a `prompt` or an `abort` reaches the agent.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

use serde_json::Value;

use super::Plugin;
use crate::engine::{Behaviour, Hub};
use crate::jsonrpc::{LinkEvent, Peer};
use crate::lvmh::envelope::kinds;
use crate::lvmh::rules;

/// The plugin as its hub's behaviour: it follows the daemon's frames.
pub(super) struct Follow(pub(super) Weak<Plugin>);

impl Behaviour for Follow {
    fn observe(&self, _hub: &Arc<Hub>, peer: &Arc<Peer>, event: &LinkEvent) {
        let Some(plugin) = self.0.upgrade() else {
            return;
        };
        match event {
            LinkEvent::Notification { method, raw, .. } => plugin.on_frame(peer, method, raw),
            LinkEvent::Closed(_) => plugin.on_closed(peer),
            _ => {}
        }
    }

    fn framing(&self) -> crate::jsonrpc::Framing {
        crate::lvmh::framing()
    }

    fn watch(&self) -> Option<Arc<dyn crate::jsonrpc::MessageWatch>> {
        // The daemon's rules bind the serving side; the plugin's own shape misbehaviours bend
        // what it sends.
        let plugin = self.0.upgrade()?;
        crate::lvmh::shape_watch(crate::rules::Binds::Instance, &plugin.config.misbehave)
            .into_shared()
    }
}

impl Plugin {
    /// Checks a frame of the daemon's (when a check is given), then follows it.
    fn on_frame(&self, peer: &Arc<Peer>, kind: &str, frame: &Value) {
        if let Some(check) = &self.check {
            for finding in check(kind, frame) {
                self.hub.findings().push(finding.on_link(peer.link()));
            }
        }
        match kind {
            kinds::WELCOME => {
                let last = frame.get("lastSeq").and_then(Value::as_u64).unwrap_or(0);
                self.welcomed(peer, last);
            }
            kinds::PROMPT => {
                let message = frame
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let busy = !self.is_idle();
                let misbehave = &self.config.misbehave;
                // Misbehaving: a prompt during a run taken as an interrupt, the reply cut short.
                if busy && misbehave.breaks(rules::PROMPT_STEER) {
                    self.aborted.store(true, Ordering::Relaxed);
                    self.abort.notify_waiters();
                }
                // Misbehaving: a prompt during a run dropped, as a TUI that is not listening.
                if busy && misbehave.breaks_way(rules::PROMPT_STEER, "dropped_while_busy") {
                    return;
                }
                if !self.type_prompt(message) {
                    tracing::warn!("a prompt from the daemon found the agent's queue full");
                }
            }
            kinds::ABORT if !self.config.misbehave.breaks(rules::ABORT) => {
                self.aborted.store(true, Ordering::Relaxed);
                self.abort.notify_waiters();
            }
            _ => {}
        }
    }
}
