//! What the client knows of each link and the device behind it (its hello, its initialize),
//! and how the chats follow a link's life: hello, ready (when kept deletes go and cut turns
//! are reattached), closed, and waiting for a ready link to act on.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use harness::engine::Hub;
use harness::jsonrpc::Peer;
use harness::rules::ids;
use serde_json::{Value, json};

use super::Chats;

/// What the client knows of a link's device, from its hello and initialize.
#[derive(Debug, Clone, Default)]
pub struct LinkFacts {
    /// The device said hello: `roots` are its.
    pub hello: bool,
    /// `initialize` was answered: the link is ready for requests.
    pub ready: bool,
    /// The capabilities the device listed.
    pub capabilities: Vec<String>,
    /// Its roots (hello's `limits.roots`).
    pub roots: Vec<String>,
    /// Which device it is (by the token it linked with; never the token itself).
    pub device: String,
    /// The login the device dialled through (initialize's `_meta.lembas.connection`): the
    /// first part of the device's own refs to this instance's models.
    pub connection: Option<String>,
}

/// The facts of every open link, which device each link is, and the newest device's facts.
#[derive(Debug, Default)]
pub(super) struct Links {
    /// Which device each link is.
    devices: HashMap<u32, String>,
    facts: HashMap<u32, LinkFacts>,
    /// What the newest link that said hello said, kept after it closes: between two links the
    /// device is still the one it was.
    latest: Option<(u32, LinkFacts)>,
}

impl Links {
    pub(super) fn get(&self, link: u32) -> Option<&LinkFacts> {
        self.facts.get(&link)
    }

    pub(super) fn set_device(&mut self, link: u32, device: &str) {
        self.devices.insert(link, device.to_string());
    }

    /// Which device a link is (`""` when the server did not say).
    pub(super) fn device_of(&self, link: u32) -> String {
        self.devices.get(&link).cloned().unwrap_or_default()
    }

    /// The links the device `device` linked on, open or not.
    pub(super) fn links_of(&self, device: &str) -> HashSet<u32> {
        self.devices
            .iter()
            .filter(|(_, d)| d.as_str() == device)
            .map(|(link, _)| *link)
            .collect()
    }

    /// The device said hello on a link, with its roots.
    pub(super) fn hello(&mut self, link: u32, roots: Vec<String>) {
        let facts = self.facts.entry(link).or_default();
        facts.hello = true;
        facts.roots = roots;
        let facts = facts.clone();
        self.remember(link, facts);
    }

    /// A link's `initialize` was answered, listing these capabilities.
    pub(super) fn ready(
        &mut self,
        link: u32,
        capabilities: Vec<String>,
        connection: Option<String>,
    ) {
        let device = self.device_of(link);
        let facts = self.facts.entry(link).or_default();
        facts.ready = true;
        facts.capabilities = capabilities;
        facts.device = device;
        facts.connection = connection;
        let facts = facts.clone();
        self.remember(link, facts);
    }

    fn remember(&mut self, link: u32, facts: LinkFacts) {
        if self
            .latest
            .as_ref()
            .is_none_or(|(newest, _)| *newest <= link)
        {
            self.latest = Some((link, facts));
        }
    }

    pub(super) fn latest(&self) -> Option<&LinkFacts> {
        self.latest.as_ref().map(|(_, facts)| facts)
    }

    pub(super) fn closed(&mut self, link: u32) {
        self.facts.remove(&link);
    }

    /// What the control API shows of the open links, in the order they came.
    pub(super) fn snapshot(&self) -> Vec<Value> {
        let mut links: Vec<Value> = self
            .facts
            .iter()
            .map(|(link, facts)| {
                json!({
                    "link": link,
                    "device": facts.device,
                    "ready": facts.ready,
                    "capabilities": facts.capabilities,
                    "roots": facts.roots,
                })
            })
            .collect();
        links.sort_by_key(|l| l["link"].as_u64());
        links
    }
}

/// The strings of a JSON array found at `pointer` (none when it is not there).
fn strings_at(value: &Value, pointer: &str) -> Vec<String> {
    value
        .pointer(pointer)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|s| s.as_str().map(String::from))
        .collect()
}

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
        let capabilities = strings_at(result, "/_meta/lembas/capabilities");
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
