//! What the client knows of each link and the device behind it (its hello, its initialize);
//! `link_life` follows a link's life with it.

use std::collections::{HashMap, HashSet};

use serde_json::{Value, json};

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
pub(super) fn strings_at(value: &Value, pointer: &str) -> Vec<String> {
    value
        .pointer(pointer)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|s| s.as_str().map(String::from))
        .collect()
}
