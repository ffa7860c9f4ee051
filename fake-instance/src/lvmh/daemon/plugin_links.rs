//! A plugin's link: its hello taken (the session stored and online, the link's replay
//! expected from the daemon's `lastSeq`), the `welcome` said, and its close (the session
//! offline).

use std::sync::Arc;

use harness::engine::Hub;
use harness::jsonrpc::Peer;
use harness::lvmh::envelope::{fields, kinds};
use harness::lvmh::{Envelope, rules};
use serde_json::{Value, json};

use super::{AgentLink, Daemon, find};

impl Daemon {
    /// A plugin's hello: the session stored and online, the link expecting the replay from
    /// the daemon's `lastSeq` on, and the `welcome` saying it.
    pub(super) fn on_hello(&self, hub: &Arc<Hub>, peer: &Arc<Peer>, frame: &Value) {
        let Some(session) = frame.get("session").filter(|s| s.is_object()).cloned() else {
            find(
                hub,
                peer,
                rules::HELLO_FIRST,
                "hello carries no `session` snapshot".into(),
                frame,
            );
            return;
        };
        let id = frame
            .get("sessionId")
            .and_then(Value::as_str)
            .or_else(|| session.get("id").and_then(Value::as_str))
            .unwrap_or_default()
            .to_string();
        let last = match self.store.lock() {
            Ok(mut store) => {
                store.session(session);
                store.last_seq(&id)
            }
            Err(_) => 0,
        };
        self.expect_replay(peer, &id, last);
        // A gap of the session's last link may still be excused by a notice on this one.
        let carried = self.gaps.lock().ok().and_then(|g| g.get(&id).cloned());
        if let Some(why) = carried {
            self.watch_gap(hub, peer, &id, why);
        }
        if let Ok(mut online) = self.online.lock() {
            online.insert(id.clone(), peer.clone());
        }
        peer.send_frame(self.welcome(&id, last));
        self.list_changed();
    }

    /// The link of session `id` must go on from `last`, the daemon's last persisted seq.
    fn expect_replay(&self, peer: &Arc<Peer>, id: &str, last: u64) {
        if let Ok(mut agents) = self.agents.lock() {
            let link = agents.entry(peer.link()).or_default();
            link.session = Some(id.to_string());
            // A hostile plugin's seq may be the largest there is.
            link.replay_from = Some(last.saturating_add(1));
            link.last_seq = None;
            link.seen_at_welcome = self
                .seen
                .lock()
                .ok()
                .and_then(|s| s.get(id).map(|s| s.max_seq))
                .unwrap_or(0)
                .max(last);
        }
    }

    /// The `welcome` saying `last` (as the misbehaviours bend it and its envelope).
    fn welcome(&self, id: &str, last: u64) -> Value {
        let said = match self.misbehave.breaks(rules::WELCOME_LAST_SEQ) && last > 0 {
            // Says it has one event less than it has.
            true => last - 1,
            // Says it has one event more than it has: the plugin will not resend it.
            false
                if self
                    .misbehave
                    .breaks_way(rules::WELCOME_LAST_SEQ, "one_more")
                    && last > 0 =>
            {
                last + 1
            }
            false => last,
        };
        let mut welcome =
            Envelope::frame(kinds::WELCOME, id, 0, fields(json!({ "lastSeq": said })));
        if self.misbehave.breaks(rules::DAEMON_ENVELOPE)
            && let Some(fields) = welcome.as_object_mut()
        {
            fields.remove("ts");
        }
        if self.misbehave.breaks_way(rules::DAEMON_ENVELOPE, "v2") {
            welcome["v"] = json!(2);
        }
        welcome
    }

    /// A plugin's link opened: followed from now on, its session unknown until its hello.
    pub(super) fn plugin_opened(&self, peer: &Arc<Peer>) {
        if let Ok(mut agents) = self.agents.lock() {
            agents.insert(
                peer.link(),
                AgentLink {
                    peer: Some(peer.clone()),
                    ..AgentLink::default()
                },
            );
        }
    }

    /// A link closed: a plugin's session goes offline (if this link was its own), a
    /// browser's link stops being fed.
    pub(super) fn on_closed(&self, peer: &Arc<Peer>) {
        let link = self
            .agents
            .lock()
            .ok()
            .and_then(|mut a| a.remove(&peer.link()));
        let stale = self.misbehave.breaks_way(rules::SESSION_LIST, "stale");
        if let Some(session) = link.and_then(|l| l.session)
            && self
                .online
                .lock()
                .is_ok_and(|o| o.get(&session).is_some_and(|p| Arc::ptr_eq(p, peer)))
        {
            if stale {
                // Misbehaving: the browsers are told the list as it was before the change.
                self.list_changed();
            }
            if let Ok(mut online) = self.online.lock() {
                online.remove(&session);
            }
            if !stale {
                self.list_changed();
            }
        }
        if let Ok(mut browsers) = self.browsers.lock() {
            browsers.remove(&peer.link());
        }
    }
}
