//! The device as an ACP agent on each link: hello when the link opens, then the answer to
//! `initialize`, shaped for its harness spec. The monitors check the instance on the way.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use harness::engine::{Behaviour, Hub};
use harness::finding::Finding;
use harness::jsonrpc::{IncomingRequest, LinkEvent, METHOD_NOT_FOUND, Peer, RpcError};
use harness::lembas::{Spec, methods};
use harness::rules::{Misbehaviours, ids};
use serde_json::Value;
use tokio::sync::mpsc;

use crate::client_watch::ClientWatch;
use crate::events::{Client, Quirks, Route};
use crate::link_watch::LinkWatch;
use crate::methods::route::{Work, serve_link};
use crate::methods::{hello, initialize, session_announce, terminal_open};
use crate::monitor;
use crate::sessions::Sessions;
use crate::terminal_watch::TerminalWatch;

/// The signal the device raises when it has answered a link's `initialize`: the instance shows
/// it linked from then on, so a web UI's own steps (its hooks) start there.
pub const INITIALIZED: &str = "device-initialized";

/// What the device is and allows.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// The spec it implements.
    pub spec: Spec,
    /// Advertise only these capabilities (a scenario's reduction); `None`: all of the spec's.
    pub only: Option<Vec<String>>,
    /// The device's name for the instance (the login's connection).
    pub connection: String,
    /// The rules to break.
    pub misbehave: Misbehaviours,
    /// How long the instance may take to send initialize.
    pub patience: Duration,
    /// `remote.terminal`: remote terminals on (capabilities `terminal` and `shell`).
    pub terminal: bool,
    /// The terminals' shell's home instead of the user's (the self-test's).
    pub terminal_home: Option<std::path::PathBuf>,
    /// `remote.terminal_integration`: the terminals' shells start with the rc wrapper that
    /// marks prompts (on unless set false).
    pub terminal_integration: bool,
    /// Speaking plain ACP to an editor on stdin/stdout (`serve --stdio`): no hello, `limits:
    /// null`, and `_lembas/*` methods refused (they are only on the link).
    pub stdio: bool,
    /// How long initialize's answer takes (a scenario's `device.initialize_after`).
    pub initialize_after: Duration,
}

#[derive(Debug, Clone)]
struct LinkState {
    protocol: u8,
    initialized: bool,
    /// The id of the client's initialize, once it came.
    initialize_id: Option<Value>,
    /// Whether initialize has been answered with a result: until then every other request is
    /// refused, as the official ACP SDKs refuse it.
    answered_initialize: bool,
    /// Whether the client said `_meta.lembas`, once initialize came.
    lembas: bool,
    /// The link's session work, taken in arrival order.
    /// Boxed: an unbounded channel allocates its slots in blocks of 32, and a bare `Work` made
    /// each idle link's block ~6 kB.
    work: Option<mpsc::UnboundedSender<Box<Work>>>,
    /// Where the link's clients send, once initialize came.
    route: Option<Arc<RwLock<Route>>>,
    /// What the instance asked on the link and still waits for.
    watch: LinkWatch,
    /// The terminals the instance opened on the link.
    terminals: TerminalWatch,
}

impl Default for LinkState {
    fn default() -> Self {
        Self {
            protocol: 1,
            initialized: false,
            initialize_id: None,
            answered_initialize: false,
            lembas: false,
            work: None,
            route: None,
            watch: LinkWatch::default(),
            terminals: TerminalWatch::default(),
        }
    }
}

impl AgentConfig {
    /// The capabilities listed in initialize: the spec's, less the terminal ones unless remote
    /// terminals are on (`shell` comes only with `terminal`), reduced by the scenario.
    pub fn capabilities(&self) -> Vec<&'static str> {
        initialize::capabilities(
            self.spec,
            self.only.as_deref(),
            self.terminal,
            &initialize::CapabilityFaults::of(&self.misbehave),
        )
    }
}

/// What the rooms the device answers on the link itself get wrong on purpose, resolved once
/// when the device starts.
#[derive(Debug, Clone, Copy)]
struct Faults {
    hello: hello::Faults,
    initialize: initialize::Faults,
    announce: session_announce::Faults,
    terminal: terminal_open::Faults,
    /// The ids of the turns waiting in a queue are forgotten when the link drops.
    queued_forgotten_on_drop: bool,
}

impl Faults {
    fn of(m: &Misbehaviours) -> Faults {
        Faults {
            hello: hello::Faults::of(m),
            initialize: initialize::Faults::of(m),
            announce: session_announce::Faults::of(m),
            terminal: terminal_open::Faults::of(m),
            queued_forgotten_on_drop: m.breaks_way(ids::DEVICE_TURNS_DEDUP, "lost_on_drop"),
        }
    }
}

/// The agent model of fake-device.
#[derive(Debug)]
pub struct AgentModel {
    /// Whether a shared session was announced on some link already.
    announced: std::sync::atomic::AtomicBool,
    config: AgentConfig,
    /// The capabilities listed in initialize.
    capabilities: Vec<&'static str>,
    faults: Faults,
    sessions: Arc<Sessions>,
    terminals: Arc<crate::terminals::Terminals>,
    links: Arc<Mutex<HashMap<u32, LinkState>>>,
    next_protocol: Mutex<u8>,
    /// Every route made, to move those of ended links to the next one.
    routes: Mutex<Vec<std::sync::Weak<RwLock<Route>>>>,
    /// The catalogue's shape checks of the instance's messages, and this side's shape
    /// misbehaviours, on every link.
    shapes: Option<Arc<dyn harness::jsonrpc::MessageWatch>>,
    /// What the device gave its client and what the client asked, across links.
    client_watch: Mutex<ClientWatch>,
    /// Itself, for an answer given later from a task.
    me: std::sync::Weak<AgentModel>,
}

impl AgentModel {
    /// A device with this configuration, over its sessions.
    pub fn new(config: AgentConfig, sessions: Arc<Sessions>) -> Arc<Self> {
        let mut terminals = crate::terminals::Terminals::new(
            config.terminal,
            std::env::temp_dir().join(format!("fake-device-{}", std::process::id())),
            config.misbehave.clone(),
        );
        terminals.home = config.terminal_home.clone();
        terminals.integration = config.terminal_integration;
        let terminals = Arc::new(terminals);
        let shapes = harness::shapes::ShapeWatch::shared(
            harness::rules::catalogue(),
            harness::rules::Binds::Instance,
            &config.misbehave,
            config.spec.as_str(),
        );
        let (capabilities, faults) = (config.capabilities(), Faults::of(&config.misbehave));
        Arc::new_cyclic(|me| Self {
            shapes,
            capabilities,
            faults,
            announced: std::sync::atomic::AtomicBool::new(false),
            config,
            sessions,
            terminals,
            links: Arc::new(Mutex::new(HashMap::new())),
            next_protocol: Mutex::new(1),
            routes: Mutex::new(Vec::new()),
            client_watch: Mutex::new(ClientWatch::default()),
            me: me.clone(),
        })
    }

    /// Judges what the client sent against what the device gave it (sessions, turns,
    /// terminals), and learns from it.
    fn judge_client(&self, peer: &Arc<Peer>, event: &LinkEvent) -> Vec<Finding> {
        let (method, params, request) = match event {
            LinkEvent::Request(request) => (&request.method, &request.params, Some(&request.id)),
            LinkEvent::Notification { method, params, .. } => (method, params, None),
            _ => return Vec::new(),
        };
        let registry = self.sessions.registry();
        let given_before = |id: &str| {
            registry.is_terminal_session(id)
                || (crate::store::is_store_id(id)
                    && registry
                        .store
                        .load_session(id)
                        .ok()
                        .flatten()
                        .is_some_and(|s| s.given))
        };
        let mut found = self
            .client_watch
            .lock()
            .map(|mut w| w.judge(method, params, request.is_some(), given_before))
            .unwrap_or_default();
        if method.starts_with("_lembas/terminal/")
            && self.capabilities().contains(&"terminal")
            && let Ok(mut links) = self.links.lock()
            && let Some(state) = links.get_mut(&peer.link())
        {
            let judged = match request {
                Some(id) if method == methods::LEMBAS_TERMINAL_OPEN => {
                    state.terminals.open(id, params)
                }
                Some(_) => None,
                None => state.terminals.notified(method, params),
            };
            found.extend(judged);
        }
        found
    }

    /// Sets the protocol the next link says in hello (the dialer decides it from discovery).
    pub fn set_next_protocol(&self, protocol: u8) {
        if let Ok(mut next) = self.next_protocol.lock() {
            *next = protocol;
        }
    }

    /// Whether this device was told to break `rule`.
    pub fn breaks(&self, rule: &str) -> bool {
        self.config.misbehave.breaks(rule)
    }

    /// Whether this device was told to break `rule` in the way called `name`.
    pub fn breaks_way(&self, rule: &str, name: &str) -> bool {
        self.config.misbehave.breaks_way(rule, name)
    }

    /// The harness spec it implements.
    pub fn spec(&self) -> harness::lembas::Spec {
        self.config.spec
    }

    /// The capabilities listed in initialize.
    pub fn capabilities(&self) -> Vec<&'static str> {
        self.capabilities.clone()
    }

    /// Announces the session a terminal shares, if any, to the client on `peer` (a LLeMbas
    /// client: announce is a `_lembas` notification).
    pub fn announce(&self, peer: &Arc<Peer>) {
        let (sessions, client) = (self.sessions.clone(), self.client(peer));
        let faults = self.faults.announce;
        tokio::spawn(async move { Self::announce_with(&sessions, &faults, &client).await });
    }

    /// Announces the shared session now: whatever the session sends next comes after it.
    pub async fn announce_now(&self, peer: &Arc<Peer>) {
        let client = self.client(peer);
        Self::announce_with(&self.sessions, &self.faults.announce, &client).await;
    }

    async fn announce_with(
        sessions: &Sessions,
        faults: &session_announce::Faults,
        client: &Client,
    ) {
        if sessions.registry().has("sessions") {
            session_announce::announce_to(sessions, faults, client).await;
        }
    }

    /// Whether the client on `peer` said `_meta.lembas`.
    pub fn is_lembas(&self, peer: &Arc<Peer>) -> bool {
        self.links
            .lock()
            .ok()
            .and_then(|l| l.get(&peer.link()).map(|s| s.lembas))
            .unwrap_or(false)
    }

    /// Hands work to the link's queue (started with the link).
    fn enqueue(&self, peer: &Arc<Peer>, item: Work) {
        let queue = self
            .links
            .lock()
            .ok()
            .and_then(|l| l.get(&peer.link()).and_then(|s| s.work.clone()));
        if let Some(queue) = queue {
            let _ = queue.send(Box::new(item));
        }
    }

    /// The client on a link, as its initialize described it.
    pub fn client(&self, peer: &Arc<Peer>) -> Client {
        let quirks = Quirks {
            events_to_all: self.breaks(ids::DEVICE_EVENT_LEMBAS_ONLY),
            no_text_updates: self.breaks(ids::DEVICE_TURN_STREAM),
            no_text_events: self.breaks_way(ids::DEVICE_TURN_STREAM, "no_text_events"),
        };
        let route = self
            .links
            .lock()
            .ok()
            .and_then(|l| l.get(&peer.link()).and_then(|s| s.route.clone()));
        match route {
            Some(route) => Client::on(route, quirks),
            // Before initialize: a client that said nothing yet.
            None => Client::new(
                Route {
                    peer: peer.clone(),
                    lembas: false,
                    protocol: 1,
                    asks: true,
                },
                quirks,
            ),
        }
    }

    /// A new link's initialize came: its clients' route is made, and every route left on a
    /// link that has ended moves to it, so what ran there goes on reporting here.
    fn route_link(&self, peer: &Arc<Peer>, lembas: bool, protocol: u8) -> Arc<RwLock<Route>> {
        let fresh = Route {
            peer: peer.clone(),
            lembas,
            protocol,
            asks: true,
        };
        let route = Arc::new(RwLock::new(fresh.clone()));
        let mut routes = self.routes.lock().unwrap_or_else(|p| p.into_inner());
        routes.retain(|r| r.strong_count() > 0);
        let moves = !self.breaks(ids::DEVICE_TURNS_RELINK);
        for old in routes
            .iter()
            .filter_map(std::sync::Weak::upgrade)
            .filter(|_| moves)
        {
            if let Ok(mut old) = old.write()
                && old.peer.is_closed()
            {
                *old = fresh.clone();
            }
        }
        routes.push(Arc::downgrade(&route));
        route
    }

    /// The hello this device sends on a link of `protocol`.
    pub fn hello(&self, protocol: u8) -> Value {
        let (registry, stdio) = (self.sessions.registry(), self.config.stdio);
        hello::payload(
            registry,
            self.config.spec,
            stdio,
            protocol,
            &self.faults.hello,
        )
    }

    /// The answer to initialize on a link whose hello said `protocol`.
    pub fn initialize_result(&self, protocol: u8) -> Value {
        let (registry, stdio) = (self.sessions.registry(), self.config.stdio);
        let device = initialize::Device {
            spec: self.config.spec,
            connection: &self.config.connection,
            capabilities: &self.capabilities,
            limits: hello::limits(registry, stdio, &self.faults.hello.limits),
        };
        initialize::result(device, protocol, &self.faults.initialize)
    }

    /// Answers initialize (request `id`), then sends what follows it on a new link: the
    /// shared sessions' announcements and the deletes kept while no link was up.
    fn answer_initialize(&self, hub: &Arc<Hub>, peer: &Arc<Peer>, id: &Value) {
        let protocol = match self.links.lock() {
            Ok(mut links) => {
                let state = links.entry(peer.link()).or_default();
                // Before the answer goes out: the client may speak the moment it has it.
                state.answered_initialize = true;
                state.protocol
            }
            Err(_) => 1,
        };
        peer.respond(id, Ok(self.initialize_result(protocol)));
        if self.faults.hello.again_after_initialize {
            // Misbehaving: hello again, once initialize is answered.
            peer.notify(methods::LEMBAS_HELLO, self.hello(protocol));
        }
        let _ = hub.progress().signal(INITIALIZED);
        // A session a terminal shares is announced again whenever the link comes up.
        let link = initialize::Relink {
            lembas: self.is_lembas(peer),
            protocol,
            announced_before: self
                .announced
                .swap(true, std::sync::atomic::Ordering::Relaxed),
        };
        let faults = (&self.faults.initialize, &self.faults.announce);
        let registry = self.sessions.registry();
        initialize::follow_up(peer, registry, faults, link, || self.announce(peer));
    }

    /// The client's initialize came on `peer`: what it said of itself is kept with the link,
    /// its route made, and the instance judged for it.
    fn initialize_came(&self, hub: &Arc<Hub>, peer: &Arc<Peer>, request: &IncomingRequest) {
        let stdio = self.config.stdio;
        let said = initialize::client_said(&request.params, stdio, &self.faults.initialize);
        let (protocol, waiting) = {
            let mut links = self.links.lock().unwrap_or_else(|p| p.into_inner());
            // An initialize again on a link that had one, while another open link's hello
            // still waits for its own: the answer to that hello went on the wrong link.
            let again = links.get(&peer.link()).is_some_and(|s| s.initialized);
            let waiting: Vec<u32> = links
                .iter()
                .filter(|(link, s)| **link != peer.link() && !s.initialized)
                .map(|(link, _)| *link)
                .filter(|_| again && !stdio)
                .collect();
            let state = links.entry(peer.link()).or_default();
            state.initialized = true;
            state.initialize_id = Some(request.id.clone());
            state.lembas = said.lembas;
            (state.protocol, waiting)
        };
        for link in waiting {
            hub.findings()
                .push(initialize::came_again(peer.link(), link));
        }
        // Questions and plans follow what the client says it speaks, within the link's.
        let route = self.route_link(peer, said.lembas, said.protocol.min(protocol).max(1));
        if let Ok(mut links) = self.links.lock() {
            links.entry(peer.link()).or_default().route = Some(route);
        }
        // An editor on stdio is not an instance: the instance's rules are not its.
        let judged = if stdio {
            Vec::new()
        } else {
            monitor::check_initialize(&request.params, protocol)
        };
        for finding in judged {
            hub.findings().push(finding.on_link(peer.link()));
        }
    }

    /// Judges a request or notification from the instance: its order (initialize first), the
    /// capabilities it relies on, what it asks of what the device gave it, and what it still
    /// waits for on the link.
    fn judge_instance(
        &self,
        peer: &Arc<Peer>,
        event: &LinkEvent,
        method: &str,
        params: &Value,
    ) -> Vec<Finding> {
        let mut found = Vec::new();
        if method != methods::INITIALIZE && !self.initialize_answered(peer) {
            let what = match event {
                LinkEvent::Request(_) => "request",
                _ => "notification",
            };
            found.push(initialize::came_early(what, method));
        }
        found.extend(monitor::check_capabilities(
            method,
            params,
            &self.capabilities,
        ));
        found.extend(self.judge_client(peer, event));
        if method == methods::LEMBAS_CONFIGURE {
            found.extend(monitor::check_configure(params));
        }
        if let LinkEvent::Request(request) = event
            && let Ok(mut links) = self.links.lock()
            && let Some(state) = links.get_mut(&peer.link())
        {
            let waits = |id: &Value| peer.is_unanswered(id);
            found.extend(state.watch.request(method, &request.id, params, waits));
        }
        found
    }

    /// Whether this link's initialize has been answered with a result (an editor on stdio
    /// too: ACP's order holds there as well).
    fn initialize_answered(&self, peer: &Arc<Peer>) -> bool {
        self.links
            .lock()
            .map(|l| l.get(&peer.link()).is_some_and(|s| s.answered_initialize))
            .unwrap_or(true)
    }
}

impl Behaviour for AgentModel {
    fn watch(&self) -> Option<Arc<dyn harness::jsonrpc::MessageWatch>> {
        self.shapes.clone()
    }

    fn on_open(&self, hub: &Arc<Hub>, peer: &Arc<Peer>) {
        let protocol = self.next_protocol.lock().map(|p| *p).unwrap_or(1);
        let (work, queue) = mpsc::unbounded_channel();
        tokio::spawn(serve_link(self.sessions.clone(), queue));
        if let Ok(mut links) = self.links.lock() {
            links.insert(
                peer.link(),
                LinkState {
                    protocol,
                    work: Some(work),
                    ..LinkState::default()
                },
            );
        }
        // An editor starts with initialize, whenever it likes: no hello, no deadline.
        if self.config.stdio {
            return;
        }
        hello::send(peer, protocol, &self.faults.hello, || self.hello(protocol));
        // An instance that never sends initialize leaves the device unusable: say so.
        let (links, link, patience) = (self.links.clone(), peer.link(), self.config.patience);
        let finding = initialize::never_came(patience);
        // The link stays up: an instance may still initialize late, and the device would only
        // dial again.
        hub.watchdog(peer, patience, finding, None, move || {
            links
                .lock()
                .map(|l| l.get(&link).is_some_and(|s| s.initialized))
                .unwrap_or(true)
        });
    }

    fn observe(&self, hub: &Arc<Hub>, peer: &Arc<Peer>, event: &LinkEvent) {
        if let LinkEvent::Request(request) = event
            && request.method == methods::INITIALIZE
        {
            self.initialize_came(hub, peer, request);
        }
        let from_instance = match event {
            LinkEvent::Request(request) => Some((&request.method, &request.params)),
            LinkEvent::Notification { method, params, .. } => Some((method, params)),
            _ => None,
        };
        // An editor on stdio is not an instance: the instance's rules are not its.
        if let Some((method, params)) = from_instance
            && !self.config.stdio
        {
            for finding in self.judge_instance(peer, event, method, params) {
                hub.findings().push(finding.on_link(peer.link()));
            }
        }
        if let LinkEvent::Response {
            method,
            request_params,
            outcome: Ok(answer),
            ..
        } = event
            && let Some(finding) = monitor::check_card_answer(method, request_params, answer)
        {
            hub.findings().push(finding.on_link(peer.link()));
        }
        if let LinkEvent::Closed(_) = event {
            // Every terminal closes with the link.
            self.terminals.close_link(peer.link());
            if let Ok(mut links) = self.links.lock() {
                // Its work queue goes with it, which ends the link's task.
                links.remove(&peer.link());
            }
            if self.faults.queued_forgotten_on_drop {
                // Misbehaving: the ids of the turns waiting in a queue go with the link.
                let registry = self.sessions.registry().clone();
                tokio::spawn(async move { registry.forget_queued_turns().await });
            }
        }
        if let LinkEvent::Notification { method, params, .. } = event
            && method.starts_with("_lembas/terminal/")
            && self.capabilities.contains(&"terminal")
        {
            self.terminals.notified(peer.link(), method, params);
        }
        if let LinkEvent::Notification { method, params, .. } = event
            && method == methods::SESSION_CANCEL
        {
            self.enqueue(peer, Work::Cancel(params.clone()));
        }
    }

    fn observe_sent(&self, _hub: &Arc<Hub>, peer: &Arc<Peer>, message: &Value) {
        let opened = match self.links.lock() {
            Ok(mut links) => links.get_mut(&peer.link()).and_then(|state| {
                // A scenario's handler may answer initialize instead of the default.
                if message.get("result").is_some()
                    && state.initialize_id.is_some()
                    && message.get("id") == state.initialize_id.as_ref()
                {
                    state.answered_initialize = true;
                }
                state.terminals.sent(message);
                state.watch.sent(message)
            }),
            Err(_) => None,
        };
        let announced = (message.get("method").and_then(Value::as_str)
            == Some(methods::LEMBAS_SESSION_ANNOUNCE))
        .then(|| message.pointer("/params/sessionId").and_then(Value::as_str))
        .flatten();
        if let Ok(mut watch) = self.client_watch.lock() {
            if let Some(session) = opened {
                watch.opened(&session);
            }
            if let Some(session) = announced {
                watch.announced(session);
            }
        }
    }

    fn answer(&self, hub: &Arc<Hub>, peer: &Arc<Peer>, request: &IncomingRequest) -> bool {
        if request.method != methods::INITIALIZE && !self.initialize_answered(peer) {
            // ACP: the connection is initialized first; the official SDKs refuse this way.
            peer.respond(&request.id, Err(initialize::refusal(&request.method)));
            return true;
        }
        match request.method.as_str() {
            methods::INITIALIZE => {
                let after = self.config.initialize_after;
                match (after.is_zero(), self.me.upgrade()) {
                    (false, Some(me)) => {
                        let (hub, peer, id) = (hub.clone(), peer.clone(), request.id.clone());
                        tokio::spawn(async move {
                            tokio::time::sleep(after).await;
                            me.answer_initialize(&hub, &peer, &id);
                        });
                    }
                    _ => self.answer_initialize(hub, peer, &request.id),
                }
                true
            }
            methods::LEMBAS_TERMINAL_OPEN
                if !self.config.stdio
                    && (self.capabilities.contains(&"terminal")
                        || self.faults.terminal.opens_unlisted) =>
            {
                let desk = terminal_open::Desk {
                    terminals: &self.terminals,
                    registry: self.sessions.registry(),
                    home: self.config.terminal_home.as_ref(),
                    shell: self.capabilities.contains(&"shell"),
                };
                let answer =
                    terminal_open::answer(&desk, &self.faults.terminal, peer, &request.params);
                peer.respond(&request.id, answer);
                true
            }
            // Misbehaving: the folder picker's request left unanswered on stdio.
            methods::LEMBAS_DIRECTORIES
                if self.config.stdio
                    && self
                        .config
                        .misbehave
                        .breaks_way(ids::DEVICE_STDIO_NO_DIRECTORIES, "unanswered") =>
            {
                true
            }
            // Misbehaving: the folder picker served on stdio too.
            method
                if self.config.stdio
                    && method.starts_with("_lembas/")
                    && !(method == methods::LEMBAS_DIRECTORIES
                        && self.breaks(ids::DEVICE_STDIO_NO_DIRECTORIES)) =>
            {
                peer.respond(
                    &request.id,
                    Err(RpcError::new(
                        METHOD_NOT_FOUND,
                        format!("{method} is only on the link, not on serve --stdio"),
                    )),
                );
                true
            }
            method => {
                let client = self.client(peer);
                self.enqueue(
                    peer,
                    Work::Request {
                        method: method.to_string(),
                        params: request.params.clone(),
                        id: request.id.clone(),
                        client,
                        link: peer.clone(),
                    },
                );
                true
            }
        }
    }
}
