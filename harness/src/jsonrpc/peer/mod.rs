//! One JSON-RPC 2.0 peer over one [`Connection`]: ids, the table of pending requests with their
//! deadlines, the journal, and findings for whatever the peer sends that is not JSON-RPC.
//!
//! The parts, by job: `sending` puts messages on the link (through the gate of the link's
//! opening request), `requests` keeps the requests in flight both ways, `reading` reads and
//! classifies what arrives, and `link` ends and paces the link.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::watch;

use super::gate::Gate;
use super::message::RpcError;
use super::watch::{MessageWatch, Part};
use crate::finding::{Finding, Findings};
use crate::journal::{Direction, Journal};
use crate::transport::{CloseInfo, Connection, Outbox};

mod link;
mod pending;
mod reading;
mod requests;
mod sending;

use pending::PendingTable;

/// Rule ids for what any JSON-RPC peer must not do; they bind both sides.
pub mod rules {
    /// Every message is JSON.
    pub const NOT_JSON: &str = "jsonrpc.json";
    /// Every message is a JSON-RPC 2.0 object.
    pub const ENVELOPE: &str = "jsonrpc.envelope";
    /// A response answers a request that was sent and not yet answered.
    pub const UNKNOWN_RESPONSE: &str = "jsonrpc.response.id";
    /// A request's id is not that of another request of its sender still waiting for an answer.
    pub const REQUEST_ID: &str = "jsonrpc.request.id";
    /// Messages are text frames.
    pub const BINARY: &str = "jsonrpc.text";
}

/// A request the peer sent us, waiting for an answer.
#[derive(Debug, Clone)]
#[allow(missing_docs)] // fields whose names say it all go undocumented
pub struct IncomingRequest {
    /// The peer's id.
    pub id: Value,
    pub method: String,
    /// The params, or `null`.
    pub params: Value,
    /// The whole message as received.
    pub raw: Value,
}

/// Something that happened on a link, handed to the [`Dispatch`] in arrival order.
#[derive(Debug, Clone)]
pub enum LinkEvent {
    /// The peer sent a request.
    Request(IncomingRequest),
    /// The peer sent a notification.
    Notification {
        /// The method.
        method: String,
        /// The params, or `null`.
        params: Value,
        /// The whole message as received.
        raw: Value,
    },
    /// The peer answered one of our requests (already delivered to whoever waits for it).
    Response {
        /// The method of the request it answers.
        method: String,
        /// What we sent as params (with strings over 64 KiB cut, when they held over 1 MiB).
        request_params: Value,
        /// The result or the error.
        outcome: Result<Value, RpcError>,
        /// The whole message as received.
        raw: Value,
    },
    /// The link ended: `Some` with the peer's close code, `None` when it vanished.
    Closed(Option<CloseInfo>),
}

/// Where a peer's traffic goes: the scenario engine, the protocol model, the monitors.
pub trait Dispatch: Send + Sync + 'static {
    /// Called for every event, in order, from the link's reader task. Must not block: spawn
    /// anything slow.
    fn on_event(&self, peer: &Arc<Peer>, event: LinkEvent);

    /// Called for every message this side sends, after it went out.
    fn on_sent(&self, _peer: &Arc<Peer>, _message: &Value) {}
}

/// Why an outgoing request got no answer.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RequestError {
    /// The deadline passed.
    #[error("no answer to `{method}` within {after:?}")]
    Timeout {
        /// The method asked.
        method: String,
        /// How long we waited.
        after: Duration,
    },
    /// The link closed before the answer came.
    #[error("the link closed before `{method}` was answered")]
    Closed {
        /// The method asked.
        method: String,
    },
    /// The request was never sent: the link's opening request had not been answered with a
    /// result when its deadline passed.
    #[error(
        "`{method}` was never sent: `{opener}` was not answered with a result within {after:?}"
    )]
    Held {
        /// The method asked.
        method: String,
        /// The request that opens the link.
        opener: String,
        /// How long it waited.
        after: Duration,
    },
}

/// Settings of one peer.
#[derive(Clone, Default)]
pub struct PeerConfig {
    /// The link's number in this run, counting from 1.
    pub link: u32,
    /// Sees every message read and sent (the protocol's always-on checks, misbehaviours).
    pub watch: Option<Arc<dyn MessageWatch>>,
    /// How the link's frames are read (JSON-RPC unless the family says otherwise).
    pub framing: super::framing::Framing,
    /// The request that opens the link: until it is answered with a result, every other
    /// request and notification this side sends is held, in order, and sent once it is.
    pub opener: Option<&'static str>,
}

impl std::fmt::Debug for PeerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerConfig")
            .field("link", &self.link)
            .field("watch", &self.watch.is_some())
            .field("framing", &self.framing)
            .field("opener", &self.opener)
            .finish()
    }
}

/// One JSON-RPC peer on one link.
pub struct Peer {
    link: u32,
    remote: String,
    out: Outbox,
    next_id: AtomicI64,
    pending: Mutex<PendingTable>,
    /// The peer's requests not yet answered, with their methods (an id may come again once
    /// answered).
    unanswered: Mutex<HashMap<String, String>>,
    watch: Option<Arc<dyn MessageWatch>>,
    framing: super::framing::Framing,
    gate: Option<Gate>,
    journal: Arc<Journal>,
    findings: Arc<Findings>,
    dispatch: Arc<dyn Dispatch>,
    closed_tx: watch::Sender<Option<Option<CloseInfo>>>,
    we_closed: AtomicBool,
}

impl std::fmt::Debug for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Peer")
            .field("link", &self.link)
            .field("remote", &self.remote)
            .finish()
    }
}

/// Ids are compared by their JSON text so that `1` and `"1"` stay different, as the spec wants.
fn id_key(id: &Value) -> String {
    id.to_string()
}

impl Peer {
    /// Starts a peer on a connection: spawns the reader task and returns the handle.
    pub fn start(
        connection: Connection,
        config: PeerConfig,
        journal: Arc<Journal>,
        findings: Arc<Findings>,
        dispatch: Arc<dyn Dispatch>,
    ) -> Arc<Peer> {
        Self::start_after(connection, config, journal, findings, dispatch, |_| {})
    }

    /// Like [`Peer::start`], running `before_reading` before the first message is read: whoever
    /// tracks the link is ready for its messages (a peer may speak the moment the link opens).
    pub fn start_after(
        connection: Connection,
        config: PeerConfig,
        journal: Arc<Journal>,
        findings: Arc<Findings>,
        dispatch: Arc<dyn Dispatch>,
        before_reading: impl FnOnce(&Arc<Peer>),
    ) -> Arc<Peer> {
        let Connection {
            outgoing,
            incoming,
            peer: remote,
        } = connection;
        let (closed_tx, _) = watch::channel(None);
        let peer = Arc::new(Peer {
            link: config.link,
            remote,
            out: outgoing,
            next_id: AtomicI64::new(1),
            pending: Mutex::new(PendingTable::default()),
            unanswered: Mutex::new(HashMap::new()),
            watch: config.watch,
            framing: config.framing,
            gate: config.opener.map(Gate::new),
            journal,
            findings,
            dispatch,
            closed_tx,
            we_closed: AtomicBool::new(false),
        });
        peer.journal.record(
            peer.link,
            Direction::Event,
            json!({"event": "open", "peer": peer.remote}),
        );
        before_reading(&peer);
        tokio::spawn(Arc::clone(&peer).read_loop(incoming));
        peer
    }

    /// This link's number in the run.
    pub fn link(&self) -> u32 {
        self.link
    }

    /// Who the peer is (its address).
    pub fn remote(&self) -> &str {
        &self.remote
    }

    /// Lets the watch change what this side is about to send (a misbehaviour).
    fn bend(&self, part: Part, method: &str, value: &mut Value) {
        if let Some(watch) = &self.watch {
            watch.outgoing(part, method, value);
        }
    }

    /// Lets the watch check what the other side sent.
    fn watch_incoming(&self, part: Part, method: &str, value: Option<&Value>) {
        if let Some(watch) = &self.watch {
            for finding in watch.incoming(part, method, value.unwrap_or(&Value::Null)) {
                self.find(finding);
            }
        }
    }

    /// Records a finding as this link's.
    fn find(&self, finding: Finding) {
        self.findings.push(finding.on_link(self.link));
    }
}

#[cfg(test)]
mod tests;
