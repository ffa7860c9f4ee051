//! The fake daemon's model: the plugin links it welcomes and checks, the browser links it feeds,
//! and the store between them (spec, "Transport 1" and "Transport 3").
//!
//! Every link of the run is on one hub, so a scenario's `expect` steps see the plugins' and
//! the browsers' frames alike; which a link is comes from the route that accepted it.
//!
//! Its jobs, one a module: [`plugin_links`] (a plugin's hello, welcome and close),
//! [`events`] (a plugin's events judged, kept and shown), [`sequence`] (their seqs and the
//! gaps a replay leaves), [`browsers`] (the web's links and what they are told),
//! [`web_requests`] (what the REST API asks of the daemon) and [`faults`] (the daemon's
//! misfortunes a scenario acts out).

mod browsers;
mod events;
mod faults;
mod plugin_links;
mod sequence;
mod web_requests;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use harness::engine::{Behaviour, Hub};
use harness::finding::Finding;
use harness::jsonrpc::{LinkEvent, Peer};
use harness::rules::Misbehaviours;
use serde_json::Value;

use super::store::Store;

/// What the route that accepted a link says it is, in the connection's peer name.
pub const BROWSER_PREFIX: &str = "browser ";

/// One plugin link, as the monitors follow it.
#[derive(Debug, Default)]
struct AgentLink {
    /// The session its hello named.
    session: Option<String>,
    /// The seq the first event after welcome must have (the daemon's `lastSeq + 1`).
    replay_from: Option<u64>,
    /// The seq of its last event.
    last_seq: Option<u64>,
    /// The highest seq the daemon had seen of the session when it welcomed this link (deltas
    /// included, which are not persisted: a plugin need not send them again).
    seen_at_welcome: u64,
    /// The link, to drop it.
    peer: Option<Arc<Peer>>,
}

/// What the daemon follows of each session across its links.
#[derive(Debug, Default)]
struct SessionSeen {
    /// The highest seq seen, on any link.
    max_seq: u64,
    /// The role of the message open now (between its start and its end).
    open_role: Option<String>,
    /// Whether a run is open (between its agent_start and its agent_end).
    run_open: bool,
    /// Whether the daemon has every event of the session so far: it met it at seq 1 and no
    /// event was lost since (to a full buffer). Only then is a delta between two messages,
    /// or a run's end without its start, judged: otherwise the start may be what was lost.
    whole: Option<bool>,
}

/// One browser link.
#[derive(Debug)]
struct BrowserLink {
    peer: Arc<Peer>,
    subscribed: Option<String>,
    /// The session it last unsubscribed from, whose deltas a daemon told to break the rule
    /// that way still streams to it.
    left: Option<String>,
}

/// The daemon.
pub struct Daemon {
    store: Mutex<Store>,
    agents: Mutex<HashMap<u32, AgentLink>>,
    /// The plugin link of each online session.
    online: Mutex<HashMap<String, Arc<Peer>>>,
    browsers: Mutex<HashMap<u32, BrowserLink>>,
    /// The spawn jobs last told, so a browser that opens while a job runs hears of it too
    /// (its open and a spawn can cross).
    spawn_jobs: Mutex<Vec<Value>>,
    misbehave: Misbehaviours,
    /// How long a lost event may wait for its `buffer_overflow` notice.
    patience: Duration,
    prompts: std::sync::atomic::AtomicU64,
    /// Each session as the monitors follow it.
    seen: Mutex<HashMap<String, SessionSeen>>,
    /// Until when the agent link refuses plugins (a daemon that is down).
    refuse_until: Mutex<Option<tokio::time::Instant>>,
    /// Sessions whose first event after a welcome skipped seqs, with what that lost, until a
    /// `buffer_overflow` notice excuses it (on that link or the session's next one).
    gaps: Arc<Mutex<HashMap<String, String>>>,
    /// The plugin rules' shapes every frame is checked against, and the daemon's own shape
    /// misbehaviours (on its frames and its REST answers).
    shapes: Arc<harness::shapes::ShapeWatch>,
    /// What the web was shown of each session, and what it fetched.
    web: super::web_seen::WebSeen,
}

impl Daemon {
    /// A daemon over `store`.
    pub fn new(store: Store, misbehave: Misbehaviours, patience: Duration) -> Daemon {
        Daemon {
            store: Mutex::new(store),
            agents: Mutex::new(HashMap::new()),
            online: Mutex::new(HashMap::new()),
            browsers: Mutex::new(HashMap::new()),
            spawn_jobs: Mutex::new(Vec::new()),
            patience,
            prompts: std::sync::atomic::AtomicU64::new(0),
            gaps: Arc::default(),
            refuse_until: Mutex::new(None),
            seen: Mutex::new(HashMap::new()),
            web: Default::default(),
            // Plugins' rules bind the dialing side.
            shapes: Arc::new(harness::lvmh::shape_watch(
                harness::rules::Binds::Device,
                &misbehave,
            )),
            misbehave,
        }
    }

    /// The shape checks and bends of this daemon's links and answers.
    pub fn shapes(&self) -> &harness::shapes::ShapeWatch {
        &self.shapes
    }

    /// The rules this daemon breaks.
    pub fn misbehave(&self) -> &Misbehaviours {
        &self.misbehave
    }

    /// The store, for settings.
    pub fn with_store<T>(&self, f: impl FnOnce(&mut Store) -> T) -> Option<T> {
        self.store.lock().ok().map(|mut s| f(&mut s))
    }

    /// What the web was shown and fetched.
    pub fn web(&self) -> &super::web_seen::WebSeen {
        &self.web
    }
}

/// Reports `rule` broken by `frame` on `peer`'s link, with the frame (cut) as the detail.
fn find(hub: &Arc<Hub>, peer: &Arc<Peer>, rule: &str, why: String, frame: &Value) {
    let detail = harness::size::cut_clone(frame).to_string();
    hub.findings().push(
        Finding::new(rule, why)
            .with_detail(detail)
            .on_link(peer.link()),
    );
}

impl Behaviour for Daemon {
    fn on_open(&self, _hub: &Arc<Hub>, peer: &Arc<Peer>) {
        if peer.remote().starts_with(BROWSER_PREFIX) {
            self.browser_opened(peer);
        } else {
            self.plugin_opened(peer);
        }
    }

    fn observe(&self, hub: &Arc<Hub>, peer: &Arc<Peer>, event: &LinkEvent) {
        match event {
            LinkEvent::Notification { method, raw, .. } => {
                if peer.remote().starts_with(BROWSER_PREFIX) {
                    self.on_browser(peer, method, raw);
                } else {
                    self.on_event(hub, peer, method, raw);
                }
            }
            LinkEvent::Closed(_) => self.on_closed(peer),
            _ => {}
        }
    }

    fn framing(&self) -> harness::jsonrpc::Framing {
        harness::lvmh::framing()
    }

    fn watch(&self) -> Option<Arc<dyn harness::jsonrpc::MessageWatch>> {
        Some(self.shapes.clone())
    }
}
