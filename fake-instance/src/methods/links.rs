//! What the client remembers of each link while it is up, shared by the rooms that read or
//! change it (hello, initialize, a delete it gives up on); a leaf, so that every room may use it
//! and none has to reach back into the client.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use harness::engine::Hub;
use harness::finding::Finding;
use harness::jsonrpc::Peer;

use crate::chats::Chats;
use crate::monitor;

/// One link's state, as far as the client's rooms need it.
#[derive(Debug, Default)]
pub(crate) struct LinkState {
    /// The device has sent something on the link.
    pub spoke: bool,
    /// The protocol the device's hello said (`None`: no hello yet).
    pub hello_protocol: Option<u8>,
    /// The link-wide monitors.
    pub watch: monitor::LinkWatch,
    /// The watch has been told the sessions the client knew when the link came.
    pub seeded: bool,
    /// Nothing more is answered on this link (misbehaving on instance.deleted.ignore).
    pub stalled: bool,
}

/// Every link's state, by link number.
pub(crate) type Links = Arc<Mutex<HashMap<u32, LinkState>>>;

/// The links' state, taken even when a holder panicked: the checks go on.
pub(crate) fn lock(links: &Links) -> MutexGuard<'_, HashMap<u32, LinkState>> {
    links.lock().unwrap_or_else(|p| p.into_inner())
}

/// A message's link, with what a room needs to act on it and report on it.
pub(crate) struct OnLink<'a> {
    /// Where findings go, and the other links.
    pub hub: &'a Arc<Hub>,
    /// The link the message came on.
    pub peer: &'a Arc<Peer>,
    /// Every link's state.
    pub links: &'a Links,
    /// The chats the simulated web UI keeps.
    pub chats: &'a Arc<Chats>,
}

impl OnLink<'_> {
    /// The protocol the link's hello said (`None`: no hello yet).
    pub(crate) fn hello_protocol(&self) -> Option<u8> {
        self.links
            .lock()
            .ok()
            .and_then(|l| l.get(&self.peer.link()).and_then(|s| s.hello_protocol))
    }

    /// Reports `finding` against this link.
    pub(crate) fn found(&self, finding: Finding) {
        self.hub.findings().push(finding.on_link(self.peer.link()));
    }
}
