//! The lvmh plugin: one pi session's link to the daemon (spec, "Transport 1" and "Reconnect &
//! buffering"). It numbers every daemon-bound event, keeps the last [`BUFFER_CAP`] of them,
//! dials and redials forever with capped, jittered exponential backoff, says hello with the
//! session snapshot, resends what the daemon lacks after `welcome`, and turns the daemon's
//! `prompt` and `abort` into a scripted agent's runs. The agent never waits for the link: an
//! event is numbered and kept at once, and goes out when a link is up.
//!
//! fake-device runs it as the plugin under a daemon's test; the fake daemon runs it for each
//! spawn (a session "in a container").

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio::sync::{Notify, mpsc, watch};

use super::envelope::{Envelope, fields, kinds};
use super::{BACKOFF_CAP, BUFFER_CAP, RESULT_PREVIEW_MAX, rules};
use crate::engine::{Behaviour, Hub};
use crate::jsonrpc::{LinkEvent, Peer};
use crate::rules::Misbehaviours;
use crate::transport::{FrameLimits, ws_client};

/// What the scripted agent answers a prompt with.
#[derive(Debug, Clone)]
pub struct AgentScript {
    /// The assistant's reply; `{prompt}` stands for the prompt's text.
    pub reply: String,
    /// How many `message_update` deltas the reply streams in.
    pub deltas: usize,
    /// The pause between two deltas.
    pub pace: Duration,
    /// A tool the agent calls before it answers: its name and what it returns.
    pub tool: Option<(String, String)>,
}

impl Default for AgentScript {
    fn default() -> Self {
        Self {
            reply: "Done: {prompt}".into(),
            deltas: 3,
            pace: Duration::from_millis(5),
            tool: None,
        }
    }
}

/// How the plugin runs.
#[derive(Debug, Clone)]
pub struct PluginConfig {
    /// The daemon's agent WebSocket (`ws://host:port/agent/ws`).
    pub url: String,
    /// `LVMH_TOKEN`.
    pub token: String,
    /// The session snapshot hello and `session_info` carry (`id`, `name`, `cwd`, …).
    pub session: Value,
    /// The first pause between two dials; it doubles up to [`BACKOFF_CAP`].
    pub backoff: Duration,
    /// How many unpersisted events are kept while the daemon is away.
    pub buffer_cap: usize,
    /// The agent's answers.
    pub agent: AgentScript,
    /// The plugin rules to break (`--misbehave`), to prove a daemon's test can catch it.
    pub misbehave: Misbehaviours,
    /// Each link's frame limits.
    pub limits: FrameLimits,
    /// Whether it dials at all: a plugin that does not is a pi session whose daemon is never
    /// reached (the session runs, its events kept).
    pub dial: bool,
    /// The last seq the session gave out before this process (a resumed session numbers on
    /// after it: the seq is kept for the session's lifetime); 0 for a new session.
    pub first_seq: u64,
}

impl PluginConfig {
    /// A plugin for session `id` dialing `url` with `token`, in `cwd`, as the spec's defaults
    /// have it.
    pub fn new(url: &str, token: &str, id: &str, cwd: &str) -> Self {
        Self {
            url: url.into(),
            token: token.into(),
            session: json!({
                "id": id,
                "name": null,
                "cwd": cwd,
                "model": "glm-5.3",
                "provider": "zai-renaud",
                "agent": false,
                "repo": null,
                "startedAt": super::now_ms(),
            }),
            backoff: Duration::from_millis(250),
            buffer_cap: BUFFER_CAP,
            agent: AgentScript::default(),
            misbehave: Misbehaviours::default(),
            limits: FrameLimits::default(),
            dial: true,
            first_seq: 0,
        }
    }

    /// The session's id.
    pub fn session_id(&self) -> String {
        self.session
            .get("id")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    }
}

/// The pause before dial number `attempt` (0 for the first redial): `first · 2^attempt`, at most
/// [`BACKOFF_CAP`], of which a random half is taken off (jitter), so plugins that lost the same
/// daemon do not all come back at once.
pub fn backoff(first: Duration, attempt: u32) -> Duration {
    let full = first
        .checked_mul(1u32 << attempt.min(20))
        .unwrap_or(BACKOFF_CAP)
        .min(BACKOFF_CAP);
    full.mul_f64(crate::random::between(0.5, 1.0))
}

/// A check of each frame the daemon sends (the double judging a daemon): what it broke.
pub type FrameCheck = Arc<dyn Fn(&str, &Value) -> Vec<crate::finding::Finding> + Send + Sync>;

/// How many of the events it sent the plugin remembers (seq and kind), for a page reload to be
/// compared with.
const SENT_KEPT: usize = 200_000;

/// How many of the last events keep a fingerprint of their fields, to compare with what a
/// daemon serves back (a field's value is kept as a hash, so a long text costs eight bytes).
const PRINTS_KEPT: usize = 10_000;

/// An event's top-level fields, each with a hash of its value (objects hashed with their keys
/// sorted, so a daemon that writes them back in another order serves the same event).
type Print = Vec<(String, u64)>;

fn hash_value(value: &Value, into: &mut impl std::hash::Hasher) {
    use std::hash::Hash;
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            for key in keys {
                key.hash(into);
                hash_value(&map[key], into);
            }
        }
        Value::Array(items) => {
            items.len().hash(into);
            for item in items {
                hash_value(item, into);
            }
        }
        other => other.to_string().hash(into),
    }
}

fn print_of(frame: &Value) -> Print {
    frame
        .as_object()
        .into_iter()
        .flatten()
        .map(|(key, value)| {
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            hash_value(value, &mut hasher);
            (key.clone(), std::hash::Hasher::finish(&hasher))
        })
        .collect()
}

/// The plugin's state.
#[derive(Default)]
struct State {
    /// Every event given out, `(seq, type)`, oldest first (at most [`SENT_KEPT`]).
    sent: VecDeque<(u64, String)>,
    /// The fingerprint of each of the last events given out, by seq (at most
    /// [`PRINTS_KEPT`]).
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
    /// The seqs that went out on a link, at most [`SENT_KEPT`] (a reload compares with them).
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

/// How long a plugin waits for `welcome` after its hello before it tries another link.
const WELCOME_WITHIN: Duration = Duration::from_secs(30);

/// WebSocket close 1001: the plugin's process goes away.
const GOING_AWAY: u16 = 1001;

/// The backlog of prompts a busy agent keeps (the TUI's type-ahead); more are dropped, and
/// said so in the log.
const PROMPT_QUEUE: usize = 256;

/// The plugin as its hub's behaviour: it follows the daemon's frames.
struct Follow(Weak<Plugin>);

impl Behaviour for Follow {
    fn observe(&self, _hub: &Arc<Hub>, peer: &Arc<Peer>, event: &LinkEvent) {
        let Some(plugin) = self.0.upgrade() else {
            return;
        };
        match event {
            LinkEvent::Notification { method, raw, .. } => plugin.on_frame(peer, method, raw),
            LinkEvent::Closed(_) => plugin.on_closed(peer),
            _ => {}
        }
    }

    fn framing(&self) -> crate::jsonrpc::Framing {
        super::framing()
    }

    fn watch(&self) -> Option<Arc<dyn crate::jsonrpc::MessageWatch>> {
        // The daemon's rules bind the serving side; the plugin's own shape misbehaviours bend
        // what it sends.
        let plugin = self.0.upgrade()?;
        super::shape_watch(crate::rules::Binds::Instance, &plugin.config.misbehave).into_shared()
    }
}

impl Plugin {
    /// Starts a plugin: the agent at once, the link in the background, on a hub of its own
    /// (with `scenario`'s variables and steps, when one runs over it). `check` sees every frame
    /// of the daemon's.
    pub fn start(
        config: PluginConfig,
        journal: Arc<crate::journal::Journal>,
        findings: Arc<crate::finding::Findings>,
        vars: crate::pattern::Vars,
        scenario: Option<&crate::scenario::Scenario>,
        check: Option<FrameCheck>,
    ) -> Result<Arc<Plugin>, String> {
        let (prompts, prompts_rx) = mpsc::channel(PROMPT_QUEUE);
        let mut made: Result<(), String> = Ok(());
        let plugin = Arc::new_cyclic(|me: &Weak<Plugin>| {
            let hub = Hub::for_scenario(
                Arc::new(Follow(me.clone())),
                scenario,
                vars,
                journal,
                findings,
            )
            .unwrap_or_else(|e| {
                made = Err(e);
                Hub::new(
                    Arc::new(Follow(me.clone())),
                    Default::default(),
                    Default::default(),
                    Arc::new(crate::journal::Journal::in_memory()),
                    Default::default(),
                )
            });
            let state = State {
                session: config.session.clone(),
                seq: config.first_seq,
                ..State::default()
            };
            Plugin {
                config,
                hub,
                state: Mutex::new(state),
                prompts,
                abort: Notify::new(),
                aborted: AtomicBool::new(false),
                stop: watch::channel(false).0,
                pending: std::sync::atomic::AtomicUsize::new(0),
                check,
            }
        });
        made?;
        if scenario.is_none() {
            plugin.hub.keep_nothing();
        }
        tokio::spawn(Arc::clone(&plugin).agent(prompts_rx));
        tokio::spawn(Arc::clone(&plugin).dial_forever());
        Ok(plugin)
    }

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

    /// The last seq given out.
    pub fn last_seq(&self) -> u64 {
        self.state.lock().map(|s| s.seq).unwrap_or(0)
    }

    /// The `lastSeq` of each welcome so far.
    pub fn welcomes(&self) -> Vec<u64> {
        self.state
            .lock()
            .map(|s| s.welcomes.clone())
            .unwrap_or_default()
    }

    /// How many events the last welcome had the plugin resend.
    pub fn replayed(&self) -> u64 {
        self.state.lock().map(|s| s.replayed).unwrap_or(0)
    }

    /// The plugin's network goes away for `span`: its link is closed at once (without a word,
    /// as a cable pulled) and it dials again only after `span`; the agent goes on meanwhile.
    pub fn unplug(&self, span: Duration) {
        let links = match self.state.lock() {
            Ok(mut state) => {
                state.unplugged_until = Some(tokio::time::Instant::now() + span);
                [state.live.take(), state.waiting.take()]
            }
            Err(_) => return,
        };
        for peer in links.into_iter().flatten() {
            peer.close(GOING_AWAY, "unplugged");
        }
    }

    /// Whether `peer` is the link the daemon welcomed and it is still up.
    fn is_live_on(&self, peer: &Arc<Peer>) -> bool {
        self.state
            .lock()
            .is_ok_and(|s| s.live.as_ref().is_some_and(|l| Arc::ptr_eq(l, peer)))
    }

    /// Whether the daemon welcomed `peer` (it may have ended since).
    fn welcomed_link(&self, peer: &Arc<Peer>) -> bool {
        self.state
            .lock()
            .is_ok_and(|s| s.last_welcomed == Some(peer.link()))
    }

    /// Whether a daemon welcomed the current link.
    pub fn is_live(&self) -> bool {
        self.state.lock().is_ok_and(|s| s.live.is_some())
    }

    /// A person typed `text` into the session's terminal: the agent runs it as it runs a
    /// prompt from the web.
    pub fn type_prompt(&self, text: &str) -> bool {
        // Counted before it is queued, so the agent never finishes it before it is counted.
        self.pending.fetch_add(1, Ordering::SeqCst);
        let queued = self.prompts.try_send(text.to_string()).is_ok();
        if !queued {
            self.pending.fetch_sub(1, Ordering::SeqCst);
        }
        queued
    }

    /// Whether the agent has run every prompt it took.
    pub fn is_idle(&self) -> bool {
        self.pending.load(Ordering::SeqCst) == 0
    }

    /// The seqs of the events that went out on a link (live or in a replay), at most the last
    /// 200,000: what a daemon can have.
    pub fn delivered(&self) -> std::collections::BTreeSet<u64> {
        self.state
            .lock()
            .map(|s| s.delivered.clone())
            .unwrap_or_default()
    }

    /// Every event given out so far, `(seq, type)`, oldest first.
    pub fn sent(&self) -> Vec<(u64, String)> {
        self.state
            .lock()
            .map(|s| s.sent.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// The seqs of the `served` events (a daemon's `GET …/events`) that are not what this
    /// plugin sent under that seq: a field it sent is missing or has another value (a field
    /// the daemon adds is its own). Only the last events sent keep what they held.
    pub fn altered(&self, served: &[Value]) -> Vec<u64> {
        let Ok(state) = self.state.lock() else {
            return Vec::new();
        };
        let prints: std::collections::HashMap<u64, &Print> = state
            .prints
            .iter()
            .map(|(seq, print)| (*seq, print))
            .collect();
        served
            .iter()
            .filter_map(|event| {
                let seq = event.get("seq").and_then(Value::as_u64)?;
                let sent = prints.get(&seq)?;
                let came = print_of(event);
                sent.iter()
                    .any(|field| !came.contains(field))
                    .then_some(seq)
            })
            .collect()
    }

    /// The session was renamed: `session_info` with the new snapshot.
    pub fn rename(&self, name: &str) {
        let session = {
            let Ok(mut state) = self.state.lock() else {
                return;
            };
            state.session["name"] = json!(name);
            state.session.clone()
        };
        let session = match self.config.misbehave.breaks(rules::SESSION_INFO) {
            true => json!({ "name": name }),
            false => session,
        };
        // Misbehaving: the whole snapshot, but as it was before the rename.
        let session = match self
            .config
            .misbehave
            .breaks_way(rules::SESSION_INFO, "stale")
        {
            true => self.config.session.clone(),
            false => session,
        };
        self.emit(kinds::SESSION_INFO, fields(json!({ "session": session })));
    }

    /// `count` tool updates at once (a long tool's output): what fills a buffer while the
    /// daemon is away.
    pub fn burst(&self, count: usize) {
        for n in 0..count {
            self.emit(
                kinds::TOOL_UPDATE,
                fields(json!({"toolCallId": "burst", "toolName": "bash", "partial": format!("line {n}\n")})),
            );
        }
    }

    /// Says `bye` and stops dialing (pi shuts down).
    pub fn quit(&self) {
        let reason = match self.config.misbehave.breaks(rules::BYE) {
            true => "exit",
            false => "shutdown",
        };
        // Misbehaving: gone without a word.
        if !self.config.misbehave.breaks_way(rules::BYE, "silent") {
            self.emit(kinds::BYE, fields(json!({ "reason": reason })));
        }
        self.stop_with(crate::transport::CLOSE_NORMAL, "bye");
    }

    fn stopped(&self) -> bool {
        *self.stop.borrow()
    }

    /// Resolves once the plugin stops.
    async fn until_stopped(&self) {
        let mut stop = self.stop.subscribe();
        let _ = stop.wait_for(|stopped| *stopped).await;
    }

    /// Says `bye` and stops, as [`Plugin::quit`], then waits (at most `within`) until the link
    /// that carried it has closed: a process that ends right after (pi on SIGTERM or SIGINT)
    /// gets its `bye` out first.
    pub async fn quit_and_wait(&self, within: std::time::Duration) {
        let live = self.state.lock().ok().and_then(|s| s.live.clone());
        self.quit();
        if let Some(peer) = live {
            let _ = tokio::time::timeout(within, peer.closed()).await;
        }
    }

    /// Stops at once, without a word (the process is killed).
    pub fn kill(&self) {
        self.stop_with(GOING_AWAY, "killed");
    }

    /// Stops dialing and closes its links, the one welcomed and the one waiting for it.
    fn stop_with(&self, code: u16, reason: &str) {
        self.stop.send_replace(true);
        let links = self
            .state
            .lock()
            .map(|mut s| [s.live.take(), s.waiting.take()])
            .unwrap_or_default();
        for peer in links.into_iter().flatten() {
            peer.close(code, reason);
        }
    }

    /// Numbers an event, keeps it, and sends it when a welcomed link is up. Never waits.
    pub fn emit(&self, kind: &str, payload: Map<String, Value>) {
        self.emit_under(None, kind, payload);
    }

    /// As [`Plugin::emit`], under `session`'s id instead of its own when one is given.
    fn emit_under(&self, session: Option<&str>, kind: &str, payload: Map<String, Value>) {
        let Ok(mut state) = self.state.lock() else {
            return;
        };
        state.seq += 1;
        let mut seq = state.seq;
        if self.config.misbehave.breaks(rules::SEQ_MONOTONIC) && seq == 3 {
            // Says 2 again: the daemon must see a seq that is not above the one before.
            seq = 2;
        }
        if self
            .config
            .misbehave
            .breaks_way(rules::SEQ_MONOTONIC, "swapped")
        {
            // Misbehaving: the third and fourth events numbered 4 and 3, so seq goes down.
            seq = match seq {
                3 => 4,
                4 => 3,
                other => other,
            };
        }
        let own = self.session_id();
        let mut frame = Envelope::frame(kind, session.unwrap_or(&own), seq, payload);
        if self.config.misbehave.breaks(rules::ENVELOPE)
            && let Value::Object(fields) = &mut frame
        {
            fields.remove("ts");
        }
        // Misbehaving: the time in seconds, not milliseconds.
        if self
            .config
            .misbehave
            .breaks_way(rules::ENVELOPE, "ts_seconds")
            && let Some(ts) = frame.get("ts").and_then(Value::as_u64)
        {
            frame["ts"] = json!(ts / 1000);
        }
        if state.buffer.len() >= self.config.buffer_cap.max(1)
            && let Some(oldest) = state.buffer.pop_front()
        {
            let seq = oldest.get("seq").and_then(Value::as_u64).unwrap_or(0);
            state.dropped_up_to = state.dropped_up_to.max(seq);
        }
        if state.sent.len() >= SENT_KEPT {
            state.sent.pop_front();
        }
        state.sent.push_back((seq, kind.to_string()));
        if state.prints.len() >= PRINTS_KEPT {
            state.prints.pop_front();
        }
        state.prints.push_back((seq, print_of(&frame)));
        state.buffer.push_back(frame.clone());
        if let Some(peer) = state.live.clone() {
            peer.send_frame(frame);
            deliver(&mut state, seq);
        }
    }

    fn on_frame(&self, peer: &Arc<Peer>, kind: &str, frame: &Value) {
        if let Some(check) = &self.check {
            for finding in check(kind, frame) {
                self.hub.findings().push(finding.on_link(peer.link()));
            }
        }
        match kind {
            kinds::WELCOME => {
                let last = frame.get("lastSeq").and_then(Value::as_u64).unwrap_or(0);
                self.welcomed(peer, last);
            }
            kinds::PROMPT => {
                let message = frame
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let busy = !self.is_idle();
                let misbehave = &self.config.misbehave;
                // Misbehaving: a prompt during a run taken as an interrupt, the reply cut short.
                if busy && misbehave.breaks(rules::PROMPT_STEER) {
                    self.aborted.store(true, Ordering::Relaxed);
                    self.abort.notify_waiters();
                }
                // Misbehaving: a prompt during a run dropped, as a TUI that is not listening.
                if busy && misbehave.breaks_way(rules::PROMPT_STEER, "dropped_while_busy") {
                    return;
                }
                if !self.type_prompt(message) {
                    tracing::warn!("a prompt from the daemon found the agent's queue full");
                }
            }
            kinds::ABORT if !self.config.misbehave.breaks(rules::ABORT) => {
                self.aborted.store(true, Ordering::Relaxed);
                self.abort.notify_waiters();
            }
            _ => {}
        }
    }

    /// The daemon has everything up to `last`: the rest of the buffer goes out, oldest first,
    /// then a notice of what the buffer dropped, and the link is live.
    fn welcomed(&self, peer: &Arc<Peer>, last: u64) {
        let notice = {
            let Ok(mut state) = self.state.lock() else {
                return;
            };
            if !state.waiting.as_ref().is_some_and(|w| Arc::ptr_eq(w, peer)) {
                return;
            }
            state.waiting = None;
            state.last_welcomed = Some(peer.link());
            state.welcomes.push(last);
            let misbehave = &self.config.misbehave;
            let from = match misbehave.breaks(rules::REPLAY_AFTER_LAST_SEQ) {
                // Resends the last one the daemon has too.
                true => last,
                // A daemon's lastSeq may be the largest there is.
                false => last.saturating_add(1),
            };
            state
                .buffer
                .retain(|f| f.get("seq").and_then(Value::as_u64).unwrap_or(0) >= from);
            if misbehave.breaks_way(rules::REPLAY_AFTER_LAST_SEQ, "skips_one") {
                // Misbehaving: the first event made while the link was down is left out.
                let delivered = &state.delivered;
                let first_unsent = state.buffer.iter().position(|f| {
                    !delivered.contains(&f.get("seq").and_then(Value::as_u64).unwrap_or(0))
                });
                if let Some(at) = first_unsent {
                    state.buffer.remove(at);
                }
            }
            let resent: Vec<u64> = state
                .buffer
                .iter()
                .map(|frame| {
                    peer.send_frame(frame.clone());
                    frame.get("seq").and_then(Value::as_u64).unwrap_or(0)
                })
                .collect();
            for seq in resent {
                deliver(&mut state, seq);
            }
            state.replayed = state.buffer.len() as u64;
            state.live = Some(peer.clone());
            // What the daemon lacks and the buffer no longer holds is lost: said so.
            let lost = state.dropped_up_to.saturating_sub(last);
            (lost > 0 && !misbehave.breaks(rules::BUFFER_OVERFLOW_NOTICE)).then_some(lost)
        };
        if let Some(dropped) = notice {
            // Misbehaving (`wrong_session`): the notice goes out under another session's id.
            let other = format!("{}-other", self.session_id());
            let under = self
                .config
                .misbehave
                .breaks_way(rules::BUFFER_OVERFLOW_NOTICE, "wrong_session")
                .then_some(other.as_str());
            self.emit_under(
                under,
                kinds::BUFFER_OVERFLOW,
                fields(json!({ "dropped": dropped })),
            );
        }
    }

    fn on_closed(&self, peer: &Arc<Peer>) {
        if let Ok(mut state) = self.state.lock() {
            if state.live.as_ref().is_some_and(|l| Arc::ptr_eq(l, peer)) {
                state.live = None;
            }
            if state.waiting.as_ref().is_some_and(|w| Arc::ptr_eq(w, peer)) {
                state.waiting = None;
            }
        }
    }

    fn hello(&self) -> Value {
        let session = self
            .state
            .lock()
            .map(|s| s.session.clone())
            .unwrap_or_else(|_| self.config.session.clone());
        Envelope::frame(
            kinds::HELLO,
            &self.session_id(),
            0,
            fields(json!({ "session": session })),
        )
    }

    /// Dials until stopped: a link, hello, then waits for it to end; between dials, the
    /// backoff. A daemon that is down changes nothing for the agent.
    async fn dial_forever(self: Arc<Self>) {
        if !self.config.dial {
            return;
        }
        let mut attempt: u32 = 0;
        while !self.stopped() {
            let unplugged = self.state.lock().ok().and_then(|s| s.unplugged_until);
            if let Some(until) = unplugged {
                tokio::select! {
                    () = tokio::time::sleep_until(until) => {}
                    () = self.until_stopped() => break,
                }
            }
            let request = ws_client::ClientRequest {
                url: self.config.url.clone(),
                bearer_token: Some(self.config.token.clone()),
                headers: Vec::new(),
                timeout: Duration::from_secs(10),
            };
            match ws_client::connect(request, self.config.limits).await {
                Ok(connection) => {
                    let peer = self.hub.attach(connection);
                    if let Ok(mut state) = self.state.lock() {
                        state.waiting = Some(peer.clone());
                    }
                    if self.config.misbehave.breaks(rules::HELLO_FIRST) {
                        peer.send_frame(Envelope::frame(
                            kinds::AGENT_SETTLED,
                            &self.session_id(),
                            0,
                            Map::new(),
                        ));
                    }
                    let mut hello = self.hello();
                    if self
                        .config
                        .misbehave
                        .breaks_way(rules::HELLO_FIRST, "no_session")
                        && let Value::Object(fields) = &mut hello
                    {
                        // Misbehaving: a hello without the session snapshot.
                        fields.remove("session");
                    }
                    peer.send_frame(hello);
                    // A daemon that never welcomes the link is left for another try.
                    let unwelcomed = async {
                        tokio::time::sleep(WELCOME_WITHIN).await;
                        if !self.is_live_on(&peer) {
                            peer.close(GOING_AWAY, "no welcome");
                        }
                        std::future::pending::<()>().await;
                    };
                    tokio::select! {
                        _ = peer.closed() => {}
                        () = self.until_stopped() => {}
                        () = unwelcomed => {}
                    }
                    // Only a link the daemon welcomed starts the backoff over: one that is
                    // refused by a close right after the upgrade backs off as any refusal.
                    if self.welcomed_link(&peer) {
                        attempt = 0;
                    }
                    if self.config.misbehave.breaks(rules::RECONNECT) {
                        // Gives up: the agent goes on, the daemon never hears of it again.
                        break;
                    }
                }
                Err(e) => {
                    tracing::debug!(url = %self.config.url, "the daemon is not there: {e}");
                    // Misbehaving: a refused dial ends the dialing (once a link was up).
                    if self
                        .config
                        .misbehave
                        .breaks_way(rules::RECONNECT, "refused")
                        && self.state.lock().is_ok_and(|s| s.last_welcomed.is_some())
                    {
                        break;
                    }
                }
            }
            if self.stopped() {
                break;
            }
            let pause = backoff(self.config.backoff, attempt);
            attempt = attempt.saturating_add(1);
            tokio::select! {
                () = tokio::time::sleep(pause) => {}
                () = self.until_stopped() => {}
            }
        }
    }

    /// The scripted agent: one run per prompt, in order (a prompt during a run waits, as
    /// typed-ahead input does).
    async fn agent(self: Arc<Self>, mut prompts: mpsc::Receiver<String>) {
        let mut message = 0u64;
        loop {
            let prompt = tokio::select! {
                prompt = prompts.recv() => prompt,
                () = self.until_stopped() => None,
            };
            let Some(prompt) = prompt else { break };
            self.aborted.store(false, Ordering::Relaxed);
            message += 1;
            let user = format!("u{message}");
            // Misbehaving (`wrong_role`): the prompt mirrored as a system message.
            let role = match self
                .config
                .misbehave
                .breaks_way(rules::PROMPT_MIRRORED, "wrong_role")
            {
                true => "system",
                false => "user",
            };
            if !self.config.misbehave.breaks(rules::PROMPT_MIRRORED) {
                self.emit(
                    kinds::MESSAGE_START,
                    fields(json!({"message": {"role": role, "id": user}})),
                );
                if self.config.misbehave.breaks(rules::UPDATES_ASSISTANT) {
                    self.emit(kinds::MESSAGE_UPDATE, fields(json!({ "delta": prompt })));
                }
                self.emit(
                    kinds::MESSAGE_END,
                    fields(json!({"message": whole_message(role, &user, &prompt, None)})),
                );
            }
            // Misbehaving: the run starts without agent_start.
            if !self
                .config
                .misbehave
                .breaks_way(rules::RUN_FRAMED, "no_start")
            {
                self.emit(kinds::AGENT_START, Map::new());
            }
            if let Some((tool, output)) = self.config.agent.tool.clone() {
                self.tool_call(message, &tool, &output);
            }
            let reply = self.config.agent.reply.replace("{prompt}", &prompt);
            let assistant = format!("a{message}");
            self.emit(
                kinds::MESSAGE_START,
                fields(json!({"message": {"role": "assistant", "id": assistant}})),
            );
            let said = self.stream(&reply).await;
            self.emit(
                kinds::MESSAGE_END,
                fields(json!({"message": whole_message("assistant", &assistant, &said, None)})),
            );
            if self
                .config
                .misbehave
                .breaks_way(rules::UPDATES_ASSISTANT, "after_end")
            {
                // Misbehaving: one more delta once the assistant's message has ended.
                self.emit(kinds::MESSAGE_UPDATE, fields(json!({ "delta": " more" })));
            }
            if self.aborted.load(Ordering::Relaxed)
                && self.config.misbehave.breaks_way(rules::ABORT, "unsettled")
            {
                // Misbehaving: the reply stops at the abort, but the run never ends or settles.
                self.pending.fetch_sub(1, Ordering::SeqCst);
                continue;
            }
            self.emit(
                kinds::AGENT_END,
                fields(json!({"usage": {"inputTokens": prompt.len(), "outputTokens": said.len()}})),
            );
            // Misbehaving: the run never settles.
            if !self.config.misbehave.breaks(rules::RUN_FRAMED) {
                self.emit(kinds::AGENT_SETTLED, Map::new());
            }
            self.pending.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// The assistant asks for a tool (a message whose `toolCalls` name it), the tool runs, and
    /// its result comes back as a `toolResult` message answering the call, as pi streams them.
    fn tool_call(&self, message: u64, tool: &str, output: &str) {
        let call = format!("call{message}");
        let asking = format!("a{message}t");
        self.emit(
            kinds::MESSAGE_START,
            fields(json!({"message": {"role": "assistant", "id": asking}})),
        );
        let mut asked = whole_message("assistant", &asking, "", None);
        asked["toolCalls"] = json!([{"id": call, "name": tool, "argsJson": r#"{"command":"ls"}"#}]);
        self.emit(kinds::MESSAGE_END, fields(json!({ "message": asked })));
        self.emit(
            kinds::TOOL_START,
            fields(json!({"toolCallId": call, "toolName": tool, "args": {"command": "ls"}})),
        );
        self.emit(
            kinds::TOOL_UPDATE,
            fields(json!({"toolCallId": call, "toolName": tool, "partial": output})),
        );
        let preview = match self.config.misbehave.breaks(rules::RESULT_PREVIEW) {
            true => output.to_string(),
            false => cut(output, RESULT_PREVIEW_MAX),
        };
        self.emit(
            kinds::TOOL_END,
            fields(json!({"toolCallId": call, "toolName": tool, "isError": false, "resultPreview": preview})),
        );
        let result = format!("r{message}");
        self.emit(
            kinds::MESSAGE_START,
            fields(json!({"message": {"role": "toolResult", "id": result}})),
        );
        let answer = whole_message(
            "toolResult",
            &result,
            &cut(output, RESULT_PREVIEW_MAX),
            Some(&call),
        );
        self.emit(kinds::MESSAGE_END, fields(json!({ "message": answer })));
    }

    /// Streams `reply` in deltas; gives what was said (less, when the run was aborted).
    async fn stream(&self, reply: &str) -> String {
        let chars: Vec<char> = reply.chars().collect();
        let parts = self.config.agent.deltas.max(1);
        let size = chars.len().div_ceil(parts).max(1);
        let mut said = String::new();
        for chunk in chars.chunks(size) {
            if self.aborted.load(Ordering::Relaxed) {
                break;
            }
            let delta: String = chunk.iter().collect();
            said.push_str(&delta);
            self.emit(kinds::MESSAGE_UPDATE, fields(json!({ "delta": delta })));
            tokio::select! {
                () = tokio::time::sleep(self.config.agent.pace) => {}
                () = self.abort.notified() => {}
            }
        }
        said
    }
}

/// Notes that event `seq` went out on a link.
fn deliver(state: &mut State, seq: u64) {
    state.delivered.insert(seq);
    while state.delivered.len() > SENT_KEPT {
        state.delivered.pop_first();
    }
}

/// A message as `message_end` carries it (spec, "Message shape").
fn whole_message(role: &str, id: &str, text: &str, tool_call_id: Option<&str>) -> Value {
    json!({
        "role": role,
        "id": id,
        "text": text,
        "thinking": null,
        "toolCalls": [],
        "toolCallId": tool_call_id,
    })
}

/// `text` cut to at most `max` bytes, on a character boundary.
fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_string()
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_served_event_is_the_sent_one_whatever_its_key_order_and_whatever_the_daemon_adds() {
        let sent = print_of(&serde_json::json!({
            "v": 1, "seq": 4, "type": "message_end",
            "message": {"role": "assistant", "text": "hello", "id": "m1"}
        }));
        let same = print_of(&serde_json::json!({
            "type": "message_end", "seq": 4, "v": 1, "storedAt": 17,
            "message": {"id": "m1", "text": "hello", "role": "assistant"}
        }));
        assert!(sent.iter().all(|field| same.contains(field)));
        let cut = print_of(&serde_json::json!({
            "v": 1, "seq": 4, "type": "message_end",
            "message": {"role": "assistant", "text": "", "id": "m1"}
        }));
        assert!(!sent.iter().all(|field| cut.contains(field)));
        let lacking = print_of(&serde_json::json!({"v": 1, "seq": 4, "type": "message_end"}));
        assert!(!sent.iter().all(|field| lacking.contains(field)));
    }

    use super::*;

    #[test]
    fn the_backoff_doubles_to_its_cap_and_jitter_only_shortens_it() {
        let first = Duration::from_millis(250);
        for attempt in 0..40 {
            let full = (first * (1u32 << attempt.min(20))).min(BACKOFF_CAP);
            let pause = backoff(first, attempt);
            assert!(pause <= BACKOFF_CAP, "attempt {attempt}: {pause:?}");
            assert!(
                pause >= full / 2 && pause <= full,
                "attempt {attempt}: {pause:?}"
            );
        }
    }

    #[test]
    fn a_preview_is_cut_on_a_character_boundary() {
        let long = "é".repeat(2000);
        let preview = cut(&long, RESULT_PREVIEW_MAX);
        assert!(preview.len() <= RESULT_PREVIEW_MAX);
        assert_eq!(preview.len(), 2048);
    }
}
