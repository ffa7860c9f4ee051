//! A link's life as the chats follow it: hello, ready (when kept deletes go and cut turns are
//! reattached), closed, and waiting for a ready link to act on.

use std::sync::Arc;
use std::time::Duration;

use harness::engine::Hub;
use harness::jsonrpc::Peer;
use harness::rules::ids;
use serde_json::Value;

use super::Chats;
use super::link_facts::{LinkFacts, strings_at};

impl Chats {
    /// What the client knows of a link.
    pub fn link(&self, link: u32) -> Option<LinkFacts> {
        self.lock().links.get(link).cloned()
    }

    /// Says which device a link is (the server knows it by the token it linked with).
    pub fn set_device(&self, link: u32, device: &str) {
        self.lock().links.set_device(link, device);
    }

    /// Which device a link is (`""` when the server did not say).
    pub fn device_of(&self, link: u32) -> String {
        self.lock().links.device_of(link)
    }

    /// The device's hello on a link: its roots.
    pub fn hello(&self, link: u32, params: &Value) {
        let roots = strings_at(params, "/limits/roots");
        self.lock().links.hello(link, roots);
    }

    /// What the device said on the newest link that said hello, open or not.
    pub fn latest(&self) -> Option<LinkFacts> {
        self.lock().links.latest().cloned()
    }

    /// `initialize` was answered on a link: it is ready, and the deletes kept for the device
    /// go now.
    pub fn ready(self: &Arc<Self>, peer: &Arc<Peer>, result: &Value) {
        let capabilities = harness::lembas::answers::listed_capabilities(result);
        let deletes = capabilities.iter().any(|c| c == "delete");
        let connection = result
            .pointer("/_meta/lembas/connection")
            .and_then(Value::as_str)
            .map(String::from);
        self.lock()
            .links
            .ready(peer.link(), capabilities, connection);
        let facts = self.link(peer.link()).unwrap_or_default();
        let redeliver = deletes && !self.breaks(ids::INSTANCE_DELETE_REDELIVER);
        let reattach = !self.breaks(ids::INSTANCE_REATTACH_STATUS);
        // The turns to reattach are those cut short before this link was ready: taken now, not
        // when the task below runs, by which time this link may have sent turns of its own.
        let incomplete = self.incomplete(&facts.device);
        let (chats, peer) = (self.clone(), peer.clone());
        tokio::spawn(async move {
            if redeliver {
                chats.redeliver(&peer, &facts.device).await;
            }
            if reattach {
                chats.reattach(&peer, &facts, incomplete).await;
            }
        });
    }

    /// A link ended.
    pub fn closed(&self, link: u32) {
        self.lock().links.closed(link);
    }

    /// The newest link that is open and initialized, waiting up to `within` for one.
    pub async fn ready_link(
        &self,
        hub: &Arc<Hub>,
        within: Duration,
    ) -> Result<(Arc<Peer>, LinkFacts), String> {
        self.ready_link_of(hub, within, None).await
    }

    /// The newest open, initialized link of `device` (`device-3`: the device that linked with
    /// the third token), or of any device when `None`, waiting up to `within` for one.
    pub async fn ready_link_of(
        &self,
        hub: &Arc<Hub>,
        within: Duration,
        device: Option<&str>,
    ) -> Result<(Arc<Peer>, LinkFacts), String> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let newest = match device {
                None => hub.current().filter(|p| !p.is_closed()),
                Some(device) => {
                    // The device's links, taken before the hub's lock: never one lock in
                    // the other.
                    let links = self.lock().links.links_of(device);
                    hub.newest_open(|link| links.contains(&link))
                }
            };
            if let Some(peer) = newest
                && let Some(facts) = self.link(peer.link()).filter(|f| f.ready)
            {
                return Ok((peer, facts));
            }
            if tokio::time::Instant::now() >= deadline {
                let which =
                    device.map_or_else(|| "device".to_string(), |d| format!("device `{d}`"));
                return Err(format!(
                    "no {which} was linked and initialized within {}",
                    humantime::format_duration(within)
                ));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}
