//! The device as an ACP agent on each link: hello when the link opens, then the answer to
//! `initialize`, shaped for its harness spec. The monitors check the instance on the way.

use harness::lembas::methods;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use harness::engine::{Behaviour, Hub};
use harness::finding::Finding;
use harness::jsonrpc::{IncomingRequest, LinkEvent, METHOD_NOT_FOUND, Peer, RpcError};
use harness::lembas::Spec;
use harness::rules::Misbehaviours;
use harness::rules::ids;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::answers::Reply;
use crate::client_watch::ClientWatch;
use crate::events::{Client, Quirks, Route};
use crate::link_watch::LinkWatch;
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

/// Session work from a link, in the order it arrived.
#[derive(Debug)]
enum Work {
    /// A request for the sessions.
    Request {
        method: String,
        params: Value,
        id: Value,
        client: Client,
    },
    /// `session/cancel`.
    Cancel(Value),
}

/// Serves one link's session work in arrival order (a prompt is queued before the next message
/// is read, as a device does); answers that wait for a turn are sent from tasks of their own,
/// so a long turn never holds up a `status` or a `steer`.
async fn serve_link(sessions: Arc<Sessions>, mut work: mpsc::UnboundedReceiver<Box<Work>>) {
    while let Some(item) = work.recv().await {
        // The work's futures are boxed so the task an idle link keeps (waiting for work) is
        // small: its size would otherwise be that of the largest of them.
        match *item {
            Work::Cancel(params) => Box::pin(sessions.cancel(&params)).await,
            Work::Request {
                method,
                params,
                id,
                client,
            } => match Box::pin(sessions.handle(&method, &params, &client)).await {
                // Misbehaving: a method it does not have goes unanswered.
                None if sessions.registry().breaks(ids::DEVICE_METHOD_UNKNOWN) => {}
                // Misbehaving: a method it does not have is answered as if done.
                None if sessions
                    .registry()
                    .breaks_way(ids::DEVICE_METHOD_UNKNOWN, "pretends") =>
                {
                    client.peer().respond(&id, Ok(serde_json::json!({})));
                }
                None => {
                    client.peer().respond(
                        &id,
                        Err(RpcError::new(
                            METHOD_NOT_FOUND,
                            format!("method not found: {method}"),
                        )),
                    );
                }
                // Misbehaving: what follows session/new's answer goes before it.
                Some(Reply::Now(answer))
                    if sessions
                        .registry()
                        .breaks_way(ids::DEVICE_COMMANDS_AFTER_NEW, "before_answer") =>
                {
                    Box::pin(sessions.after(&method, &answer, &client)).await;
                    client.peer().respond(&id, answer);
                }
                Some(Reply::Now(answer)) => {
                    client.peer().respond(&id, answer.clone());
                    Box::pin(sessions.after(&method, &answer, &client)).await;
                }
                Some(later) => {
                    tokio::spawn(async move {
                        let answer = later.wait().await;
                        client.peer().respond(&id, answer);
                    });
                }
            },
        }
    }
}

/// The capabilities that come only with `remote.terminal: true`.
const TERMINAL_ONLY: [&str; 2] = ["terminal", "shell"];

impl AgentConfig {
    /// The capabilities listed in initialize: the spec's, less the terminal ones unless remote
    /// terminals are on (`shell` comes only with `terminal`), reduced by the scenario.
    pub fn capabilities(&self) -> Vec<String> {
        let mut list: Vec<String> = self
            .spec
            .capabilities()
            .into_iter()
            // Misbehaving: the terminal capabilities though `remote.terminal` is off.
            .filter(|c| {
                self.terminal
                    || self
                        .misbehave
                        .breaks(ids::DEVICE_CAPABILITIES_TERMINAL_CONFIG)
                    || !TERMINAL_ONLY.contains(c)
            })
            .filter(|c| {
                self.only
                    .as_ref()
                    .is_none_or(|only| only.iter().any(|o| o == c))
            })
            .map(String::from)
            .collect();
        if self.misbehave.breaks(ids::DEVICE_COMMANDS_CAPABILITY) {
            // Misbehaving: `commands` left out of the list (its updates are still sent).
            list.retain(|c| c != "commands");
        }
        if self.misbehave.breaks(ids::DEVICE_INITIALIZE_CAPABILITIES) {
            list.push(
                if self.spec == Spec::V1_0_0 {
                    "rewind"
                } else {
                    "shell"
                }
                .into(),
            );
        }
        list
    }
}

/// The agent model of fake-device.
#[derive(Debug)]
pub struct AgentModel {
    /// Whether a shared session was announced on some link already.
    announced: std::sync::atomic::AtomicBool,
    config: AgentConfig,
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
        Arc::new_cyclic(|me| Self {
            shapes,
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
            && self.capabilities().iter().any(|c| c == "terminal")
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
    pub fn capabilities(&self) -> Vec<String> {
        self.config.capabilities()
    }

    /// Announces the session a terminal shares, if any, to the client on `peer` (a LLeMbas
    /// client: announce is a `_lembas` notification).
    pub fn announce(&self, peer: &Arc<Peer>) {
        let (sessions, client) = (self.sessions.clone(), self.client(peer));
        tokio::spawn(async move { Self::announce_with(&sessions, &client).await });
    }

    /// Announces the shared session now: whatever the session sends next comes after it.
    pub async fn announce_now(&self, peer: &Arc<Peer>) {
        Self::announce_with(&self.sessions, &self.client(peer)).await;
    }

    async fn announce_with(sessions: &Sessions, client: &Client) {
        if sessions.registry().has("sessions") {
            sessions.announce_to(client).await;
        }
    }

    /// A terminal's directory: the one asked for, inside the roots, or the first root.
    fn terminal_cwd(&self, params: &Value) -> Result<std::path::PathBuf, String> {
        let limits = self
            .sessions
            .registry()
            .limits
            .read()
            .map(|l| l.clone())
            .map_err(|_| "the limits are unavailable".to_string())?;
        // Misbehaving: `cwd: null` is taken for a wrong path, not for no `cwd`.
        if params.get("cwd").is_some_and(Value::is_null)
            && self
                .config
                .misbehave
                .breaks_way(ids::DEVICE_TERMINAL_DEFAULT_CWD, "null_refused")
        {
            return Err("`cwd` must be a path".into());
        }
        let unasked = matches!(params.get("cwd"), None | Some(Value::Null));
        // Misbehaving: a terminal without `cwd` starts in the user's home, whatever the roots
        // (none at all, or a first one it should have started in).
        let homeward = if limits.roots.is_empty() {
            self.breaks(ids::DEVICE_TERMINAL_NO_ROOTS)
        } else {
            self.breaks(ids::DEVICE_TERMINAL_DEFAULT_CWD)
        };
        if unasked && homeward {
            return self
                .config
                .terminal_home
                .clone()
                .or_else(|| std::env::var_os("HOME").map(std::path::PathBuf::from))
                .ok_or_else(|| "no home".to_string());
        }
        let asked = match params.get("cwd") {
            None | Some(Value::Null) => limits
                .roots
                .first()
                .cloned()
                .ok_or("this device has no root to open a terminal in")?,
            Some(Value::String(cwd)) => std::path::PathBuf::from(cwd),
            Some(_) => return Err("`cwd` must be a path".into()),
        };
        let resolved = std::fs::canonicalize(&asked)
            .map_err(|_| format!("`{}` is not a directory here", asked.display()))?;
        // Misbehaving: any directory, inside the roots or not.
        let outside =
            !limits.inside_roots(&resolved) && !self.breaks(ids::DEVICE_TERMINAL_CWD_ROOTS);
        if !resolved.is_dir() || outside {
            return Err(format!(
                "`{}` is not a directory inside the device's roots",
                asked.display()
            ));
        }
        Ok(resolved)
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

    fn limits(&self) -> Value {
        // Misbehaving: the device's own limits to an editor.
        // Misbehaving: limits said false on stdio, not null.
        if self.config.stdio
            && self
                .config
                .misbehave
                .breaks_way(ids::DEVICE_STDIO_LIMITS_NULL, "false")
        {
            return Value::Bool(false);
        }
        if self.config.stdio && !self.breaks(ids::DEVICE_STDIO_LIMITS_NULL) {
            return Value::Null;
        }
        let mut limits = self
            .sessions
            .registry()
            .limits
            .read()
            .map(|l| l.to_value())
            .unwrap_or(Value::Null);
        if self.breaks(ids::DEVICE_LIMITS_NO_ROOTS)
            && limits["roots"].as_array().is_some_and(Vec::is_empty)
        {
            limits["roots"] = json!([std::env::temp_dir().display().to_string()]);
        }
        if self.breaks_way(ids::DEVICE_LIMITS_NO_ROOTS, "null_roots")
            && limits["roots"].as_array().is_some_and(Vec::is_empty)
        {
            // Misbehaving: no roots said as null, not [].
            limits["roots"] = Value::Null;
        }
        limits
    }

    /// The hello this device sends on a link of `protocol`.
    pub fn hello(&self, protocol: u8) -> Value {
        // Misbehaving: a hello after a change of limits says those of the hello before.
        let stale = self
            .sessions
            .registry()
            .said_limits()
            .filter(|_| self.breaks_way(ids::DEVICE_LIMITS_RELINK, "old_hello"));
        self.sessions.registry().said_in_hello();
        let protocol = if self.breaks(ids::DEVICE_HELLO_PROTOCOL) {
            3 - protocol
        } else {
            protocol
        };
        let spec = if self.breaks(ids::DEVICE_HELLO_SPEC) {
            other_spec(self.config.spec)
        } else {
            self.config.spec
        };
        // Misbehaving: a harness spec that does not exist.
        let unknown_spec = self
            .config
            .misbehave
            .breaks_way(ids::DEVICE_HELLO_SPEC, "unknown");
        let mut hello = json!({
            "protocol": protocol,
            "version": spec.cli_version(),
            "harness_spec": spec.as_str(),
            "device": { "host": "fake-device", "platform": std::env::consts::OS },
            "limits": self.limits(),
        });
        if self.breaks(ids::DEVICE_HELLO_SHAPE) {
            hello.as_object_mut().map(|o| o.remove("device"));
        }
        if self
            .config
            .misbehave
            .breaks_way(ids::DEVICE_HELLO_SHAPE, "version_number")
        {
            hello["version"] = json!(1);
        }
        if unknown_spec {
            hello["harness_spec"] = json!("9.9.9");
        }
        if let Some(stale) = stale {
            hello["limits"] = stale.to_value();
        }
        if self.breaks_way(ids::DEVICE_HELLO_PROTOCOL, "three") {
            // Misbehaving: a protocol above any the instance lists.
            hello["protocol"] = json!(3);
        }
        hello
    }

    /// The answer to initialize on a link whose hello said `protocol`.
    pub fn initialize_result(&self, protocol: u8) -> Value {
        let protocol = match (
            self.breaks(ids::DEVICE_HELLO_PROTOCOL),
            self.breaks(ids::DEVICE_INITIALIZE_PROTOCOL),
        ) {
            (true, false) | (false, true) => 3 - protocol,
            _ => protocol,
        };
        let spec = self.config.spec;
        let takes_attachments = self.capabilities().iter().any(|c| c == "attachments");
        let mut result = json!({
            "protocolVersion": 1,
            "agentCapabilities": {
                "loadSession": false,
                "promptCapabilities": { "image": takes_attachments, "audio": false, "embeddedContext": takes_attachments },
                "mcpCapabilities": { "http": false, "sse": false }
            },
            "authMethods": [],
            "agentInfo": { "name": "LLeMbas CLI", "version": spec.cli_version() },
            "_meta": { "lembas": {
                "protocol": protocol,
                "harness_spec": spec.as_str(),
                "limits": self.limits(),
                "connection": self.config.connection,
                "capabilities": self.capabilities(),
            }}
        });
        if self.breaks(ids::DEVICE_INITIALIZE_RESULT) {
            result.as_object_mut().map(|o| o.remove("agentInfo"));
        }
        if self.breaks_way(ids::DEVICE_INITIALIZE_RESULT, "protocol_version") {
            // Misbehaving: an ACP protocol version the spec does not say.
            result["protocolVersion"] = json!(2);
        }
        if self.breaks_way(ids::DEVICE_INITIALIZE_CAPABILITIES, "not_string")
            && let Some(list) = result
                .pointer_mut("/_meta/lembas/capabilities")
                .and_then(Value::as_array_mut)
        {
            // Misbehaving: a capability listed as an object, not a string.
            list.push(json!({ "name": "turns" }));
        }
        if self.breaks_way(ids::DEVICE_INITIALIZE_MATCHES_HELLO, "extra_root")
            && let Some(roots) = result
                .pointer_mut("/_meta/lembas/limits/roots")
                .and_then(Value::as_array_mut)
        {
            // Misbehaving: initialize names one root more than hello did.
            roots.push(json!(
                std::env::temp_dir().join("elsewhere").display().to_string()
            ));
        }
        if self.breaks(ids::DEVICE_INITIALIZE_MATCHES_HELLO)
            && let Some(limits) = result.pointer_mut("/_meta/lembas/limits")
            && limits.is_object()
        {
            // Misbehaving: initialize names another max_mode than hello did.
            let other = if limits["max_mode"] == "manual" {
                "auto"
            } else {
                "manual"
            };
            limits["max_mode"] = json!(other);
        }
        result
    }
}

fn other_spec(spec: Spec) -> Spec {
    match spec {
        Spec::V1_0_0 => Spec::V1_1_0,
        Spec::V1_1_0 => Spec::V1_0_0,
    }
}

impl AgentModel {
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
        if self
            .config
            .misbehave
            .breaks_way(ids::DEVICE_HELLO_ONCE, "after_initialize")
        {
            // Misbehaving: hello again, once initialize is answered.
            peer.notify(methods::LEMBAS_HELLO, self.hello(protocol));
        }
        let _ = hub.progress().signal(INITIALIZED);
        // Deletes made while no link was up follow initialize, to a LLeMbas client
        // (spec, `_lembas/session/deleted`), and are then forgotten.
        let lembas = self.is_lembas(peer);
        // A session a terminal shares is announced again whenever the link comes up.
        let announced_before = self
            .announced
            .swap(true, std::sync::atomic::Ordering::Relaxed);
        let other_id = announced_before
            && self
                .config
                .misbehave
                .breaks_way(ids::DEVICE_ANNOUNCE_RELINK, "other_id");
        if lembas
            && other_id
            && let Some(cwd) = self.sessions.registry().terminal_session().and_then(|_| {
                let limits = self.sessions.registry().limits.read().ok()?;
                limits.roots.first().cloned()
            })
        {
            // Misbehaving: a new link hears of a made-up session in place of the shared one.
            peer.notify(
                methods::LEMBAS_SESSION_ANNOUNCE,
                json!({
                    "sessionId": crate::answers::fresh_id("ses_"),
                    "cwd": cwd.display().to_string(),
                    "title": "a terminal session",
                    "model": null,
                    "instance": false,
                    "mode": "edit",
                    "effort": "off",
                    "busy": false,
                    "origin": "terminal",
                }),
            );
        } else if lembas && !(announced_before && self.breaks(ids::DEVICE_ANNOUNCE_RELINK)) {
            self.announce(peer);
        }
        // Misbehaving (device.left.shape/next_link): the `left`s kept from the last link.
        let kept: Vec<String> = self
            .sessions
            .registry()
            .lefts_kept
            .lock()
            .map(|mut kept| std::mem::take(&mut *kept))
            .unwrap_or_default();
        for id in kept.into_iter().filter(|_| lembas) {
            peer.notify(
                methods::LEMBAS_SESSION_LEFT,
                json!({ "sessionId": id, "available": true }),
            );
        }
        match (
            lembas && self.sessions.registry().has("delete"),
            self.breaks(ids::DEVICE_DELETED_PENDING),
            protocol,
        ) {
            // Misbehaving: the first link after the delete gets none of them; the next does.
            (true, false, _)
                if !announced_before
                    && self
                        .config
                        .misbehave
                        .breaks_way(ids::DEVICE_DELETED_PENDING, "one_link_late") => {}
            (true, false, _) => self.sessions.registry().send_pending_deletes(peer, true),
            // Misbehaving: at protocol 1 it never sends them; at 2 it never forgets them.
            (true, true, 2) => self.sessions.registry().send_pending_deletes(peer, false),
            _ => {}
        }
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
        match (self.breaks(ids::DEVICE_HELLO_FIRST), protocol) {
            (false, _) => peer.notify(methods::LEMBAS_HELLO, self.hello(protocol)),
            // Misbehaving: no hello at protocol 1; at 2, something else first, then hello.
            (true, 1) => {}
            (true, _) => {
                peer.notify(
                    methods::LEMBAS_SESSION_DELETED,
                    json!({ "sessionId": "ses_early" }),
                );
                peer.notify(methods::LEMBAS_HELLO, self.hello(protocol));
            }
        }
        if self.breaks(ids::DEVICE_HELLO_ONCE) {
            peer.notify(methods::LEMBAS_HELLO, self.hello(protocol));
        }
        // An instance that never sends initialize leaves the device unusable: say so.
        let (links, link, patience) = (self.links.clone(), peer.link(), self.config.patience);
        let finding = Finding::new(
            ids::INSTANCE_INITIALIZE_AFTER_HELLO,
            format!("no initialize within {patience:?} of hello"),
        );
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
            let said = request.params.pointer("/clientCapabilities/_meta/lembas");
            // `lembas: true` is protocol 1, `{protocol: N}` says N; false or null is no LLeMbas.
            // On stdio the client is an editor whatever it says: plain ACP only (spec, intro).
            // Misbehaving: an editor that says `_meta.lembas` is taken for LLeMbas on stdio too.
            let lembas = (!self.config.stdio || self.breaks(ids::DEVICE_STDIO_PLAIN_ACP))
                && said.is_some_and(|l| l.as_bool() == Some(true) || l.is_object())
                // Misbehaving: a `_meta.lembas` naming no protocol is taken for no LLeMbas.
                && !(self.breaks_way(ids::DEVICE_CLIENT_PROTOCOL_ABSENT, "plain")
                    && said.is_some_and(|l| l.get("protocol").is_none()));
            // Misbehaving: a `_meta.lembas` naming no protocol is read as protocol 2.
            let unsaid = if self.breaks(ids::DEVICE_CLIENT_PROTOCOL_ABSENT) {
                2
            } else {
                1
            };
            let client_protocol = said
                .and_then(|l| l.get("protocol"))
                .and_then(Value::as_u64)
                .map_or(unsaid, |p| u8::try_from(p).unwrap_or(u8::MAX));
            let (protocol, waiting) = {
                let mut links = self.links.lock().unwrap_or_else(|p| p.into_inner());
                // An initialize again on a link that had one, while another open link's hello
                // still waits for its own: the answer to that hello went on the wrong link.
                let again = links.get(&peer.link()).is_some_and(|s| s.initialized);
                let waiting: Vec<u32> = links
                    .iter()
                    .filter(|(link, s)| **link != peer.link() && !s.initialized)
                    .map(|(link, _)| *link)
                    .filter(|_| again && !self.config.stdio)
                    .collect();
                let state = links.entry(peer.link()).or_default();
                state.initialized = true;
                state.initialize_id = Some(request.id.clone());
                state.lembas = lembas;
                (state.protocol, waiting)
            };
            for link in waiting {
                hub.findings().push(
                    Finding::new(
                        ids::INSTANCE_INITIALIZE_AFTER_HELLO,
                        format!(
                            "initialize came again on link {}, already initialized, while link {link}'s hello still waits for one",
                            peer.link()
                        ),
                    )
                    .on_link(link),
                );
            }
            // Questions and plans follow what the client says it speaks, within the link's.
            let route = self.route_link(peer, lembas, client_protocol.min(protocol).max(1));
            if let Ok(mut links) = self.links.lock() {
                links.entry(peer.link()).or_default().route = Some(route);
            }
            // An editor on stdio is not an instance: the instance's rules are not its.
            let judged = if self.config.stdio {
                Vec::new()
            } else {
                monitor::check_initialize(&request.params, protocol)
            };
            for finding in judged {
                hub.findings().push(finding.on_link(peer.link()));
            }
        }
        let from_instance = match event {
            LinkEvent::Request(request) => Some((&request.method, &request.params)),
            LinkEvent::Notification { method, params, .. } => Some((method, params)),
            _ => None,
        };
        if let Some((method, _)) = from_instance.filter(|(m, _)| *m != methods::INITIALIZE)
            && !self.config.stdio
            && !self.initialize_answered(peer)
        {
            let what = match event {
                LinkEvent::Request(_) => "request",
                _ => "notification",
            };
            hub.findings().push(
                Finding::new(
                    ids::INSTANCE_INITIALIZE_FIRST,
                    format!(
                        "the {what} `{method}` came before the device had answered initialize; a device on the official ACP SDK refuses such a request with -32600"
                    ),
                )
                .on_link(peer.link()),
            );
        }
        if let Some((method, params)) = from_instance.filter(|_| !self.config.stdio) {
            for finding in monitor::check_capabilities(method, params, &self.capabilities()) {
                hub.findings().push(finding.on_link(peer.link()));
            }
            for finding in self.judge_client(peer, event) {
                hub.findings().push(finding.on_link(peer.link()));
            }
            if method == methods::LEMBAS_CONFIGURE
                && let Some(finding) = monitor::check_configure(params)
            {
                hub.findings().push(finding.on_link(peer.link()));
            }
        }
        if let LinkEvent::Request(request) = event
            && !self.config.stdio
        {
            let found = self
                .links
                .lock()
                .ok()
                .and_then(|mut links| {
                    links.get_mut(&peer.link()).map(|state| {
                        state
                            .watch
                            .request(&request.method, &request.id, &request.params, |id| {
                                peer.is_unanswered(id)
                            })
                    })
                })
                .unwrap_or_default();
            for finding in found {
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
        }
        if let LinkEvent::Notification { method, params, .. } = event
            && method.starts_with("_lembas/terminal/")
            && self.capabilities().iter().any(|c| c == "terminal")
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
            peer.respond(
                &request.id,
                Err(RpcError::new(
                    harness::jsonrpc::INVALID_REQUEST,
                    format!(
                        "ACP connection must be initialized before '{}'",
                        request.method
                    ),
                )),
            );
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
                    && (self.capabilities().iter().any(|c| c == "terminal")
                        || self.breaks_way(
                            ids::DEVICE_CAPABILITIES_TERMINAL_CONFIG,
                            "opens_unlisted",
                        )) =>
            {
                let answer = self
                    .terminal_cwd(&request.params)
                    .and_then(|cwd| {
                        self.terminals.open(
                            peer,
                            &request.params,
                            cwd,
                            self.capabilities().iter().any(|c| c == "shell"),
                        )
                    })
                    .map_err(|why| {
                        // Misbehaving: with no root, refused as an internal error.
                        let rootless = self
                            .config
                            .misbehave
                            .breaks_way(ids::DEVICE_TERMINAL_NO_ROOTS, "other_code")
                            && self
                                .sessions
                                .registry()
                                .limits
                                .read()
                                .is_ok_and(|l| l.roots.is_empty());
                        // Misbehaving: a cwd outside the roots refused with another code.
                        let code = match rootless
                            || (self
                                .config
                                .misbehave
                                .breaks_way(ids::DEVICE_TERMINAL_CWD_ROOTS, "other_code")
                                && why.contains("inside the device's roots"))
                        {
                            true => harness::jsonrpc::INTERNAL_ERROR,
                            false => harness::jsonrpc::INVALID_PARAMS,
                        };
                        RpcError::new(code, why)
                    });
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
                    },
                );
                true
            }
        }
    }
}
