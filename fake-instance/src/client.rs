//! The instance as an ACP client on each link: it routes what the device sends to the room of
//! its method ([`crate::methods`]: hello, initialize, the cards, deleted sessions, …), keeps each
//! link's state for them, and runs the link-wide monitors on everything the device sends.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use harness::engine::{Applies, Behaviour, Hub, Intent};
use harness::finding::Finding;
use harness::jsonrpc::{IncomingRequest, LinkEvent, Peer};
use harness::lembas::{Discovery, Spec, methods};
use harness::rules::Misbehaviours;
use harness::scenario::Mode;
use serde_json::Value;

use crate::applicability::Applicability;
use crate::chats::Chats;
use crate::methods::links::{self, Links, OnLink};
use crate::methods::{
    cards, hello, initialize, prompt, session_delete, session_new, unknown_method,
};
use crate::settings::{CardPolicy, ClientKind};

/// How the client behaves.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// The spec the device is expected to implement.
    pub spec: Spec,
    /// Whether the client sends initialize itself.
    pub initialize: Mode,
    /// LLeMbas or a plain ACP client.
    pub client: ClientKind,
    /// The rules to break.
    pub misbehave: Misbehaviours,
    /// How long a device may take to say hello, and to answer a request.
    pub patience: Duration,
    /// How the person answers cards.
    pub cards: CardPolicy,
    /// The link is the device's standard input and output (`serve --stdio`): this client is
    /// an editor's stand-in; no hello comes, and initialize goes at once.
    pub stdio: bool,
}

/// Every room's faults, resolved once from the rules to break.
#[derive(Debug, Clone, Copy)]
struct Faults {
    hello: hello::Faults,
    initialize: initialize::Faults,
    cards: cards::Faults,
    delete: session_delete::Faults,
    unknown: unknown_method::Faults,
}

impl Faults {
    fn of(misbehave: &Misbehaviours) -> Self {
        Self {
            hello: hello::Faults::of(misbehave),
            initialize: initialize::Faults::of(misbehave),
            cards: cards::Faults::of(misbehave),
            delete: session_delete::Faults::of(misbehave),
            unknown: unknown_method::Faults::of(misbehave),
        }
    }
}

/// The client model of fake-instance.
#[derive(Debug)]
pub struct ClientModel {
    config: ClientConfig,
    faults: Faults,
    discovery: Arc<RwLock<Discovery>>,
    links: Links,
    /// The chats the simulated web UI keeps.
    pub chats: Arc<Chats>,
    /// Every session the client has known on any link of the run.
    known: Mutex<HashSet<String>>,
    /// The device's turns finished on any link of the run: none may start again on another.
    finished: Mutex<harness::lembas::turn_model::FinishedTurns>,
    /// When this instance last closed each device's link with 4400.
    closed_4400: hello::Closed4400,
    /// Whether the scenario's steps apply to the device.
    applicability: Option<Applicability>,
    /// The catalogue's shape checks of the device's messages, and this side's shape
    /// misbehaviours, on every link: made at the first link, so that reading the catalogue
    /// does not hold up the start (the ready line comes in a few milliseconds).
    shapes: std::sync::OnceLock<Option<Arc<dyn harness::jsonrpc::MessageWatch>>>,
}

impl ClientModel {
    /// A model that serves `discovery` (shared with the HTTP side, which may change it).
    pub fn new(config: ClientConfig, discovery: Arc<RwLock<Discovery>>, chats: Arc<Chats>) -> Self {
        Self {
            shapes: std::sync::OnceLock::new(),
            faults: Faults::of(&config.misbehave),
            config,
            discovery,
            links: Arc::new(Mutex::new(HashMap::new())),
            chats,
            known: Mutex::new(Default::default()),
            finished: Mutex::new(Default::default()),
            closed_4400: Default::default(),
            applicability: None,
        }
    }

    /// Judges a scenario's steps against what the device claimed.
    pub fn with_applicability(mut self, applicability: Applicability) -> Self {
        self.applicability = Some(applicability);
        self
    }

    fn discovery(&self) -> Discovery {
        self.discovery
            .read()
            .map(|d| d.clone())
            .unwrap_or_else(|_| Discovery::for_protocols(None))
    }

    /// The params of the initialize this client sends on a link of `protocol`.
    pub fn initialize_params(&self, protocol: u8) -> Value {
        initialize::params(self.config.client, protocol, &self.faults.initialize)
    }

    /// `link`, with what the rooms need to act on it.
    fn on<'a>(&'a self, hub: &'a Arc<Hub>, peer: &'a Arc<Peer>) -> OnLink<'a> {
        OnLink {
            hub,
            peer,
            links: &self.links,
            chats: &self.chats,
        }
    }

    /// The device's hello: judged, and answered with initialize unless the link is done with
    /// or initialize is the scenario's (manual) to send.
    fn on_hello(&self, link: &OnLink<'_>, params: &Value) {
        let allowed = self.discovery().protocol_for_device();
        let Some(protocol) = hello::on_hello(
            link,
            params,
            allowed,
            self.config.spec,
            &self.closed_4400,
            self.faults.hello,
        ) else {
            return;
        };
        if self.config.initialize == Mode::Manual || self.faults.initialize.not_after_hello {
            return;
        }
        let init = self.initialize_params(protocol);
        initialize::after_hello(
            link,
            params,
            init,
            self.config.patience,
            &self.faults.initialize,
        );
    }

    /// The link-wide monitors ([`crate::monitor::LinkWatch`]): every message of the device's,
    /// checked against what the link has said so far.
    fn watch(&self, hub: &Arc<Hub>, peer: &Arc<Peer>, event: &LinkEvent) {
        let found = {
            let mut links = links::lock(&self.links);
            // The sessions the client knows (its chats, any it named on an earlier or another
            // link) are known on a new link too: a turn running across a relink reports there.
            // Told once, when the link's first message comes; the link learns the rest itself.
            if !links.get(&peer.link()).is_some_and(|s| s.seeded) {
                let mut seed = self.chats.session_ids();
                if let Ok(known) = self.known.lock() {
                    seed.extend(known.iter().cloned());
                }
                for state in links.values() {
                    seed.extend(state.watch.sessions().cloned());
                }
                let state = links.entry(peer.link()).or_default();
                for session in &seed {
                    state.watch.know(session);
                }
                state.seeded = true;
            }
            let watch = &mut links.entry(peer.link()).or_default().watch;
            match event {
                LinkEvent::Notification { method, params, .. } => watch.incoming(method, params),
                LinkEvent::Request(request) => watch.incoming(&request.method, &request.params),
                LinkEvent::Response {
                    method,
                    request_params,
                    outcome,
                    raw,
                } => watch.response(
                    raw.get("id").unwrap_or(&Value::Null),
                    method,
                    request_params,
                    &outcome.clone().map_err(|e| e.to_value()),
                ),
                LinkEvent::Closed(_) => Vec::new(),
            }
        };
        let found = found
            .into_iter()
            .chain(self.across_links(peer.link(), event));
        for finding in found {
            hub.findings().push(finding.on_link(peer.link()));
        }
    }

    /// What the run's links show together: a turn finished on one that starts on another.
    fn across_links(&self, link: u32, event: &LinkEvent) -> Option<Finding> {
        let Ok(mut finished) = self.finished.lock() else {
            return None;
        };
        match event {
            LinkEvent::Notification { method, params, .. } if method == methods::LEMBAS_EVENT => {
                finished.event(link, params)
            }
            LinkEvent::Response {
                method,
                request_params,
                outcome,
                ..
            } if method == methods::SESSION_PROMPT => {
                finished.answered(
                    link,
                    request_params,
                    &outcome.clone().map_err(|e| e.to_value()),
                );
                None
            }
            _ => None,
        }
    }

    /// A link went: the sessions it knew are remembered for the links to come.
    fn closed(&self, peer: &Arc<Peer>) {
        if let Ok(mut links) = self.links.lock()
            && let Some(ended) = links.remove(&peer.link())
            && let Ok(mut known) = self.known.lock()
        {
            known.extend(ended.watch.sessions().cloned());
        }
        self.chats.closed(peer.link());
    }

    /// The device answered a request of this client's.
    fn answered(&self, link: &OnLink<'_>, method: &str, request: &Value, outcome: &Outcome) {
        match method {
            methods::SESSION_PROMPT if outcome.is_ok() => {
                prompt::answered(self.applicability.as_ref());
            }
            methods::SESSION_NEW => {
                if let Ok(result) = outcome {
                    session_new::answered(&self.chats, link.peer.link(), request, result);
                }
            }
            methods::INITIALIZE => initialize::on_answer(
                link,
                request,
                outcome,
                self.config.spec,
                self.config.patience,
                &self.faults.initialize,
            ),
            _ => {}
        }
    }
}

/// A response's outcome, as a link event carries it.
type Outcome = Result<Value, harness::jsonrpc::RpcError>;

impl Behaviour for ClientModel {
    fn watch(&self) -> Option<Arc<dyn harness::jsonrpc::MessageWatch>> {
        self.shapes
            .get_or_init(|| {
                harness::shapes::ShapeWatch::shared(
                    harness::rules::catalogue(),
                    harness::rules::Binds::Device,
                    &self.config.misbehave,
                    self.config.spec.as_str(),
                )
            })
            .clone()
    }

    fn opener(&self) -> Option<&'static str> {
        self.faults.initialize.opener()
    }

    fn on_open(&self, hub: &Arc<Hub>, peer: &Arc<Peer>) {
        // An editor speaks first: initialize at once, and no hello to wait for (spec, intro).
        if self.config.stdio {
            if self.config.initialize == Mode::Auto {
                let params = self.initialize_params(2);
                initialize::send(peer, params, self.config.patience, peer.link());
            }
            return;
        }
        hello::watch_for_hello(hub, peer, &self.links, self.config.patience);
    }

    fn observe(&self, hub: &Arc<Hub>, peer: &Arc<Peer>, event: &LinkEvent) {
        let link = self.on(hub, peer);
        let stdio = self.config.stdio;
        match event {
            LinkEvent::Notification { method, params, .. } => {
                hello::first_message(&link, method, stdio);
                if method == methods::LEMBAS_HELLO {
                    self.chats.hello(peer.link(), params);
                    self.on_hello(&link, params);
                }
                if method == methods::LEMBAS_SESSION_DELETED {
                    session_delete::on_deleted(&link, params, &self.faults.delete);
                }
                self.chats.notified(peer.link(), method, params);
            }
            LinkEvent::Request(request) => hello::first_message(&link, &request.method, stdio),
            LinkEvent::Response { .. } => {}
            LinkEvent::Closed(_) => return self.closed(peer),
        }
        self.watch(hub, peer, event);
        if let LinkEvent::Response {
            method,
            request_params,
            outcome,
            ..
        } = event
        {
            self.answered(&link, method, request_params, outcome);
        }
    }

    fn observe_sent(&self, _hub: &Arc<Hub>, peer: &Arc<Peer>, message: &Value) {
        prompt::sent(&self.chats, peer.link(), message);
        if let Ok(mut links) = self.links.lock() {
            links.entry(peer.link()).or_default().watch.sent(message);
        }
    }

    fn applies(&self, hub: &Arc<Hub>, intent: Intent<'_>) -> Applies {
        self.applicability
            .as_ref()
            .map_or(Applies::Yes, |a| a.applies(hub, intent))
    }

    fn answer(&self, _hub: &Arc<Hub>, peer: &Arc<Peer>, request: &IncomingRequest) -> bool {
        if self
            .links
            .lock()
            .is_ok_and(|l| l.get(&peer.link()).is_some_and(|s| s.stalled))
        {
            return true;
        }
        if cards::CARD_METHODS.contains(&request.method.as_str()) {
            let policy = &self.config.cards;
            cards::answer(peer, request, policy, &self.chats, &self.faults.cards);
            return true;
        }
        // Any other request is one the client does not have.
        unknown_method::answer(peer, request, &self.faults.unknown)
    }
}
