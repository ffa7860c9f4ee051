//! The lvmh plugin: one pi session's link to the daemon (spec, "Transport 1" and "Reconnect &
//! buffering"). It numbers every daemon-bound event, keeps the last
//! [`BUFFER_CAP`](crate::lvmh::BUFFER_CAP) of them,
//! dials and redials forever with capped, jittered exponential backoff, says hello with the
//! session snapshot, resends what the daemon lacks after `welcome`, and turns the daemon's
//! `prompt` and `abort` into a scripted agent's runs. The agent never waits for the link: an
//! event is numbered and kept at once, and goes out when a link is up.
//!
//! fake-device runs it as the plugin under a daemon's test; the fake daemon runs it for each
//! spawn (a session "in a container").
//!
//! Its jobs, one a module: `config` (how it runs, its backoff), `lifecycle` (its start and its
//! stops), `dialling` (the link, with backoff), `outbox` (the numbered, buffered events, their
//! replay, and what a daemon serves back compared), `fingerprint` (an event's), `inbox` (the
//! daemon's frames, checked and followed) and `agent` (the scripted agent's runs).

mod agent;
mod config;
mod dialling;
mod fingerprint;
mod inbox;
mod lifecycle;
mod outbox;

use std::collections::VecDeque;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio::sync::{Notify, mpsc, watch};

use crate::engine::Hub;
use crate::jsonrpc::Peer;
use fingerprint::Print;

pub use config::{AgentScript, FrameCheck, PluginConfig, backoff};

/// The plugin's state.
#[derive(Default)]
struct State {
    /// Every event given out, `(seq, type)`, oldest first (at most [`outbox::SENT_KEPT`]).
    sent: VecDeque<(u64, String)>,
    /// The fingerprint of each of the last events given out, by seq (at most
    /// [`fingerprint::PRINTS_KEPT`]).
    prints: VecDeque<(u64, Print)>,
    /// The last seq given out.
    seq: u64,
    /// Events the daemon may lack, oldest first.
    buffer: VecDeque<Value>,
    /// The highest seq dropped from a full buffer: a daemon whose `lastSeq` is below it lost
    /// the events between.
    dropped_up_to: u64,
    /// How many events the last welcome had resent.
    replayed: u64,
    /// No dial before this (the plugin is unplugged).
    unplugged_until: Option<tokio::time::Instant>,
    /// The number of the last link a daemon welcomed.
    last_welcomed: Option<u32>,
    /// The seqs that went out on a link, at most [`outbox::SENT_KEPT`] (a reload compares with them).
    delivered: std::collections::BTreeSet<u64>,
    /// The link the daemon welcomed, while it is up.
    live: Option<Arc<Peer>>,
    /// The link dialled and not yet welcomed.
    waiting: Option<Arc<Peer>>,
    /// The daemon's `lastSeq` in each welcome, oldest first (what a report shows).
    welcomes: Vec<u64>,
    /// The session snapshot now (a rename changes it; the next hello carries it).
    session: Value,
}

/// A running plugin.
pub struct Plugin {
    config: PluginConfig,
    hub: Arc<Hub>,
    state: Mutex<State>,
    prompts: mpsc::Sender<String>,
    abort: Notify,
    aborted: AtomicBool,
    /// Set once: the plugin stops (quit or killed).
    stop: watch::Sender<bool>,
    /// Prompts taken and not yet run to their end.
    pending: std::sync::atomic::AtomicUsize,
    check: Option<FrameCheck>,
}

/// WebSocket close 1001: the plugin's process goes away.
const GOING_AWAY: u16 = 1001;

impl Plugin {
    /// The hub its links are on (a scenario's steps run over it).
    pub fn hub(&self) -> &Arc<Hub> {
        &self.hub
    }

    /// Its configuration.
    pub fn config(&self) -> &PluginConfig {
        &self.config
    }

    /// The session's id.
    pub fn session_id(&self) -> String {
        self.config.session_id()
    }

    /// The session snapshot now (a rename changes it).
    pub fn snapshot(&self) -> Value {
        self.state
            .lock()
            .map(|s| s.session.clone())
            .unwrap_or_else(|_| self.config.session.clone())
    }
}
