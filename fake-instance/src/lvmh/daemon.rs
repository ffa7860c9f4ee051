//! The fake daemon's model: the plugin links it welcomes and checks, the browser links it feeds,
//! and the store between them (spec, "Transport 1" and "Transport 3").
//!
//! Every link of the run is on one hub, so a scenario's `expect` steps see the plugins' and
//! the browsers' frames alike; which a link is comes from the route that accepted it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use harness::engine::{Behaviour, Hub};
use harness::finding::Finding;
use harness::jsonrpc::{LinkEvent, Peer};
use harness::lvmh::envelope::{fields, is_persisted, kinds};
use harness::lvmh::{Envelope, RESULT_PREVIEW_MAX, rules};
use harness::rules::Misbehaviours;
use serde_json::{Map, Value, json};

use super::store::Store;

/// How far past 2048 characters a cut preview may run: room for a marker saying it was cut
/// ("…[truncated]"). The spec's "2KB" may count bytes, characters or UTF-16 units: characters
/// accept each of those readings' cuts of ASCII and of any other text.
const PREVIEW_MARKER_ALLOWANCE: usize = 32;

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

    /// `GET /api/sessions`: every session with whether its plugin is linked.
    pub fn session_list(&self) -> Vec<Value> {
        let online: Vec<String> = self
            .online
            .lock()
            .map(|o| o.keys().cloned().collect())
            .unwrap_or_default();
        let Ok(store) = self.store.lock() else {
            return Vec::new();
        };
        store
            .sessions()
            .iter()
            .filter(|(_, s)| s.info.is_object())
            .map(|(id, s)| {
                let info = &s.info;
                json!({
                    "id": id,
                    "name": info.get("name").cloned().unwrap_or(Value::Null),
                    "cwd": info.get("cwd").cloned().unwrap_or(Value::Null),
                    "model": info.get("model").cloned().unwrap_or(Value::Null),
                    "provider": info.get("provider").cloned().unwrap_or(Value::Null),
                    // Misbehaving: the spawned session is not said to be an agent's.
                    "agent": match self.misbehave.breaks_way(rules::SPAWN, "not_agent") {
                        true => json!(false),
                        false => info.get("agent").cloned().unwrap_or(json!(false)),
                    },
                    "repo": info.get("repo").cloned().unwrap_or(Value::Null),
                    "startedAt": info.get("startedAt").cloned().unwrap_or(Value::Null),
                    // A daemon told to break the rule keeps a session it ever saw online.
                    // Misbehaving (`offline_while_linked`): a linked session is said offline.
                    "online": (online.contains(id)
                        && !self.misbehave.breaks_way(rules::ONLINE, "offline_while_linked"))
                        || self.misbehave.breaks(rules::ONLINE),
                    "lastEventAt": s.last_event_at,
                })
            })
            .collect()
    }

    /// `GET /api/sessions/:id/events`: persisted events after `after`, at most `limit`.
    pub fn events(&self, id: &str, after: u64, limit: usize) -> Vec<Value> {
        self.store
            .lock()
            .map(|s| {
                let every = self.misbehave.breaks(rules::EVENTS_PER_SESSION);
                let newest = self
                    .misbehave
                    .breaks_way(rules::EVENTS_PER_SESSION, "newest_for_unknown");
                let ids: Vec<&String> = match s.sessions().contains_key(id) {
                    // Misbehaving: the route's session ignored, every session's events served.
                    _ if every => s.sessions().keys().collect(),
                    // Misbehaving: a session it does not have falls back to the newest one.
                    false if newest => s.newest_session().into_iter().collect(),
                    _ => return s.events(id, after, limit),
                };
                ids.into_iter()
                    .flat_map(|id| s.events(id, after, limit))
                    .take(limit)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The store, for settings.
    pub fn with_store<T>(&self, f: impl FnOnce(&mut Store) -> T) -> Option<T> {
        self.store.lock().ok().map(|mut s| f(&mut s))
    }

    /// Sends `prompt` to the session's plugin; false when it is offline.
    pub fn prompt(&self, id: &str, message: &str) -> Option<String> {
        let peer = self.online.lock().ok()?.get(id).cloned()?;
        let n = self
            .prompts
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            + 1;
        let prompt_id = format!("p{n}");
        let mut frame = Envelope::frame(
            kinds::PROMPT,
            id,
            0,
            fields(json!({"promptId": prompt_id, "message": message})),
        );
        if self.misbehave.breaks(rules::PROMPT_ROUTED)
            && let Some(fields) = frame.as_object_mut()
        {
            fields.remove("promptId");
        }
        if self
            .misbehave
            .breaks_way(rules::PROMPT_ROUTED, "message_object")
        {
            // Misbehaving: the message wrapped in an object, not the string itself.
            frame["message"] = json!({ "text": message });
        }
        peer.send_frame(frame);
        Some(prompt_id)
    }

    /// Sends `abort` to the session's plugin; false when it is offline.
    pub fn abort(&self, id: &str) -> bool {
        let Some(peer) = self.online.lock().ok().and_then(|o| o.get(id).cloned()) else {
            return false;
        };
        if self.misbehave.breaks(rules::ABORT_ROUTED) {
            return true;
        }
        // Misbehaving: the abort names a session other than the one it is for.
        let named = match self
            .misbehave
            .breaks_way(rules::ABORT_ROUTED, "other_session")
        {
            true => format!("{id}-other"),
            false => id.to_string(),
        };
        peer.send_frame(Envelope::frame(kinds::ABORT, &named, 0, Map::new()));
        true
    }

    /// Refuses plugins' dials for `span` (503), as a daemon that is down would.
    pub fn refuse_for(&self, span: Duration) {
        if let Ok(mut until) = self.refuse_until.lock() {
            *until = Some(tokio::time::Instant::now() + span);
        }
    }

    /// Whether the agent link refuses plugins now.
    pub fn refusing(&self) -> bool {
        self.refuse_until
            .lock()
            .is_ok_and(|u| u.is_some_and(|until| tokio::time::Instant::now() < until))
    }

    /// Closes every plugin link (the daemon drops them), with `code`; gives how many.
    pub fn drop_plugins(&self, code: u16) -> usize {
        // Every plugin link, those still in their handshake too.
        let peers: Vec<Arc<Peer>> = self
            .agents
            .lock()
            .map(|a| a.values().filter_map(|l| l.peer.clone()).collect())
            .unwrap_or_default();
        for peer in &peers {
            peer.close(code, "the daemon dropped the link");
        }
        peers.len()
    }

    /// What the web was shown and fetched.
    pub fn web(&self) -> &super::web_seen::WebSeen {
        &self.web
    }

    /// Closes every browser's link at once (its network blinked). Gives how many there were
    /// and the sessions they were subscribed to.
    pub fn drop_browsers(&self, code: u16) -> (usize, Vec<String>) {
        // Out of the fan-out first, so what the web was shown stops growing before it is noted.
        let links: Vec<(Arc<Peer>, Option<String>)> = self
            .browsers
            .lock()
            .map(|mut b| b.drain().map(|(_, l)| (l.peer, l.subscribed)).collect())
            .unwrap_or_default();
        self.web.dropped();
        for (peer, _) in &links {
            peer.close(code, "the browser's network went away");
        }
        let subscribed = links.iter().filter_map(|(_, s)| s.clone()).collect();
        (links.len(), subscribed)
    }

    /// Tells every browser the session list (it changed).
    pub fn list_changed(&self) {
        if self.misbehave.breaks(rules::SESSION_LIST) {
            return;
        }
        let frame = json!({"type": kinds::SESSION_LIST, "sessions": self.session_list()});
        for peer in self.browser_peers(None) {
            peer.send_frame(frame.clone());
        }
    }

    /// Tells every browser the spawn jobs.
    pub fn spawn_status_changed(&self, jobs: Vec<Value>) {
        if self.misbehave.breaks(rules::SPAWN_STATUS_PUSHED) {
            return;
        }
        // Misbehaving: the frame lists no job while one runs.
        let jobs = match self
            .misbehave
            .breaks_way(rules::SPAWN_STATUS_PUSHED, "empty_jobs")
        {
            true => Vec::new(),
            false => jobs,
        };
        if let Ok(mut told) = self.spawn_jobs.lock() {
            told.clone_from(&jobs);
        }
        let frame = json!({"type": kinds::SPAWN_STATUS, "jobs": jobs});
        for peer in self.browser_peers(None) {
            peer.send_frame(frame.clone());
        }
    }

    /// The `spawn_status` frame a browser opening now is sent: none while no job was told.
    fn spawn_status_now(&self) -> Option<Value> {
        let jobs = self.spawn_jobs.lock().ok()?.clone();
        (!jobs.is_empty()).then(|| json!({"type": kinds::SPAWN_STATUS, "jobs": jobs}))
    }

    /// The browsers' links that unsubscribed from `session` last.
    fn left_browsers(&self, session: &str) -> Vec<Arc<Peer>> {
        self.browsers
            .lock()
            .map(|b| {
                b.values()
                    .filter(|l| l.left.as_deref() == Some(session))
                    .map(|l| l.peer.clone())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The browsers' links, all or those subscribed to `session`.
    fn browser_peers(&self, session: Option<&str>) -> Vec<Arc<Peer>> {
        self.browsers
            .lock()
            .map(|b| {
                b.values()
                    .filter(|l| session.is_none_or(|s| l.subscribed.as_deref() == Some(s)))
                    .map(|l| l.peer.clone())
                    .collect()
            })
            .unwrap_or_default()
    }

    fn on_hello(&self, hub: &Arc<Hub>, peer: &Arc<Peer>, frame: &Value) {
        let Some(session) = frame.get("session").filter(|s| s.is_object()).cloned() else {
            find(
                hub,
                peer,
                rules::HELLO_FIRST,
                "hello carries no `session` snapshot".into(),
                frame,
            );
            return;
        };
        let id = frame
            .get("sessionId")
            .and_then(Value::as_str)
            .or_else(|| session.get("id").and_then(Value::as_str))
            .unwrap_or_default()
            .to_string();
        let last = match self.store.lock() {
            Ok(mut store) => {
                store.session(session);
                store.last_seq(&id)
            }
            Err(_) => 0,
        };
        if let Ok(mut agents) = self.agents.lock() {
            let link = agents.entry(peer.link()).or_default();
            link.session = Some(id.clone());
            // A hostile plugin's seq may be the largest there is.
            link.replay_from = Some(last.saturating_add(1));
            link.last_seq = None;
            link.seen_at_welcome = self
                .seen
                .lock()
                .ok()
                .and_then(|s| s.get(&id).map(|s| s.max_seq))
                .unwrap_or(0)
                .max(last);
        }
        // A gap of the session's last link may still be excused by a notice on this one.
        let carried = self.gaps.lock().ok().and_then(|g| g.get(&id).cloned());
        if let Some(why) = carried {
            self.watch_gap(hub, peer, &id, why);
        }
        if let Ok(mut online) = self.online.lock() {
            online.insert(id.clone(), peer.clone());
        }
        let said = match self.misbehave.breaks(rules::WELCOME_LAST_SEQ) && last > 0 {
            // Says it has one event less than it has.
            true => last - 1,
            // Says it has one event more than it has: the plugin will not resend it.
            false
                if self
                    .misbehave
                    .breaks_way(rules::WELCOME_LAST_SEQ, "one_more")
                    && last > 0 =>
            {
                last + 1
            }
            false => last,
        };
        let mut welcome =
            Envelope::frame(kinds::WELCOME, &id, 0, fields(json!({ "lastSeq": said })));
        if self.misbehave.breaks(rules::DAEMON_ENVELOPE)
            && let Some(fields) = welcome.as_object_mut()
        {
            fields.remove("ts");
        }
        if self.misbehave.breaks_way(rules::DAEMON_ENVELOPE, "v2") {
            welcome["v"] = json!(2);
        }
        peer.send_frame(welcome);
        self.list_changed();
    }

    fn on_event(&self, hub: &Arc<Hub>, peer: &Arc<Peer>, kind: &str, frame: &Value) {
        let envelope = match Envelope::read(frame) {
            Ok(envelope) if envelope.version == harness::lvmh::VERSION => envelope,
            Ok(envelope) => {
                let why = format!("`v` is {}, not 1", envelope.version);
                return find(hub, peer, rules::ENVELOPE, why, frame);
            }
            Err(why) => return find(hub, peer, rules::ENVELOPE, why, frame),
        };
        // Reported, and the frame still taken: its time is only wrongly stamped.
        if let Some(why) = envelope.ts_unit_error() {
            find(hub, peer, rules::ENVELOPE, why, frame);
        }
        if kind == kinds::HELLO {
            return self.on_hello(hub, peer, frame);
        }
        let named = self
            .agents
            .lock()
            .ok()
            .and_then(|a| a.get(&peer.link()).and_then(|l| l.session.clone()));
        if let Some(named) = &named
            && *named != envelope.session_id
        {
            let why = format!(
                "sessionId `{}` is not the session this link's hello named (`{named}`); the event is not kept",
                envelope.session_id
            );
            return find(hub, peer, rules::ENVELOPE, why, frame);
        }
        let Some(check) = self.check_order(peer, &envelope) else {
            return find(
                hub,
                peer,
                rules::HELLO_FIRST,
                format!("`{kind}` came before hello"),
                frame,
            );
        };
        match check {
            Order::Fine => {}
            Order::Broken(rule, why) => find(hub, peer, rule, why, frame),
            Order::Gap(from, to) => {
                self.not_whole(&envelope.session_id);
                let why = format!(
                    "after welcome said lastSeq {}, the first event had seq {to}: {from}..{} were lost, and no buffer_overflow said so",
                    from - 1,
                    to - 1
                );
                let session = envelope.session_id.clone();
                if let Ok(mut gaps) = self.gaps.lock() {
                    gaps.insert(session.clone(), why.clone());
                }
                self.watch_gap(hub, peer, &session, why);
            }
        }
        if kind == kinds::BUFFER_OVERFLOW {
            self.not_whole(&envelope.session_id);
        }
        if kind == kinds::BUFFER_OVERFLOW
            && let Ok(mut gaps) = self.gaps.lock()
        {
            gaps.remove(&envelope.session_id);
        }
        if kind == kinds::SESSION_INFO
            && let Some(session) = frame.get("session").filter(|s| s.is_object())
        {
            // A rename or a model change: the list shows it.
            if let Ok(mut store) = self.store.lock() {
                let mut info = session.clone();
                info["id"] = json!(envelope.session_id);
                store.session(info);
            }
            self.list_changed();
        }
        self.follow_messages(hub, peer, &envelope, frame);
        if kind == kinds::TOOL_END
            && let Some(preview) = frame.get("resultPreview").and_then(Value::as_str)
            && preview.chars().count() > RESULT_PREVIEW_MAX + PREVIEW_MARKER_ALLOWANCE
        {
            find(
                hub,
                peer,
                rules::RESULT_PREVIEW,
                format!(
                    "resultPreview is {} characters, not cut to 2 KB",
                    preview.chars().count()
                ),
                frame,
            );
        }
        let persist = is_persisted(kind)
            || self.misbehave.breaks(rules::UPDATES_NOT_PERSISTED)
            || kind == kinds::BUFFER_OVERFLOW;
        let dropped = self.misbehave.breaks(rules::PERSISTS_EVENTS) && kind == kinds::AGENT_START;
        if persist
            && !dropped
            && let Ok(mut store) = self.store.lock()
        {
            if kind == kinds::MESSAGE_END
                && self.misbehave.breaks_way(rules::PERSISTS_EVENTS, "altered")
            {
                let mut cut = frame.clone();
                if let Some(text) = cut.pointer_mut("/message/text") {
                    *text = json!("");
                }
                store.persist(&envelope, &cut);
            } else {
                store.persist(&envelope, frame);
            }
        }
        // Misbehaving: the live deltas go out in batches naming another session.
        let named = match kind == kinds::MESSAGE_UPDATE
            && self
                .misbehave
                .breaks_way(rules::UPDATES_LIVE, "wrong_session")
        {
            true => format!("{}-other", envelope.session_id),
            false => envelope.session_id.clone(),
        };
        let batch = json!({
            "type": kinds::EVENTS,
            "sessionId": named,
            "after": envelope.seq.saturating_sub(1),
            "events": [frame],
        });
        let withheld = !is_persisted(kind) && self.misbehave.breaks(rules::UPDATES_LIVE);
        let mut to = self.browser_peers(Some(&envelope.session_id));
        if kind == kinds::MESSAGE_UPDATE && self.misbehave.breaks_way(rules::UNSUBSCRIBE, "deltas")
        {
            to.extend(self.left_browsers(&envelope.session_id));
        }
        for browser in to {
            if !withheld {
                browser.send_frame(batch.clone());
                self.web
                    .shown(&envelope.session_id, envelope.seq, is_persisted(kind));
            }
        }
    }

    /// Deltas belong to an open assistant message, followed per session (a message open when
    /// a link dropped goes on on the next).
    fn follow_messages(
        &self,
        hub: &Arc<Hub>,
        peer: &Arc<Peer>,
        envelope: &Envelope,
        frame: &Value,
    ) {
        let kind = envelope.kind.as_str();
        let role = frame
            .pointer("/message/role")
            .and_then(Value::as_str)
            .map(str::to_string);
        let (open, whole, unstarted_end) = {
            let Ok(mut seen) = self.seen.lock() else {
                return;
            };
            let session = seen.entry(envelope.session_id.clone()).or_default();
            let whole = *session.whole.get_or_insert(envelope.seq == 1);
            let mut unstarted_end = false;
            match kind {
                kinds::MESSAGE_START => session.open_role = role,
                kinds::MESSAGE_END => session.open_role = None,
                kinds::AGENT_START => session.run_open = true,
                kinds::AGENT_END => {
                    unstarted_end = whole && !session.run_open;
                    session.run_open = false;
                }
                _ => {}
            }
            (session.open_role.clone(), whole, unstarted_end)
        };
        if kind == kinds::MESSAGE_UPDATE {
            let why = match open.as_deref() {
                Some("assistant") => None,
                Some(role) => Some(format!("a message_update while a `{role}` message is open")),
                // Between two messages: the last one ended, the next has not started.
                None if whole => Some("a message_update while no message is open".to_string()),
                None => None,
            };
            if let Some(why) = why {
                find(hub, peer, rules::UPDATES_ASSISTANT, why, frame);
            }
        }
        if unstarted_end {
            let why = "an agent_end with no agent_start since the last run ended".to_string();
            find(hub, peer, rules::RUN_FRAMED, why, frame);
        }
    }

    /// The daemon lacks events of `session` (lost to a full buffer).
    fn not_whole(&self, session: &str) {
        if let Ok(mut seen) = self.seen.lock() {
            seen.entry(session.to_string()).or_default().whole = Some(false);
        }
    }

    /// Reports the session's gap on `peer` unless a `buffer_overflow` excuses it within the
    /// patience (the link's end leaves it to the session's next link).
    fn watch_gap(&self, hub: &Arc<Hub>, peer: &Arc<Peer>, session: &str, why: String) {
        let (gaps, session) = (self.gaps.clone(), session.to_string());
        hub.watchdog(
            peer,
            self.patience,
            Finding::new(rules::REPLAY_AFTER_LAST_SEQ, why),
            None,
            move || gaps.lock().map_or(true, |g| !g.contains_key(&session)),
        );
    }

    fn check_order(&self, peer: &Arc<Peer>, envelope: &Envelope) -> Option<Order> {
        if let Ok(mut seen) = self.seen.lock() {
            let session = seen.entry(envelope.session_id.clone()).or_default();
            session.max_seq = session.max_seq.max(envelope.seq);
        }
        let mut agents = self.agents.lock().ok()?;
        let link = agents.get_mut(&peer.link())?;
        let from = link.replay_from?;
        // Seqs the daemon saw live but did not keep (deltas) need not come again.
        let allowed = link.seen_at_welcome.max(from - 1).saturating_add(1);
        let order = match link.last_seq {
            None if envelope.seq < from => Order::Broken(
                rules::REPLAY_AFTER_LAST_SEQ,
                format!(
                    "after welcome said lastSeq {}, the first event had seq {}, which the daemon has already",
                    from - 1,
                    envelope.seq
                ),
            ),
            None if envelope.seq > allowed => Order::Gap(allowed, envelope.seq),
            None => Order::Fine,
            Some(last) if envelope.seq <= last => Order::Broken(
                rules::SEQ_MONOTONIC,
                format!(
                    "seq {} came after seq {last}: a session's seq only goes up",
                    envelope.seq
                ),
            ),
            Some(_) => Order::Fine,
        };
        link.last_seq = Some(envelope.seq);
        Some(order)
    }

    fn on_closed(&self, peer: &Arc<Peer>) {
        let link = self
            .agents
            .lock()
            .ok()
            .and_then(|mut a| a.remove(&peer.link()));
        let stale = self.misbehave.breaks_way(rules::SESSION_LIST, "stale");
        if let Some(session) = link.and_then(|l| l.session)
            && self
                .online
                .lock()
                .is_ok_and(|o| o.get(&session).is_some_and(|p| Arc::ptr_eq(p, peer)))
        {
            if stale {
                // Misbehaving: the browsers are told the list as it was before the change.
                self.list_changed();
            }
            if let Ok(mut online) = self.online.lock() {
                online.remove(&session);
            }
            if !stale {
                self.list_changed();
            }
        }
        if let Ok(mut browsers) = self.browsers.lock() {
            browsers.remove(&peer.link());
        }
    }

    fn on_browser(&self, peer: &Arc<Peer>, kind: &str, frame: &Value) {
        let session = frame
            .get("sessionId")
            .and_then(Value::as_str)
            .map(str::to_string);
        if let Ok(mut browsers) = self.browsers.lock()
            && let Some(browser) = browsers.get_mut(&peer.link())
        {
            match kind {
                kinds::SUBSCRIBE => browser.subscribed = session,
                // A daemon told to break the rule keeps streaming.
                kinds::UNSUBSCRIBE if self.misbehave.breaks(rules::UNSUBSCRIBE) => {}
                kinds::UNSUBSCRIBE if browser.subscribed == session => {
                    browser.subscribed = None;
                    browser.left = session;
                }
                _ => {}
            }
        }
    }
}

enum Order {
    Fine,
    Broken(&'static str, String),
    Gap(u64, u64),
}

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
            if let Ok(mut browsers) = self.browsers.lock() {
                browsers.insert(
                    peer.link(),
                    BrowserLink {
                        peer: peer.clone(),
                        subscribed: None,
                        left: None,
                    },
                );
            }
            let mut list = json!({"type": kinds::SESSION_LIST, "sessions": self.session_list()});
            if self
                .misbehave
                .breaks_way(rules::GITLAB_TOKEN_HIDDEN, "in_frame")
                && let Some(token) = self
                    .with_store(|s| s.setting(super::gitlab::TOKEN_KEY).map(str::to_string))
                    .flatten()
            {
                // Misbehaving: the kept GitLab token rides along in a browser's frame.
                list["gitlab"] = json!({ "token": token });
            }
            peer.send_frame(list);
            if let Some(frame) = self.spawn_status_now() {
                peer.send_frame(frame);
            }
        } else if let Ok(mut agents) = self.agents.lock() {
            agents.insert(
                peer.link(),
                AgentLink {
                    peer: Some(peer.clone()),
                    ..AgentLink::default()
                },
            );
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
