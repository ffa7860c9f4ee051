//! The instance as an ACP client on each link: it waits for the device's hello, closes with
//! 4400 when it cannot speak the protocol hello says, and sends `initialize` saying the
//! protocol of the link. The monitors check everything the device sends on the way.

use harness::lembas::methods;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use harness::engine::{Applies, Behaviour, Hub, Intent};
use harness::finding::Finding;
use harness::jsonrpc::{IncomingRequest, LinkEvent, Peer};
use harness::lembas::{CLOSE_PROTOCOL_MISMATCH, Discovery, Spec};
use harness::rules::Misbehaviours;
use harness::rules::ids;
use harness::scenario::Mode;

use crate::settings::{CardPolicy, ClientKind};
use serde_json::{Value, json};

use crate::applicability::Applicability;
use crate::chats::Chats;
use crate::methods::cards;
use crate::methods::{hello, initialize};
use crate::monitor;

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

#[derive(Debug, Default)]
struct LinkState {
    spoke: bool,
    hello_protocol: Option<u8>,
    watch: monitor::LinkWatch,
    /// The watch has been told the sessions the client knew when the link came.
    seeded: bool,
    /// Nothing more is answered on this link (misbehaving on instance.deleted.ignore).
    stalled: bool,
}

/// The client model of fake-instance.
#[derive(Debug)]
pub struct ClientModel {
    config: ClientConfig,
    discovery: Arc<RwLock<Discovery>>,
    links: Arc<Mutex<HashMap<u32, LinkState>>>,
    /// The chats the simulated web UI keeps.
    pub chats: Arc<Chats>,
    /// Every session the client has known on any link of the run.
    known: Mutex<std::collections::HashSet<String>>,
    /// When this instance last closed each device's link with 4400.
    closed_4400: Mutex<HashMap<String, std::time::Instant>>,
    /// Whether the scenario's steps apply to the device.
    applicability: Option<Applicability>,
    /// The catalogue's shape checks of the device's messages, and this side's shape
    /// misbehaviours, on every link.
    shapes: Option<Arc<dyn harness::jsonrpc::MessageWatch>>,
}

/// How soon after a 4400 close a device's new link counts as a redial.
const REDIAL_WINDOW: Duration = Duration::from_secs(30);

impl ClientModel {
    /// A model that serves `discovery` (shared with the HTTP side, which may change it).
    pub fn new(config: ClientConfig, discovery: Arc<RwLock<Discovery>>, chats: Arc<Chats>) -> Self {
        let shapes = harness::shapes::ShapeWatch::shared(
            harness::rules::catalogue(),
            harness::rules::Binds::Device,
            &config.misbehave,
            config.spec.as_str(),
        );
        Self {
            shapes,
            config,
            discovery,
            links: Arc::new(Mutex::new(HashMap::new())),
            chats,
            known: Mutex::new(Default::default()),
            closed_4400: Mutex::new(HashMap::new()),
            applicability: None,
        }
    }

    /// Judges a scenario's steps against what the device claimed.
    pub fn with_applicability(mut self, applicability: Applicability) -> Self {
        self.applicability = Some(applicability);
        self
    }

    /// Answers a card by the policy, as a person would: after the policy's delay, never for
    /// a card taken down meanwhile (`settled`), and a card that is not patient dismissed when
    /// it has waited the client's timeout. A patient card is never timed out.
    fn answer_card(&self, peer: &Arc<Peer>, request: &IncomingRequest) {
        let policy = &self.config.cards;
        let answer = cards::answer_by(policy, &request.method, &request.params);
        let delay = policy.delay.map(|d| d.0).unwrap_or_default();
        let timeout = policy
            .timeout
            .map(|d| d.0)
            .unwrap_or(Duration::from_secs(30));
        let patient = cards::is_patient(&request.params)
            && !self.config.misbehave.breaks(ids::INSTANCE_CARD_PATIENT);
        let call = cards::tool_call_id(&request.method, &request.params);
        // Misbehaving: a question or a plan nobody answers is left up for ever.
        let never_dismissed = self
            .config
            .misbehave
            .breaks(ids::INSTANCE_CARD_TIMEOUT_DISMISSED)
            && request.method != methods::SESSION_REQUEST_PERMISSION;
        let misbehave = &self.config.misbehave;
        // Misbehaving: a question or plan timed out is answered as if the person had chosen
        // (the first option of each question; the plan approved).
        let timed_out_answer = |method: &str| {
            if misbehave.breaks_way(ids::INSTANCE_CARD_TIMEOUT_DISMISSED, "answered") {
                match method {
                    methods::LEMBAS_QUESTION => {
                        let answers: Vec<Value> = request
                            .params
                            .get("questions")
                            .and_then(Value::as_array)
                            .into_iter()
                            .flatten()
                            .map(|q| json!({ "kind": "options", "labels": [q.pointer("/options/0/label")] }))
                            .collect();
                        return json!({ "outcome": "answered", "answers": answers });
                    }
                    methods::LEMBAS_PLAN => {
                        return json!({ "outcome": "approve", "mode": "manual" });
                    }
                    _ => {}
                }
            }
            cards::dismissal(method)
        };
        let (answer, after) = match answer {
            // Misbehaving: a patient card is dismissed at once, as a client that takes none.
            _ if cards::is_patient(&request.params)
                && misbehave.breaks_way(ids::INSTANCE_CARD_PATIENT, "dismissed_at_once") =>
            {
                (cards::dismissal(&request.method), Duration::ZERO)
            }
            Some(answer) if patient || delay < timeout => (answer, delay),
            // Nobody answers in time: LLeMbas takes the card down itself (misbehaving: it
            // leaves it up for ever).
            _ if !patient && !never_dismissed => (timed_out_answer(&request.method), timeout),
            _ if !patient => return,
            // A patient card nobody answers stays up until it is settled.
            _ => return,
        };
        let mut answer = if self.config.misbehave.breaks(ids::INSTANCE_CARD_ANSWER)
            && request.method == methods::SESSION_REQUEST_PERMISSION
        {
            json!({ "outcome": { "outcome": "selected", "optionId": "always_and_forever" } })
        } else {
            answer
        };
        if request.method == methods::LEMBAS_QUESTION
            && self
                .config
                .misbehave
                .breaks_way(ids::INSTANCE_CARD_ANSWER, "answers_short")
            && let Some(answers) = answer.get_mut("answers").and_then(Value::as_array_mut)
        {
            // Misbehaving: one answer fewer than the card has questions.
            answers.pop();
        }
        // Misbehaving: the client answers a card `cancelled` as soon as the device settles it.
        let cancels_settled = self
            .config
            .misbehave
            .breaks_way(ids::INSTANCE_CARD_SETTLED, "cancelled_on_settle");
        // Misbehaving: a settled card makes the client cancel the session's other cards.
        let cancels_beside = self
            .config
            .misbehave
            .breaks_way(ids::INSTANCE_CARD_KEYED, "others_cancelled")
            .then(|| request.params.get("sessionId").and_then(Value::as_str))
            .flatten()
            .map(String::from);
        let method = request.method.clone();
        let (peer, id, chats) = (peer.clone(), request.id.clone(), self.chats.clone());
        let answers_settled = self.config.misbehave.breaks(ids::INSTANCE_CARD_SETTLED);
        // Misbehaving: cards are keyed by session, so a settled card takes its session's others
        // down with it.
        let by_session = self
            .config
            .misbehave
            .breaks(ids::INSTANCE_CARD_KEYED)
            .then(|| request.params.get("sessionId").and_then(Value::as_str))
            .flatten()
            .map(String::from);
        tokio::spawn(async move {
            // A zero sleep still waits for the timer's next 1 ms tick: the default answer (no
            // delay) would cost a millisecond a card.
            if cancels_settled || cancels_beside.is_some() {
                let until = tokio::time::Instant::now() + after;
                while tokio::time::Instant::now() < until {
                    let settled = call.as_deref().is_some_and(|c| chats.is_settled(c));
                    let beside = !settled
                        && cancels_beside
                            .as_deref()
                            .is_some_and(|s| chats.is_session_settled(s));
                    if (cancels_settled && settled) || beside {
                        peer.respond(&id, Ok(cards::dismissal(&method)));
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            } else if !after.is_zero() {
                tokio::time::sleep(after).await;
            }
            // A card taken down is not answered.
            if call.as_deref().is_some_and(|c| chats.is_settled(c)) && !answers_settled {
                return;
            }
            if by_session
                .as_deref()
                .is_some_and(|s| chats.is_session_settled(s))
            {
                return;
            }
            peer.respond(&id, Ok(answer));
        });
    }

    fn discovery(&self) -> Discovery {
        self.discovery
            .read()
            .map(|d| d.clone())
            .unwrap_or_else(|_| Discovery::for_protocols(None))
    }

    /// The `clientCapabilities._meta.lembas` this client says on a link of `protocol`.
    fn lembas_meta(&self, protocol: u8) -> Option<Value> {
        if self.config.client == ClientKind::Plain {
            return None;
        }
        let flip = self
            .config
            .misbehave
            .breaks(ids::INSTANCE_INITIALIZE_PROTOCOL);
        if self
            .config
            .misbehave
            .breaks_way(ids::INSTANCE_INITIALIZE_PROTOCOL, "as_string")
        {
            // Misbehaving: the link's protocol, as a string.
            return Some(json!({ "protocol": protocol.min(2).to_string() }));
        }
        Some(match (protocol >= 2) != flip {
            true => json!({ "protocol": 2 }),
            false => json!(true),
        })
    }

    /// The params of the initialize this client sends on a link of `protocol`.
    pub fn initialize_params(&self, protocol: u8) -> Value {
        let version = if self.config.misbehave.breaks(ids::INSTANCE_INITIALIZE_SHAPE) {
            2
        } else {
            1
        };
        let mut capabilities = json!({});
        if let Some(lembas) = self.lembas_meta(protocol) {
            capabilities["_meta"] = json!({ "lembas": lembas });
        }
        if self
            .config
            .misbehave
            .breaks_way(ids::INSTANCE_INITIALIZE_SHAPE, "no_capabilities")
        {
            return json!({ "protocolVersion": version });
        }
        json!({ "protocolVersion": version, "clientCapabilities": capabilities })
    }

    fn on_hello(&self, hub: &Arc<Hub>, peer: &Arc<Peer>, params: &Value) {
        let discovery = self.discovery();
        let allowed = discovery.protocol_for_device();
        for finding in hello::check_hello(params, allowed, self.config.spec) {
            hub.findings().push(finding.on_link(peer.link()));
        }
        let said = params
            .get("protocol")
            .and_then(Value::as_u64)
            .and_then(|p| u8::try_from(p).ok())
            .unwrap_or(1);
        let twice = {
            let mut links = self.links.lock().unwrap_or_else(|p| p.into_inner());
            let state = links.entry(peer.link()).or_default();
            let twice = state.hello_protocol.is_some();
            state.hello_protocol.get_or_insert(said);
            twice
        };
        if twice {
            hub.findings().push(
                Finding::new(ids::DEVICE_HELLO_ONCE, "hello sent twice on one link")
                    .on_link(peer.link()),
            );
            return;
        }
        // A device this instance closed with 4400 must not come back (it stops, saying why):
        // one that links again soon after is redialling. A CLI restarted by hand that soon
        // would be reported too, and the finding says how long after it came.
        let device = self.chats.device_of(peer.link());
        if let Some(closed_at) = self
            .closed_4400
            .lock()
            .ok()
            .and_then(|c| c.get(&device).copied())
            && closed_at.elapsed() < REDIAL_WINDOW
        {
            hub.findings().push(
                Finding::new(
                    ids::DEVICE_LINK_NO_REDIAL_4400,
                    format!(
                        "the device linked again {} ms after this instance closed its link with 4400",
                        closed_at.elapsed().as_millis()
                    ),
                )
                .on_link(peer.link()),
            );
        }
        if said >= 2 && allowed < 2 && !self.config.misbehave.breaks(ids::INSTANCE_LINK_CLOSE_4400)
        {
            if let Ok(mut closed) = self.closed_4400.lock() {
                closed.insert(device, std::time::Instant::now());
            }
            // Misbehaving (close_4400/other_code): closed, but as a policy violation (1008).
            let code = if self
                .config
                .misbehave
                .breaks_way(ids::INSTANCE_LINK_CLOSE_4400, "other_code")
            {
                1008
            } else {
                CLOSE_PROTOCOL_MISMATCH
            };
            peer.close(code, "this instance speaks link protocol 1 only");
            return;
        }
        if self.config.initialize == Mode::Manual
            || self
                .config
                .misbehave
                .breaks(ids::INSTANCE_INITIALIZE_AFTER_HELLO)
        {
            return;
        }
        let init = self.initialize_params(said.min(allowed));
        // Misbehaving: the initialize goes on the device's earliest link still open, not on
        // the one whose hello it answers.
        let elsewhere = self
            .config
            .misbehave
            .breaks_way(ids::INSTANCE_INITIALIZE_AFTER_HELLO, "other_link")
            .then(|| {
                let mut others: Vec<u32> = self
                    .links
                    .lock()
                    .map(|l| l.keys().copied().filter(|l| *l != peer.link()).collect())
                    .unwrap_or_default();
                others.sort_unstable();
                others.into_iter().find_map(|l| hub.link(l))
            })
            .flatten();
        let target = elsewhere.as_ref().unwrap_or(peer);
        // On the wire now, before any step sees the hello: LLeMbas sends nothing before
        // initialize, and a device judges every later request by what initialize said. What
        // the steps send next waits at the link's gate for initialize's answer (`opener` below).
        let answer = target.begin_request(methods::INITIALIZE, init, self.config.patience);
        let link = peer.link();
        tokio::spawn(async move {
            if let Err(e) = answer.await {
                tracing::info!(link, "initialize: {e}");
            }
        });
        if self
            .config
            .misbehave
            .breaks_way(ids::INSTANCE_INITIALIZE_FIRST, "notification")
        {
            // Misbehaving (with no gate): a notification right behind initialize.
            peer.notify(
                methods::SESSION_CANCEL,
                json!({ "sessionId": "ses_before_initialized" }),
            );
        }
        if self.config.misbehave.breaks(ids::INSTANCE_INITIALIZE_FIRST) {
            // Misbehaving (with no gate): a chat opened right behind initialize.
            let cwd = first_root(params);
            let early = peer.begin_request(
                methods::SESSION_NEW,
                json!({ "cwd": cwd, "mcpServers": [] }),
                self.config.patience,
            );
            tokio::spawn(async move {
                let _ = early.await;
            });
        }
    }
}

impl ClientModel {
    /// The link-wide monitors ([`monitor::LinkWatch`]): every message of the device's, checked
    /// against what the link has said so far.
    fn watch(&self, hub: &Arc<Hub>, peer: &Arc<Peer>, event: &LinkEvent) {
        let found = {
            let mut links = self.links.lock().unwrap_or_else(|p| p.into_inner());
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
                    ..
                } => watch.response(
                    method,
                    request_params,
                    &outcome.clone().map_err(|e| e.to_value()),
                ),
                LinkEvent::Closed(_) => Vec::new(),
            }
        };
        for finding in found {
            hub.findings().push(finding.on_link(peer.link()));
        }
    }
}

/// The first root a hello names, or `/` when it names none.
fn first_root(hello: &Value) -> String {
    hello
        .pointer("/limits/roots/0")
        .and_then(Value::as_str)
        .unwrap_or("/")
        .to_string()
}

impl Behaviour for ClientModel {
    fn watch(&self) -> Option<Arc<dyn harness::jsonrpc::MessageWatch>> {
        self.shapes.clone()
    }

    /// ACP's order: the connection is initialized before anything else is sent on it (the
    /// official SDKs refuse any request before `initialize` is answered).
    fn opener(&self) -> Option<&'static str> {
        let early = self.config.misbehave.breaks(ids::INSTANCE_INITIALIZE_FIRST)
            || self
                .config
                .misbehave
                .breaks_way(ids::INSTANCE_INITIALIZE_FIRST, "notification");
        match early {
            true => None,
            false => Some(methods::INITIALIZE),
        }
    }

    fn on_open(&self, hub: &Arc<Hub>, peer: &Arc<Peer>) {
        // An editor speaks first: initialize at once, and no hello to wait for (spec, intro).
        if self.config.stdio {
            if self.config.initialize == Mode::Auto {
                let answer = peer.begin_request(
                    methods::INITIALIZE,
                    self.initialize_params(2),
                    self.config.patience,
                );
                let link = peer.link();
                tokio::spawn(async move {
                    if let Err(e) = answer.await {
                        tracing::info!(link, "initialize: {e}");
                    }
                });
            }
            return;
        }
        // A device that never says hello would leave the link silent forever: say so, and close
        // it (1008, a policy violation) rather than hold its socket for good.
        let (links, link, patience) = (self.links.clone(), peer.link(), self.config.patience);
        let finding = Finding::new(
            ids::DEVICE_HELLO_FIRST,
            format!("no hello within {patience:?} of the link opening"),
        );
        let close = Some((1008, "no hello in time"));
        hub.watchdog(peer, patience, finding, close, move || {
            links
                .lock()
                .map(|l| l.get(&link).is_some_and(|s| s.hello_protocol.is_some()))
                .unwrap_or(true)
        });
    }

    fn observe(&self, hub: &Arc<Hub>, peer: &Arc<Peer>, event: &LinkEvent) {
        let first_from_peer = |method: &str| {
            // On stdio only plain ACP may come: no hello, and no other `_lembas` message.
            if self.config.stdio {
                if method.starts_with("_lembas/") {
                    hub.findings().push(
                        Finding::new(
                            ids::DEVICE_STDIO_PLAIN_ACP,
                            format!("`{method}` to an editor on serve --stdio"),
                        )
                        .on_link(peer.link()),
                    );
                }
                return;
            }
            let mut links = self.links.lock().unwrap_or_else(|p| p.into_inner());
            let state = links.entry(peer.link()).or_default();
            let first = !state.spoke;
            state.spoke = true;
            if first && method != methods::LEMBAS_HELLO {
                hub.findings().push(
                    Finding::new(
                        ids::DEVICE_HELLO_FIRST,
                        format!("the device's first message is `{method}`, not `_lembas/hello`"),
                    )
                    .on_link(peer.link()),
                );
            }
        };
        match event {
            LinkEvent::Notification { method, params, .. } => {
                first_from_peer(method);
                if method == methods::LEMBAS_HELLO {
                    self.chats.hello(peer.link(), params);
                    self.on_hello(hub, peer, params);
                }
                if method == methods::LEMBAS_SESSION_DELETED
                    && self.config.misbehave.breaks(ids::INSTANCE_DELETED_IGNORE)
                    && params
                        .get("sessionId")
                        .and_then(Value::as_str)
                        .is_some_and(|id| self.chats.chat(id).is_none())
                {
                    // Misbehaving: a delete of a chat it never had is taken as a broken link.
                    peer.close(1011, "unknown session");
                }
                if method == methods::LEMBAS_SESSION_DELETED
                    && self
                        .config
                        .misbehave
                        .breaks_way(ids::INSTANCE_DELETED_IGNORE, "stalls")
                    && params
                        .get("sessionId")
                        .and_then(Value::as_str)
                        .is_some_and(|id| self.chats.chat(id).is_none())
                    && let Ok(mut links) = self.links.lock()
                {
                    // Misbehaving: the link stays up, and nothing on it is answered any more.
                    links.entry(peer.link()).or_default().stalled = true;
                }
                if method == methods::LEMBAS_SESSION_DELETED
                    && self
                        .config
                        .misbehave
                        .breaks_way(ids::INSTANCE_DELETED_REMOVES_CHAT, "sends_delete")
                    && let Some(id) = params.get("sessionId").and_then(Value::as_str)
                    && self.chats.chat(id).is_some()
                {
                    // Misbehaving: the chat goes, and its delete is sent to the device as if
                    // the person had deleted it.
                    let answer = peer.begin_request(
                        methods::LEMBAS_SESSION_DELETE,
                        serde_json::json!({ "sessionId": id }),
                        Duration::from_secs(5),
                    );
                    tokio::spawn(answer);
                }
                self.chats.notified(peer.link(), method, params);
            }
            LinkEvent::Request(request) => first_from_peer(&request.method),
            LinkEvent::Response { .. } => {}
            LinkEvent::Closed(_) => {
                if let Ok(mut links) = self.links.lock()
                    && let Some(ended) = links.remove(&peer.link())
                    && let Ok(mut known) = self.known.lock()
                {
                    known.extend(ended.watch.sessions().cloned());
                }
                self.chats.closed(peer.link());
                return;
            }
        }
        self.watch(hub, peer, event);
        if let (
            LinkEvent::Response {
                method,
                outcome: Ok(_),
                ..
            },
            Some(applicability),
        ) = (event, &self.applicability)
            && method == methods::SESSION_PROMPT
        {
            applicability.turn_answered();
        }
        if let LinkEvent::Response {
            method,
            request_params,
            outcome: Ok(result),
            ..
        } = event
            && method == methods::SESSION_NEW
        {
            self.chats
                .learn(peer.link(), method, request_params, result);
        }
        match event {
            LinkEvent::Response {
                method,
                request_params,
                outcome,
                ..
            } if method == methods::INITIALIZE => {
                let hello = self
                    .links
                    .lock()
                    .ok()
                    .and_then(|l| l.get(&peer.link()).and_then(|s| s.hello_protocol));
                let lembas_client = request_params
                    .pointer("/clientCapabilities/_meta/lembas")
                    .is_some();
                if self
                    .config
                    .misbehave
                    .breaks(ids::INSTANCE_CAPABILITIES_RESPECT)
                {
                    // Misbehaving: a method the device may not have listed, right away.
                    let probe = peer.begin_request(
                        methods::LEMBAS_SESSION_STATUS,
                        json!({ "sessionId": "ses_probe" }),
                        self.config.patience,
                    );
                    tokio::spawn(async move {
                        let _ = probe.await;
                    });
                }
                if let Ok(result) = outcome {
                    self.chats.ready(peer, result);
                }
                let outcome = outcome.clone().map_err(|e| e.to_value());
                for finding in
                    initialize::check_initialize(&outcome, hello, self.config.spec, lembas_client)
                {
                    hub.findings().push(finding.on_link(peer.link()));
                }
            }
            _ => {}
        }
    }

    fn observe_sent(&self, _hub: &Arc<Hub>, peer: &Arc<Peer>, message: &Value) {
        // A prompt's Context counts from when it is sent: the turn's library calls come before
        // its answer.
        if message.get("method").and_then(Value::as_str) == Some(methods::SESSION_PROMPT)
            && let Some(params) = message.get("params")
        {
            self.chats
                .learn(peer.link(), methods::SESSION_PROMPT, params, &Value::Null);
        }
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
            self.answer_card(peer, request);
            return true;
        }
        // Any other request is one the client does not have: the hub answers -32601, unless
        // this instance misbehaves (silence, or a result as if it were done).
        let misbehave = &self.config.misbehave;
        if misbehave.breaks(ids::INSTANCE_METHOD_UNKNOWN) {
            return true;
        }
        if misbehave.breaks_way(ids::INSTANCE_METHOD_UNKNOWN, "pretends") {
            peer.respond(&request.id, Ok(serde_json::json!({})));
            return true;
        }
        false
    }
}
