//! LLeMbas's chats on a device, as its web UI keeps them: each chat is a device session, with
//! its transcript and the turns it sent. A person in the web UI opens chats, writes in them
//! (a prompt with a new turn id, or a steer while a turn runs), rewinds them and deletes them;
//! a terminal's shared session becomes a chat when it is announced. Deletes that could not be
//! delivered are kept (in the state directory when there is one) and sent again on the next
//! link, until answered or refused five times.

use harness::lembas::methods;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use harness::engine::Hub;
use harness::jsonrpc::{INVALID_PARAMS, Peer, RequestError};
use harness::rules::{Misbehaviours, ids};
use serde_json::{Value, json};

/// How often a delete is refused before LLeMbas gives it up (spec, `_lembas/session/delete`).
pub const DELETE_REFUSALS: u32 = 5;

/// How long a turn may run before the client stops waiting for its answer.
const TURN_PATIENCE: Duration = Duration::from_secs(600);

/// What the client knows of a link's device, from its hello and initialize.
#[derive(Debug, Clone, Default)]
pub struct LinkFacts {
    /// The device said hello: `roots` are its.
    pub hello: bool,
    /// `initialize` was answered: the link is ready for requests.
    pub ready: bool,
    /// The capabilities the device listed.
    pub capabilities: Vec<String>,
    /// Its roots (hello's `limits.roots`).
    pub roots: Vec<String>,
    /// Which device it is (by the token it linked with; never the token itself).
    pub device: String,
    /// The login the device dialled through (initialize's `_meta.lembas.connection`): the
    /// first part of the device's own refs to this instance's models.
    pub connection: Option<String>,
}

/// One line of a chat's transcript.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Line {
    /// `user` or `assistant`.
    pub role: String,
    /// What was said.
    pub text: String,
    /// The turn it belongs to.
    pub turn_id: Option<String>,
}

/// A chat: a device session as the web UI shows it.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct Chat {
    /// The device's session id.
    pub session_id: String,
    /// The device the chat lives on.
    #[serde(default)]
    pub device: String,
    /// Made from a terminal's announce (not opened here).
    pub from_terminal: bool,
    /// The terminal let it go (`left`).
    pub left: bool,
    /// What was said, in order.
    pub transcript: Vec<Line>,
    /// Turns sent and not yet answered, oldest first: their ids and texts (a turn the device
    /// turns out not to know is sent again as it was).
    pub in_flight: Vec<(String, String)>,
    /// Every turn id this chat ever sent (a new message never reuses one).
    pub sent: Vec<String>,
    /// The chat's `Context` (system_prompt, personalization, library, prototypes), as set.
    #[serde(default)]
    pub context: serde_json::Map<String, Value>,
    /// The modes the device offered for the session (its session/new answer's
    /// `availableModes`); empty: not known here.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub modes: Vec<String>,
    /// The files' blocks a turn carries besides its text, by turn id (sent again with it).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub attached: BTreeMap<String, Vec<Value>>,
    /// The agent's text of the turn now running, as it streams.
    #[serde(skip)]
    streaming: String,
    /// The link its session was opened on (0: not known, as after a restart): a device that
    /// does not list `sessions` keeps no session past its link.
    #[serde(skip)]
    link: u32,
}

impl Chat {
    /// The `Context` fields the device takes (only those whose capability it listed).
    fn context(&self, facts: &LinkFacts) -> Option<Value> {
        let listed: serde_json::Map<String, Value> = self
            .context
            .iter()
            .filter(|(field, _)| {
                let needed = match field.as_str() {
                    "library" => "library",
                    "prototypes" => "prototypes",
                    _ => "context",
                };
                facts.capabilities.iter().any(|c| c == needed)
            })
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        (!listed.is_empty()).then_some(Value::Object(listed))
    }
}

/// A delete not yet answered: the device it is for, and how often it was refused.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PendingDelete {
    /// The device the chat lived on.
    pub device: String,
    /// Refusals so far.
    pub refusals: u32,
}

/// How the chats behave.
#[derive(Debug, Clone)]
pub struct ChatsConfig {
    /// How long a device may take to answer a request.
    pub patience: Duration,
    /// The rules to break.
    pub misbehave: Misbehaviours,
    /// Where undelivered deletes are kept (`None`: in memory only).
    pub state_dir: Option<PathBuf>,
}

#[derive(Debug, Default)]
struct Inner {
    chats: BTreeMap<String, Chat>,
    /// Deletes not yet answered, by session.
    pending_deletes: BTreeMap<String, PendingDelete>,
    /// Which device each link is.
    devices: HashMap<u32, String>,
    /// Cards taken down (`_lembas/permission/settled`), by toolCallId.
    settled: HashSet<String>,
    /// The sessions of the cards taken down.
    settled_sessions: HashSet<String>,
    /// Sessions the device said it deleted: never made into chats again, even by an answer to
    /// session/new read after the `deleted` came.
    gone: HashSet<String>,
    /// Chats moved to a new session (a device without `sessions`, written to after a redial):
    /// the old session id, which the person's page still names, to the new one.
    moved: HashMap<String, String>,
    links: HashMap<u32, LinkFacts>,
    /// Kept deletes held back one link (misbehaving on instance.delete.redeliver).
    held_back: HashSet<String>,
    /// What the newest link that said hello said, kept after it closes: between two links the
    /// device is still the one it was.
    latest: Option<(u32, LinkFacts)>,
    next_message: u64,
    /// Terminals a misbehaving web UI gave up on (their open answer had no `shell`).
    given_up_terminals: HashSet<String>,
}

/// Every chat of the instance.
#[derive(Debug)]
pub struct Chats {
    config: ChatsConfig,
    inner: Mutex<Inner>,
}

/// The file undelivered deletes are kept in.
const PENDING_DELETES: &str = "pending-deletes.json";
/// The file chats are kept in.
const CHATS: &str = "chats.json";

impl Chats {
    /// No chats yet; undelivered deletes from an earlier run are read from the state directory.
    pub fn new(config: ChatsConfig) -> Arc<Chats> {
        if let Some(dir) = &config.state_dir
            && let Err(e) = std::fs::create_dir_all(dir)
        {
            tracing::error!("cannot make the state directory {}: {e}", dir.display());
        }
        let read = |name: &str| {
            config
                .state_dir
                .as_ref()
                .and_then(|dir| std::fs::read(dir.join(name)).ok())
        };
        let pending_deletes = read(PENDING_DELETES)
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or_default();
        // Chats and their turns in flight outlive a restart: the next link reattaches to them.
        let chats = read(CHATS)
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or_default();
        Arc::new(Chats {
            config,
            inner: Mutex::new(Inner {
                pending_deletes,
                chats,
                // Message ids count on from the clock, so a restarted instance never reuses
                // one its chats kept; a seeded run counts from a draw instead (a restart in
                // the same process draws another), so its ids repeat with the seed.
                next_message: if harness::random::seeded() {
                    harness::random::u64() >> 12
                } else {
                    std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX / 2))
                },
                ..Inner::default()
            }),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// How long a device may take to answer a request.
    pub fn patience(&self) -> Duration {
        self.config.patience
    }

    /// Whether this instance was told to break `rule`.
    pub fn misbehaves(&self, rule: &str) -> bool {
        self.breaks(rule)
    }

    /// Whether the instance breaks `rule` in its way `name` (one of the catalogue's `ways`).
    pub fn misbehaves_way(&self, rule: &str, name: &str) -> bool {
        self.config.misbehave.breaks_way(rule, name)
    }

    /// Marks a terminal the web UI gave up on: it types nothing into it.
    pub fn give_up_terminal(&self, terminal: &str) {
        self.lock().given_up_terminals.insert(terminal.to_owned());
    }

    /// Whether the web UI gave up on this terminal.
    pub fn gave_up_terminal(&self, terminal: &str) -> bool {
        self.lock().given_up_terminals.contains(terminal)
    }

    fn breaks(&self, rule: &str) -> bool {
        self.config.misbehave.breaks(rule)
    }

    /// The session ids of every chat.
    pub fn session_ids(&self) -> Vec<String> {
        self.lock().chats.keys().cloned().collect()
    }

    /// A copy of a chat.
    pub fn chat(&self, session_id: &str) -> Option<Chat> {
        self.lock().chats.get(session_id).cloned()
    }

    /// What the control API shows of the chats: each chat (its in-flight turns and the end of
    /// its transcript, long texts cut), the deletes not yet delivered, and the devices linked.
    pub fn snapshot(&self) -> Value {
        /// The newest transcript lines shown per chat, and the longest text shown of each.
        const LINES_SHOWN: usize = 20;
        const TEXT_SHOWN: usize = 2000;
        let Ok(inner) = self.inner.lock() else {
            return json!({});
        };
        let chats: Vec<Value> = inner
            .chats
            .values()
            .map(|chat| {
                let lines: Vec<Value> = chat
                    .transcript
                    .iter()
                    .rev()
                    .take(LINES_SHOWN)
                    .rev()
                    .map(|line| {
                        let mut text = line.text.clone();
                        if text.len() > TEXT_SHOWN {
                            let mut cut = TEXT_SHOWN;
                            while !text.is_char_boundary(cut) {
                                cut -= 1;
                            }
                            text.truncate(cut);
                            text.push('…');
                        }
                        json!({ "role": line.role, "text": text, "turnId": line.turn_id })
                    })
                    .collect();
                json!({
                    "sessionId": chat.session_id,
                    "device": chat.device,
                    "from_terminal": chat.from_terminal,
                    "left": chat.left,
                    "in_flight": chat.in_flight.iter().map(|(turn, _)| turn).collect::<Vec<_>>(),
                    "turns_sent": chat.sent.len(),
                    "transcript": lines,
                })
            })
            .collect();
        let mut links: Vec<Value> = inner
            .links
            .iter()
            .map(|(link, facts)| {
                json!({
                    "link": link,
                    "device": facts.device,
                    "ready": facts.ready,
                    "capabilities": facts.capabilities,
                    "roots": facts.roots,
                })
            })
            .collect();
        links.sort_by_key(|l| l["link"].as_u64());
        json!({
            "chats": chats,
            "pending_deletes": inner.pending_deletes,
            "devices": links,
        })
    }

    /// The deletes waiting to be delivered.
    #[cfg(test)]
    pub fn pending_deletes(&self) -> BTreeMap<String, PendingDelete> {
        self.lock().pending_deletes.clone()
    }

    fn save_pending_deletes(&self, pending: &BTreeMap<String, PendingDelete>) {
        self.keep(PENDING_DELETES, pending);
    }

    /// Keeps the chats in the state directory (when there is one).
    fn save_chats(&self) {
        if self.config.state_dir.is_some() {
            let chats = self.lock().chats.clone();
            self.keep(CHATS, &chats);
        }
    }

    /// Writes a file of the state directory atomically (a temporary file renamed over it).
    fn keep(&self, name: &str, value: &impl serde::Serialize) {
        let Some(dir) = &self.config.state_dir else {
            return;
        };
        let write = || -> std::io::Result<()> {
            let mut file = tempfile::NamedTempFile::new_in(dir)?;
            serde_json::to_writer(&mut file, value)?;
            file.persist(dir.join(name))?;
            Ok(())
        };
        // The directory was made with the chats, and is not made again here: gone, it was an
        // embedded run's scratch folder, removed once the run ended while a link was still
        // closing, and a new one would be left behind.
        if let Err(e) = write()
            && dir.is_dir()
        {
            tracing::error!("cannot keep {name}: {e}");
        }
    }

    /// What the client knows of a link.
    pub fn link(&self, link: u32) -> Option<LinkFacts> {
        self.lock().links.get(&link).cloned()
    }

    /// Says which device a link is (the server knows it by the token it linked with).
    pub fn set_device(&self, link: u32, device: &str) {
        self.lock().devices.insert(link, device.to_string());
    }

    /// Which device a link is (`""` when the server did not say).
    pub fn device_of(&self, link: u32) -> String {
        self.lock().devices.get(&link).cloned().unwrap_or_default()
    }

    /// The device's hello on a link: its roots.
    pub fn hello(&self, link: u32, params: &Value) {
        let roots = params
            .pointer("/limits/roots")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|r| r.as_str().map(String::from))
            .collect();
        let mut inner = self.lock();
        let facts = inner.links.entry(link).or_default();
        facts.hello = true;
        facts.roots = roots;
        let facts = facts.clone();
        Self::remember(&mut inner, link, facts);
    }

    fn remember(inner: &mut Inner, link: u32, facts: LinkFacts) {
        if inner
            .latest
            .as_ref()
            .is_none_or(|(newest, _)| *newest <= link)
        {
            inner.latest = Some((link, facts));
        }
    }

    /// What the device said on the newest link that said hello, open or not.
    pub fn latest(&self) -> Option<LinkFacts> {
        self.lock().latest.as_ref().map(|(_, facts)| facts.clone())
    }

    /// `initialize` was answered on a link: it is ready, and the deletes kept for the device
    /// go now.
    pub fn ready(self: &Arc<Self>, peer: &Arc<Peer>, result: &Value) {
        let capabilities: Vec<String> = result
            .pointer("/_meta/lembas/capabilities")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|c| c.as_str().map(String::from))
            .collect();
        let deletes = capabilities.iter().any(|c| c == "delete");
        let connection = result
            .pointer("/_meta/lembas/connection")
            .and_then(Value::as_str)
            .map(String::from);
        {
            let mut inner = self.lock();
            let device = inner.devices.get(&peer.link()).cloned().unwrap_or_default();
            let facts = inner.links.entry(peer.link()).or_default();
            facts.ready = true;
            facts.capabilities = capabilities;
            facts.device = device;
            facts.connection = connection;
            let facts = facts.clone();
            Self::remember(&mut inner, peer.link(), facts);
        }
        let facts = self.link(peer.link()).unwrap_or_default();
        let redeliver = deletes && !self.breaks(ids::INSTANCE_DELETE_REDELIVER);
        let reattach = !self.breaks(ids::INSTANCE_REATTACH_STATUS);
        // The turns to reattach are those cut short before this link was ready: taken now, not
        // when the task below runs, by which time this link may have sent turns of its own.
        let incomplete = self.incomplete(&facts.device);
        let (chats, peer) = (self.clone(), peer.clone());
        tokio::spawn(async move {
            if redeliver {
                chats.redeliver(&peer, &facts.device).await;
            }
            if reattach {
                chats.reattach(&peer, &facts, incomplete).await;
            }
        });
    }

    /// A link ended.
    pub fn closed(&self, link: u32) {
        self.lock().links.remove(&link);
    }

    /// Follows what the device tells the client about its sessions.
    pub fn notified(&self, link: u32, method: &str, params: &Value) {
        self.follow(link, method, params);
        // Chats made, let go or deleted by the device are kept so (a restart must not bring a
        // deleted chat back).
        if matches!(
            method,
            methods::LEMBAS_SESSION_ANNOUNCE
                | methods::LEMBAS_SESSION_LEFT
                | methods::LEMBAS_SESSION_DELETED
        ) {
            self.save_chats();
        }
    }

    fn follow(&self, link: u32, method: &str, params: &Value) {
        let session = params.get("sessionId").and_then(Value::as_str);
        let mut inner = self.lock();
        let device = inner.devices.get(&link).cloned().unwrap_or_default();
        match (method, session) {
            (methods::SESSION_UPDATE, Some(id)) => {
                let text = params
                    .pointer("/update/content/text")
                    .and_then(Value::as_str);
                let chunk = params
                    .pointer("/update/sessionUpdate")
                    .and_then(Value::as_str)
                    == Some("agent_message_chunk");
                if let (Some(chat), true, Some(text)) = (inner.chats.get_mut(id), chunk, text) {
                    chat.streaming.push_str(text);
                }
            }
            // A session pending deletion is not made into a chat again (misbehaving: it is,
            // and its delete is forgotten).
            (methods::LEMBAS_SESSION_ANNOUNCE, Some(id))
                if !inner.pending_deletes.contains_key(id)
                    || self.breaks(ids::INSTANCE_DELETE_PENDING_ANNOUNCE)
                    || self.misbehaves_way(ids::INSTANCE_DELETE_PENDING_ANNOUNCE, "chat_too") =>
            {
                // Misbehaving (chat_too): the chat comes back and the delete stays kept.
                if !self.misbehaves_way(ids::INSTANCE_DELETE_PENDING_ANNOUNCE, "chat_too") {
                    inner.pending_deletes.remove(id);
                }
                let chat = inner.chats.entry(id.to_string()).or_insert_with(|| Chat {
                    session_id: id.to_string(),
                    device,
                    from_terminal: true,
                    ..Chat::default()
                });
                chat.left = false;
            }
            (methods::LEMBAS_SESSION_LEFT, Some(id)) => {
                if let Some(chat) = inner.chats.get_mut(id) {
                    chat.left = true;
                }
            }
            // A `deleted` for a chat it never had, or has deleted already, is ignored.
            // Misbehaving: the chat stays, and the person may write in it.
            (methods::LEMBAS_SESSION_DELETED, Some(id))
                if !self.breaks(ids::INSTANCE_DELETED_REMOVES_CHAT) =>
            {
                inner.chats.remove(id);
                inner.gone.insert(id.to_string());
            }
            (methods::LEMBAS_EVENT, Some(id)) => {
                let event = params.get("event");
                let kind = event.and_then(|e| e.get("type")).and_then(Value::as_str);
                let ended =
                    event.and_then(|e| e.get("state")).and_then(Value::as_str) == Some("end");
                let turn = event.and_then(|e| e.get("turnId")).and_then(Value::as_str);
                match (kind, inner.chats.get_mut(id)) {
                    // A followed turn (reattached after a relink) ends with its task's end.
                    (Some("task"), Some(chat)) if ended => {
                        if let Some(turn) = turn
                            && chat.in_flight.iter().any(|(t, _)| t == turn)
                        {
                            chat.in_flight.retain(|(t, _)| t != turn);
                            let said = std::mem::take(&mut chat.streaming);
                            chat.transcript.push(Line {
                                role: "assistant".into(),
                                text: said,
                                turn_id: Some(turn.to_string()),
                            });
                        }
                    }
                    _ => {}
                }
            }
            (methods::LEMBAS_PERMISSION_SETTLED, session) => {
                if let Some(call) = params.get("toolCallId").and_then(Value::as_str) {
                    inner.settled.insert(call.to_string());
                }
                if let Some(session) = session {
                    inner.settled_sessions.insert(session.to_string());
                }
            }
            _ => {}
        }
    }

    /// Whether a card was taken down.
    pub fn is_settled(&self, tool_call_id: &str) -> bool {
        self.lock().settled.contains(tool_call_id)
    }

    /// Whether any card of a session was taken down (what a client keying cards by session,
    /// wrongly, would go by).
    pub fn is_session_settled(&self, session_id: &str) -> bool {
        self.lock().settled_sessions.contains(session_id)
    }

    /// The newest link that is open and initialized, waiting up to `within` for one.
    pub async fn ready_link(
        &self,
        hub: &Arc<Hub>,
        within: Duration,
    ) -> Result<(Arc<Peer>, LinkFacts), String> {
        self.ready_link_of(hub, within, None).await
    }

    /// The newest open, initialized link of `device` (`device-3`: the device that linked with
    /// the third token), or of any device when `None`, waiting up to `within` for one.
    pub async fn ready_link_of(
        &self,
        hub: &Arc<Hub>,
        within: Duration,
        device: Option<&str>,
    ) -> Result<(Arc<Peer>, LinkFacts), String> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let newest = match device {
                None => hub.current().filter(|p| !p.is_closed()),
                Some(device) => {
                    // The device's links, taken before the hub's lock: never one lock in
                    // the other.
                    let links: HashSet<u32> = self
                        .lock()
                        .devices
                        .iter()
                        .filter(|(_, d)| d.as_str() == device)
                        .map(|(link, _)| *link)
                        .collect();
                    hub.newest_open(|link| links.contains(&link))
                }
            };
            if let Some(peer) = newest
                && let Some(facts) = self.link(peer.link()).filter(|f| f.ready)
            {
                return Ok((peer, facts));
            }
            if tokio::time::Instant::now() >= deadline {
                let which =
                    device.map_or_else(|| "device".to_string(), |d| format!("device `{d}`"));
                return Err(format!(
                    "no {which} was linked and initialized within {}",
                    humantime::format_duration(within)
                ));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The device a chat lives on, when it is a known chat.
    /// The session a chat is on now: the one it moved to, when it moved.
    pub fn current_chat(&self, chat: &str) -> String {
        let inner = self.lock();
        let mut id = chat;
        // Bounded: each move is to a session made later, but a loop must not hang the web UI.
        for _ in 0..inner.moved.len() {
            match inner.moved.get(id) {
                Some(next) => id = next,
                None => break,
            }
        }
        id.to_string()
    }

    /// Before a chat is written in on `peer`'s link: to a device that does not list `sessions`,
    /// a session opened on an earlier link is no longer to be relied on (spec: Versions and
    /// discovery, and the capability table's `sessions`), so the chat moves to a new session
    /// opened on this link, with its Context and what it said. Gives the session to write to.
    async fn renewed(
        &self,
        peer: &Arc<Peer>,
        facts: &LinkFacts,
        chat: &str,
    ) -> Result<String, String> {
        let lasts = facts.capabilities.iter().any(|c| c == "sessions");
        let Some(old) = self.chat(chat) else {
            return Ok(chat.to_string());
        };
        // Misbehaving: the old session id relied on, as if the device listed `sessions`.
        if lasts
            || old.link == peer.link()
            || old.from_terminal
            || self.breaks(ids::INSTANCE_SESSIONS_UNLISTED)
        {
            return Ok(chat.to_string());
        }
        let opened = self
            .open(peer, facts, None, None, None, old.context.clone())
            .await?;
        let new = opened
            .get("sessionId")
            .and_then(Value::as_str)
            .ok_or("session/new answered without a sessionId")?
            .to_string();
        {
            let mut inner = self.lock();
            if let Some(moved) = inner.chats.get_mut(&new) {
                moved.transcript = old.transcript;
                moved.sent = old.sent;
            }
            inner.chats.remove(chat);
            inner.moved.insert(chat.to_string(), new.clone());
        }
        self.save_chats();
        // Misbehaving: the new session opened, and the message still sent to the old one.
        if self.misbehaves_way(ids::INSTANCE_SESSIONS_UNLISTED, "old_id_kept") {
            return Ok(chat.to_string());
        }
        Ok(new)
    }

    pub fn device_of_chat(&self, chat: &str) -> Option<String> {
        self.lock()
            .chats
            .get(chat)
            .map(|c| c.device.clone())
            .filter(|d| !d.is_empty())
    }

    /// Whether a chat has no turn waiting for its answer (`None`: no such chat).
    pub fn answered(&self, chat: &str) -> Option<bool> {
        self.lock().chats.get(chat).map(|c| c.in_flight.is_empty())
    }

    fn fresh_message_id(&self) -> String {
        let mut inner = self.lock();
        inner.next_message += 1;
        format!("msg_{:x}", inner.next_message)
    }

    /// Opens a chat: `session/new` in `cwd` (default: the device's first root).
    pub async fn open(
        &self,
        peer: &Arc<Peer>,
        facts: &LinkFacts,
        cwd: Option<&str>,
        mode: Option<&str>,
        model: Option<&str>,
        context: serde_json::Map<String, Value>,
    ) -> Result<Value, String> {
        if self.breaks(ids::INSTANCE_CHAT_OPEN) {
            return Err("misbehaving on purpose: the chat is opened on no device".into());
        }
        let chat = Chat {
            context,
            device: facts.device.clone(),
            link: peer.link(),
            ..Chat::default()
        };
        let cwd = match cwd {
            Some(cwd) => cwd.to_string(),
            None => facts
                .roots
                .first()
                .cloned()
                .ok_or("the device has no root to open a chat in")?,
        };
        let cwd = if self.misbehaves_way(ids::INSTANCE_CHAT_OPEN, "outside_roots") {
            // Misbehaving: the chat opened in the folder holding the device's root, outside it.
            std::path::Path::new(&cwd)
                .parent()
                .map_or("/".to_string(), |p| p.display().to_string())
        } else {
            cwd
        };
        let mut params = json!({ "cwd": cwd, "mcpServers": [] });
        if let Some(mode) = mode {
            params["_meta"]["mode"] = json!(mode);
        }
        // The chat's model, by the name this instance serves it under (misbehaving: in the
        // device's ref form, `<connection>/<served name>`).
        if let Some(model) = model {
            params["_meta"]["lembas_model"] = json!(match &facts.connection {
                Some(login) if self.breaks(ids::INSTANCE_MODEL_SERVED_NAME) =>
                    format!("{login}/{model}"),
                // Misbehaving: the model's own name, its provider left out.
                _ if self
                    .config
                    .misbehave
                    .breaks_way(ids::INSTANCE_MODEL_SERVED_NAME, "model_part") =>
                {
                    model
                        .split_once('/')
                        .map_or(model, |(_, part)| part)
                        .to_string()
                }
                _ => model.to_string(),
            });
        }
        // Misbehaving: the chat's Context is left off session/new (the prompts carry it).
        if let Some(context) = chat
            .context(facts)
            .filter(|_| !self.breaks(ids::INSTANCE_CONTEXT_SENT))
        {
            params["_meta"]["lembas"] = context;
        }
        let answer = peer
            .request(methods::SESSION_NEW, params, self.config.patience)
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| format!("the device refused session/new: {}", e.message))?;
        let id = answer
            .get("sessionId")
            .and_then(Value::as_str)
            .ok_or("session/new answered without a sessionId")?
            .to_string();
        {
            let mut inner = self.lock();
            if !inner.gone.contains(&id) {
                inner.chats.insert(
                    id.clone(),
                    Chat {
                        session_id: id.clone(),
                        modes: offered_modes(&answer),
                        ..chat
                    },
                );
            }
        }
        self.save_chats();
        Ok(json!({ "sessionId": id, "device": facts.device }))
    }

    /// Learns of a `session/new` the device answered or a `session/prompt` as it is sent,
    /// whoever sent it (a scenario's own steps too): the session becomes a chat of the link's
    /// device, and the `Context` fields either carries replace the chat's (the spec reads them on
    /// both), so a library call made during the turn is judged against what the device was told.
    pub fn learn(&self, link: u32, method: &str, params: &Value, result: &Value) {
        let context = params
            .pointer("/_meta/lembas")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let session_id = match method {
            methods::SESSION_NEW => result.get("sessionId"),
            methods::SESSION_PROMPT => params.get("sessionId"),
            _ => None,
        };
        let Some(session_id) = session_id.and_then(Value::as_str) else {
            return;
        };
        let device = self.device_of(link);
        let mut inner = self.lock();
        if inner.gone.contains(session_id) {
            return;
        }
        let chat = inner
            .chats
            .entry(session_id.to_string())
            .or_insert_with(|| Chat {
                session_id: session_id.to_string(),
                device,
                ..Chat::default()
            });
        for field in ["system_prompt", "personalization", "library", "prototypes"] {
            if let Some(value) = context.get(field) {
                chat.context.insert(field.to_string(), value.clone());
            }
        }
        if method == methods::SESSION_NEW {
            chat.modes = offered_modes(result);
            chat.link = link;
        }
    }

    /// The person writes in a chat: a steer while a turn runs (when the device can take
    /// one), else a prompt as a new turn.
    pub async fn send(
        self: &Arc<Self>,
        peer: &Arc<Peer>,
        facts: &LinkFacts,
        chat: &str,
        text: &str,
        attach: &[crate::attach::AttachFile],
    ) -> Result<Value, String> {
        let renewed = self.renewed(peer, facts, chat).await?;
        let chat = renewed.as_str();
        let running = self
            .chat(chat)
            .ok_or_else(|| format!("no chat `{chat}`"))?
            .in_flight
            .first()
            .map(|(turn, _)| turn.clone());
        if self.breaks(ids::INSTANCE_PROMPT_SEND) {
            // Misbehaving: the message is shown in the chat and goes nowhere.
            self.say(chat, "user", text, None);
            return Ok(json!({ "turnId": self.fresh_message_id() }));
        }
        if !attach.is_empty() {
            // Files never go as a steer: a message with files is a prompt of its own.
            let careless = self.breaks(ids::INSTANCE_PROMPT_BLOCKS);
            if !careless && !facts.capabilities.iter().any(|c| c == "attachments") {
                return Err(
                    "the device takes no attachments (it did not list `attachments`)".into(),
                );
            }
            let mut blocks = crate::attach::blocks(attach, careless)?;
            if self.misbehaves_way(ids::INSTANCE_PROMPT_BLOCKS, "text_lines") {
                // Misbehaving: a text file's resource carries its text as a list of lines.
                for block in &mut blocks {
                    if let Some(text) = block.pointer("/resource/text").and_then(Value::as_str) {
                        let lines: Vec<String> = text.lines().map(String::from).collect();
                        block["resource"]["text"] = json!(lines);
                    }
                }
            }
            let turn_id = self.fresh_message_id();
            if let Some(c) = self.lock().chats.get_mut(chat) {
                c.attached.insert(turn_id.clone(), blocks);
            }
            self.prompt(peer, facts, chat, &turn_id, text);
            return Ok(json!({ "turnId": turn_id }));
        }
        if running.is_some()
            && facts.capabilities.iter().any(|c| c == "steer")
            && !self.breaks(ids::INSTANCE_STEER_RUNNING)
        {
            let message_id = self.fresh_message_id();
            let params = json!({ "sessionId": chat, "text": text, "messageId": message_id });
            match peer
                .request(methods::LEMBAS_STEER, params, self.config.patience)
                .await
            {
                Ok(Ok(_)) => {
                    self.say(chat, "user", text, running);
                    if self.misbehaves_way(ids::INSTANCE_STEER_RUNNING, "and_prompt") {
                        // Misbehaving: the steered message also goes as a prompt of its own.
                        let turn_id = self.fresh_message_id();
                        self.prompt(peer, facts, chat, &turn_id, text);
                    }
                    return Ok(json!({ "steered": true, "messageId": message_id }));
                }
                // Nothing runs after all: the message goes as a prompt.
                Ok(Err(e)) if e.code == INVALID_PARAMS => {
                    if self.breaks(ids::INSTANCE_STEER_FALLBACK) {
                        return Ok(json!({ "steered": false }));
                    }
                    if self.misbehaves_way(ids::INSTANCE_STEER_FALLBACK, "other_session") {
                        // Misbehaving: the fallback prompt goes to a session never given.
                        let params = json!({
                            "sessionId": "ses_never_given",
                            "prompt": [{ "type": "text", "text": text }],
                        });
                        let answer =
                            peer.begin_request(methods::SESSION_PROMPT, params, TURN_PATIENCE);
                        tokio::spawn(answer);
                        return Ok(json!({ "steered": false }));
                    }
                }
                Ok(Err(e)) => return Err(format!("the device refused the steer: {}", e.message)),
                Err(e) => return Err(e.to_string()),
            }
        }
        let turn_id = self.fresh_message_id();
        self.prompt(peer, facts, chat, &turn_id, text);
        if self.misbehaves_way(ids::INSTANCE_PROMPT_SEND, "twice") {
            // Misbehaving: the message goes again, as a second turn of its own.
            let again = self.fresh_message_id();
            self.prompt(peer, facts, chat, &again, text);
        }
        Ok(json!({ "turnId": turn_id }))
    }

    /// Sends `text` and `blocks` after it as a prompt of its own (a new turn); gives
    /// `{turnId}`.
    pub fn send_blocks(
        self: &Arc<Self>,
        peer: &Arc<Peer>,
        facts: &LinkFacts,
        chat: &str,
        text: &str,
        blocks: Vec<Value>,
    ) -> Value {
        let turn_id = self.fresh_message_id();
        if let Some(c) = self.lock().chats.get_mut(chat) {
            c.attached.insert(turn_id.clone(), blocks);
        }
        self.prompt(peer, facts, chat, &turn_id, text);
        json!({ "turnId": turn_id })
    }

    fn say(&self, chat: &str, role: &str, text: &str, turn_id: Option<String>) {
        if let Some(chat) = self.lock().chats.get_mut(chat) {
            chat.transcript.push(Line {
                role: role.to_string(),
                text: text.to_string(),
                turn_id,
            });
        }
    }

    /// Sends a prompt as turn `turn_id` and follows it to its answer (in a task of its own: a
    /// turn runs as long as it runs). `unsent` steer messages in the answer are sent next.
    pub fn prompt(
        self: &Arc<Self>,
        peer: &Arc<Peer>,
        facts: &LinkFacts,
        chat: &str,
        turn_id: &str,
        text: &str,
    ) {
        let again = {
            let mut inner = self.lock();
            match inner.chats.get_mut(chat) {
                // Sent again after a relink: the same turn, not a new one.
                Some(c) if c.sent.iter().any(|t| t == turn_id) => true,
                Some(c) => {
                    c.in_flight.push((turn_id.to_string(), text.to_string()));
                    c.sent.push(turn_id.to_string());
                    false
                }
                None => false,
            }
        };
        if !again {
            self.say(chat, "user", text, Some(turn_id.to_string()));
        }
        self.save_chats();
        let mut blocks = vec![json!({ "type": "text", "text": text })];
        if let Some(files) = self
            .chat(chat)
            .and_then(|c| c.attached.get(turn_id).cloned())
        {
            blocks.extend(files);
        }
        // Misbehaving: the prompt goes to a session the device never gave this client.
        let session = if self.breaks(ids::INSTANCE_SESSION_KNOWN) {
            "ses_never_given"
        } else {
            chat
        };
        let mut params = json!({ "sessionId": session, "prompt": blocks });
        // The chat's Context again on every prompt (the device keeps the newest).
        let mut lembas = self
            .chat(chat)
            .and_then(|c| c.context(facts))
            .unwrap_or_else(|| json!({}));
        // Misbehaving (capabilities.respect/unlisted_field): a turn id whatever the device listed.
        if facts.capabilities.iter().any(|c| c == "turns")
            || self.misbehaves_way(ids::INSTANCE_CAPABILITIES_RESPECT, "unlisted_field")
        {
            lembas["turnId"] = json!(turn_id);
        }
        if self.misbehaves_way(ids::INSTANCE_CONTEXT_SENT, "other_prompt")
            && lembas.get("system_prompt").is_some()
        {
            // Misbehaving: the prompt carries a system prompt that is not the chat's.
            lembas["system_prompt"] = json!("Answer at length, in French.");
        }
        if lembas.as_object().is_some_and(|l| !l.is_empty()) {
            params["_meta"] = json!({ "lembas": lembas });
        }
        let answer = peer.begin_request(methods::SESSION_PROMPT, params, TURN_PATIENCE);
        let (chats, peer, facts, chat, turn_id) = (
            self.clone(),
            peer.clone(),
            facts.clone(),
            chat.to_string(),
            turn_id.to_string(),
        );
        tokio::spawn(async move {
            let answer = answer.await;
            // A turn whose link dropped before its answer stays incomplete: the client
            // reattaches to it on the next link.
            if matches!(answer, Err(RequestError::Closed { .. })) {
                return;
            }
            chats.finished(&chat, &turn_id);
            let unsent: Vec<String> = match &answer {
                Ok(Ok(result)) => result
                    .pointer("/_meta/lembas/unsent")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|t| t.as_str().map(String::from))
                    .collect(),
                Ok(Err(e)) => {
                    tracing::info!("turn {turn_id} failed: {}", e.message);
                    Vec::new()
                }
                Err(_) => Vec::new(),
            };
            if chats.breaks(ids::INSTANCE_STEER_UNSENT) {
                return;
            }
            if chats.misbehaves_way(ids::INSTANCE_STEER_UNSENT, "as_steers") {
                // Misbehaving: what the turn left unsent is steered again, not prompted.
                for text in unsent {
                    let params = json!({ "sessionId": chat, "text": text });
                    let _ = peer
                        .request(methods::LEMBAS_STEER, params, chats.config.patience)
                        .await;
                }
                return;
            }
            // What the turn ended before taking in is sent next, as the person's next message.
            for text in unsent {
                let next = chats.fresh_message_id();
                chats.prompt(&peer, &facts, &chat, &next, &text);
            }
        });
    }

    /// A turn is over: out of flight, and what the agent said goes into the transcript.
    fn finished(&self, chat: &str, turn_id: &str) {
        let said = {
            let mut inner = self.lock();
            inner.chats.get_mut(chat).and_then(|c| {
                let was = c.in_flight.len();
                c.in_flight.retain(|(t, _)| t != turn_id);
                (c.in_flight.len() < was).then(|| std::mem::take(&mut c.streaming))
            })
        };
        if let Some(said) = said {
            self.say(chat, "assistant", &said, Some(turn_id.to_string()));
            self.save_chats();
        }
    }

    /// The device's chats with turns not yet answered, and those turns.
    fn incomplete(&self, device: &str) -> Vec<(String, Vec<(String, String)>)> {
        self.lock()
            .chats
            .values()
            .filter(|c| !c.in_flight.is_empty() && c.device == device)
            .map(|c| (c.session_id.clone(), c.in_flight.clone()))
            .collect()
    }

    /// Reattaches by turn on a new link (spec, `_lembas/session/status`): for each chat with
    /// incomplete turns it asks status; a turn running or queued is followed (its events end
    /// it), one done is imported from `history`, one the device does not know is sent again
    /// with its turn id.
    async fn reattach(
        self: &Arc<Self>,
        peer: &Arc<Peer>,
        facts: &LinkFacts,
        incomplete: Vec<(String, Vec<(String, String)>)>,
    ) {
        let has = |c: &str| facts.capabilities.iter().any(|x| x == c);
        for (chat, turns) in incomplete {
            // Misbehaving: the session's history asked where its status should be.
            let asked = if self.misbehaves_way(ids::INSTANCE_REATTACH_STATUS, "history") {
                methods::LEMBAS_SESSION_HISTORY
            } else {
                methods::LEMBAS_SESSION_STATUS
            };
            let status = if has("status") {
                self.ask(peer, asked, &chat).await
            } else {
                None
            };
            if self.breaks(ids::INSTANCE_REATTACH_KNOWN) {
                // Misbehaving: whatever status said, every incomplete turn again as a new turn.
                for (_, text) in turns {
                    let fresh = self.fresh_message_id();
                    self.prompt(peer, facts, &chat, &fresh, &text);
                }
                continue;
            }
            if self.misbehaves_way(ids::INSTANCE_REATTACH_KNOWN, "new_chat") {
                // Misbehaving: whatever status said, every incomplete turn again, as a new
                // turn in a chat of its own.
                for (turn, text) in turns {
                    if let Some(c) = self.lock().chats.get_mut(&chat) {
                        c.in_flight.retain(|(t, _)| *t != turn);
                    }
                    let opened = self
                        .open(peer, facts, None, None, None, Default::default())
                        .await;
                    if let Some(new) = opened
                        .ok()
                        .as_ref()
                        .and_then(|o| o.get("sessionId"))
                        .and_then(Value::as_str)
                    {
                        let fresh = self.fresh_message_id();
                        self.prompt(peer, facts, new, &fresh, &text);
                    }
                }
                continue;
            }
            let running: Vec<String> = status
                .iter()
                .flat_map(|s| {
                    s.get("turnId").into_iter().chain(
                        s.get("queued")
                            .and_then(Value::as_array)
                            .into_iter()
                            .flatten(),
                    )
                })
                .filter_map(|t| t.as_str().map(String::from))
                .collect();
            let mut history = None;
            for (turn, text) in turns {
                if running.contains(&turn) {
                    continue; // followed: its events say when it ends
                }
                if history.is_none() && has("sessions") {
                    history = self.ask(peer, methods::LEMBAS_SESSION_HISTORY, &chat).await;
                }
                let done = history
                    .as_ref()
                    .and_then(|h| h.get("turns"))
                    .and_then(Value::as_array)
                    .and_then(|turns| import(turns, &turn));
                match done {
                    Some(said) => {
                        if let Some(c) = self.lock().chats.get_mut(&chat) {
                            c.streaming = said;
                        }
                        self.finished(&chat, &turn);
                    }
                    None if self.breaks(ids::INSTANCE_REATTACH_UNKNOWN) => {
                        if let Some(c) = self.lock().chats.get_mut(&chat) {
                            c.in_flight.retain(|(t, _)| *t != turn);
                        }
                    }
                    // Unknown to the device: sent again; it runs once whatever happened. Only
                    // a device that deduplicates turn ids makes that safe; another one gets
                    // nothing (the person sends it again if they want).
                    // Misbehaving: sent again under a turn id of its own.
                    None if has("turns")
                        && self.misbehaves_way(ids::INSTANCE_REATTACH_UNKNOWN, "fresh_id") =>
                    {
                        if let Some(c) = self.lock().chats.get_mut(&chat) {
                            c.in_flight.retain(|(t, _)| *t != turn);
                        }
                        let fresh = self.fresh_message_id();
                        self.prompt(peer, facts, &chat, &fresh, &text);
                    }
                    None if has("turns") => self.prompt(peer, facts, &chat, &turn, &text),
                    // Misbehaving: sent again to a device that does not deduplicate turns.
                    None if self.breaks(ids::INSTANCE_REATTACH_NO_TURNS) => {
                        self.prompt(peer, facts, &chat, &turn, &text);
                    }
                    None => {
                        if let Some(c) = self.lock().chats.get_mut(&chat) {
                            c.in_flight.retain(|(t, _)| *t != turn);
                        }
                    }
                }
            }
        }
    }

    /// A session method's result, or `None` when it failed.
    async fn ask(&self, peer: &Arc<Peer>, method: &str, chat: &str) -> Option<Value> {
        peer.request(method, json!({ "sessionId": chat }), self.config.patience)
            .await
            .ok()?
            .ok()
    }

    /// Edits or regenerates from a turn: `_lembas/session/rewind`, then `text` as a new turn.
    pub async fn rewind(
        self: &Arc<Self>,
        peer: &Arc<Peer>,
        facts: &LinkFacts,
        chat: &str,
        turn: &str,
        text: Option<&str>,
    ) -> Result<Value, String> {
        if !facts.capabilities.iter().any(|c| c == "rewind") {
            return Err("the device did not list `rewind`".into());
        }
        // Misbehaving: the rewind names a turn this chat never sent.
        let turn = if self.breaks(ids::INSTANCE_REWIND_KNOWN_TURN) {
            "msg_made_up"
        } else {
            turn
        };
        // Misbehaving: the new message's id, made now, is the turn the rewind names.
        let next = self.fresh_message_id();
        let turn = if self.misbehaves_way(ids::INSTANCE_REWIND_KNOWN_TURN, "next_turn") {
            next.as_str()
        } else {
            turn
        };
        // Misbehaving: the new message goes without a rewind before it.
        if self.misbehaves_way(ids::INSTANCE_REWIND_NEW_TURN, "no_rewind")
            && let Some(text) = text
        {
            self.prompt(peer, facts, chat, &next, text);
            return Ok(json!({ "reverted": 0, "turnId": next }));
        }
        let answer = peer
            .request(
                methods::LEMBAS_SESSION_REWIND,
                json!({ "sessionId": chat, "turnId": turn }),
                self.config.patience,
            )
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| format!("the device refused the rewind: {}", e.message))?;
        {
            // The rewound turns leave the transcript.
            let mut inner = self.lock();
            if let Some(c) = inner.chats.get_mut(chat)
                && let Some(at) = c
                    .transcript
                    .iter()
                    .position(|l| l.turn_id.as_deref() == Some(turn))
            {
                c.transcript.truncate(at);
            }
        }
        self.save_chats();
        let mut result =
            json!({ "reverted": answer.get("reverted").cloned().unwrap_or(Value::Null) });
        if let Some(text) = text {
            // A new turn: a turn id never used, or the device would answer the old one.
            let turn_id = if self.breaks(ids::INSTANCE_REWIND_NEW_TURN) {
                turn.to_string()
            } else {
                next
            };
            self.prompt(peer, facts, chat, &turn_id, text);
            result["turnId"] = json!(turn_id);
        }
        Ok(result)
    }

    /// Stops a chat's running turn.
    pub fn cancel(&self, peer: &Arc<Peer>, chat: &str) {
        // Misbehaving: the stop button stops the stream in the browser only.
        if self.breaks(ids::INSTANCE_CANCEL_STOP) {
            return;
        }
        let mut params = json!({ "sessionId": chat });
        if self.misbehaves_way(ids::INSTANCE_CANCEL_STOP, "other_session") {
            // Misbehaving: the stop names a session the device never gave, not the chat's.
            params = json!({ "sessionId": "ses_never_given" });
        }
        if self.breaks(ids::INSTANCE_CANCEL_IS_NOTIFICATION) {
            // Misbehaving: the stop goes as a request, waiting for an answer nobody owes.
            let answer = peer.begin_request(methods::SESSION_CANCEL, params, self.config.patience);
            tokio::spawn(answer);
            return;
        }
        peer.notify(methods::SESSION_CANCEL, params);
    }

    /// Deletes a chat: `_lembas/session/delete` now when a device is linked; otherwise, or when
    /// it is not answered or refused, kept and sent again on the next link.
    pub async fn delete(
        &self,
        link: Option<(Arc<Peer>, LinkFacts)>,
        chat: &str,
    ) -> Result<Value, String> {
        if self.breaks(ids::INSTANCE_DELETE_ON_CHAT) {
            // Misbehaving: the chat goes from the web UI, and the device is never told.
            self.lock().chats.remove(chat);
            self.save_chats();
            return Ok(json!({ "sent": false }));
        }
        let pending = {
            let mut inner = self.lock();
            let known = inner.chats.remove(chat).map(|c| c.device);
            // A chat it never had goes to the device linked now (or, unlinked, to the next).
            let device = known
                .or_else(|| link.as_ref().map(|(_, facts)| facts.device.clone()))
                .unwrap_or_default();
            inner
                .pending_deletes
                .entry(chat.to_string())
                .or_insert(PendingDelete {
                    device,
                    refusals: 0,
                });
            inner.pending_deletes.clone()
        };
        self.save_pending_deletes(&pending);
        self.save_chats();
        let owner = self
            .lock()
            .pending_deletes
            .get(chat)
            .map(|p| p.device.clone());
        let delivered = match link {
            // Misbehaving: the delete names a session other than the chat's.
            Some((peer, facts))
                if facts.capabilities.iter().any(|c| c == "delete")
                    && self.misbehaves_way(ids::INSTANCE_DELETE_ON_CHAT, "other_session") =>
            {
                self.lock().pending_deletes.remove(chat);
                self.deliver(&peer, &format!("{chat}_other")).await
            }
            Some((peer, facts))
                if facts.capabilities.iter().any(|c| c == "delete")
                    && owner.is_none_or(|o| o.is_empty() || o == facts.device) =>
            {
                self.deliver(&peer, chat).await
            }
            _ => false,
        };
        Ok(json!({ "delivered": delivered }))
    }

    /// Sends one kept delete; gives whether it was answered (and so is done).
    async fn deliver(&self, peer: &Arc<Peer>, chat: &str) -> bool {
        let answer = peer
            .request(
                methods::LEMBAS_SESSION_DELETE,
                json!({ "sessionId": chat }),
                self.config.patience,
            )
            .await;
        let pending = {
            let mut inner = self.lock();
            match &answer {
                Ok(Ok(_)) => {
                    inner.pending_deletes.remove(chat);
                }
                Ok(Err(_)) => {
                    let give_up = !self.breaks(ids::INSTANCE_DELETE_GIVE_UP);
                    // Misbehaving: given up after a sixth refusal, not the fifth.
                    let limit = if self.misbehaves_way(ids::INSTANCE_DELETE_GIVE_UP, "one_more") {
                        DELETE_REFUSALS + 1
                    } else {
                        DELETE_REFUSALS
                    };
                    if let Some(pending) = inner.pending_deletes.get_mut(chat) {
                        pending.refusals += 1;
                        if pending.refusals >= limit && give_up {
                            inner.pending_deletes.remove(chat);
                        }
                    }
                }
                // Not answered: kept as it is, for the next link.
                Err(_) => {}
            }
            inner.pending_deletes.clone()
        };
        self.save_pending_deletes(&pending);
        matches!(answer, Ok(Ok(_)))
    }

    /// The kept deletes for a device: its own, and those made for no device in particular.
    fn deletes_for(&self, device: &str) -> Vec<String> {
        self.lock()
            .pending_deletes
            .iter()
            .filter(|(_, p)| p.device.is_empty() || p.device == device)
            .map(|(chat, _)| chat.clone())
            .collect()
    }

    /// Sends every kept delete on a link that has just come up.
    async fn redeliver(&self, peer: &Arc<Peer>, device: &str) {
        let pending = self.deletes_for(device);
        for chat in pending {
            if peer.is_closed() {
                return;
            }
            // Misbehaving: a kept delete waits one link more before it is sent again.
            if self.misbehaves_way(ids::INSTANCE_DELETE_REDELIVER, "one_link_late")
                && self.lock().held_back.insert(chat.clone())
            {
                continue;
            }
            self.lock().held_back.remove(&chat);
            self.deliver(peer, &chat).await;
        }
    }
}

/// The ids of the modes a session/new answer offered (`modes.availableModes`).
fn offered_modes(answer: &Value) -> Vec<String> {
    answer
        .pointer("/modes/availableModes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|m| m.get("id").and_then(Value::as_str).map(String::from))
        .collect()
}

/// The agent's text of turn `turn` in a history, when the history has that turn.
fn import(turns: &[Value], turn: &str) -> Option<String> {
    let at = turns.iter().position(|t| {
        t.get("role").and_then(Value::as_str) == Some("user")
            && t.get("turnId").and_then(Value::as_str) == Some(turn)
    })?;
    Some(
        turns[at + 1..]
            .iter()
            .take_while(|t| t.get("role").and_then(Value::as_str) == Some("assistant"))
            .filter_map(|t| t.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(""),
    )
}

/// A library call's scope names one of the calling device's chats; its knowledge bases are the
/// ones its `Context.library` named (none named: the whole library).
impl crate::http::ChatScopes for Chats {
    fn bases_of(&self, device: &str, session_id: &str) -> Option<Vec<String>> {
        let inner = self.lock();
        let chat = inner.chats.get(session_id).filter(|c| c.device == device)?;
        let bases = chat
            .context
            .get("library")
            .and_then(|l| l.get("bases"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|b| b.get("id").and_then(Value::as_str).map(String::from))
            .collect();
        Some(bases)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chats() -> Arc<Chats> {
        Chats::new(ChatsConfig {
            patience: Duration::from_secs(1),
            misbehave: Misbehaviours::default(),
            state_dir: None,
        })
    }

    #[tokio::test]
    async fn announce_left_and_deleted_are_followed_and_unknown_deletes_ignored() {
        let chats = chats();
        chats.notified(
            1,
            methods::LEMBAS_SESSION_ANNOUNCE,
            &json!({"sessionId": "ses_t", "origin": "terminal"}),
        );
        assert!(
            chats
                .chat("ses_t")
                .is_some_and(|c| c.from_terminal && !c.left)
        );
        chats.notified(
            1,
            methods::LEMBAS_SESSION_LEFT,
            &json!({"sessionId": "ses_t", "available": true}),
        );
        assert!(chats.chat("ses_t").is_some_and(|c| c.left));
        chats.notified(
            1,
            methods::LEMBAS_SESSION_DELETED,
            &json!({"sessionId": "ses_never"}),
        );
        assert!(
            chats.chat("ses_t").is_some(),
            "a delete of another session changes nothing"
        );
        chats.notified(
            1,
            methods::LEMBAS_SESSION_DELETED,
            &json!({"sessionId": "ses_t"}),
        );
        assert!(chats.chat("ses_t").is_none());

        // A chat deleted here but not yet delivered is not made a chat again by an announce.
        chats.delete(None, "ses_gone").await.expect("kept");
        assert_eq!(
            chats.pending_deletes().get("ses_gone").map(|p| p.refusals),
            Some(0)
        );
        chats.notified(
            1,
            methods::LEMBAS_SESSION_ANNOUNCE,
            &json!({"sessionId": "ses_gone"}),
        );
        assert!(chats.chat("ses_gone").is_none());
    }

    #[tokio::test]
    async fn pending_deletes_outlive_a_restart_in_the_state_directory() {
        let dir = tempfile::tempdir().expect("dir");
        let config = ChatsConfig {
            patience: Duration::from_secs(1),
            misbehave: Misbehaviours::default(),
            state_dir: Some(dir.path().to_path_buf()),
        };
        Chats::new(config.clone())
            .delete(None, "ses_x")
            .await
            .expect("kept");
        assert_eq!(
            Chats::new(config)
                .pending_deletes()
                .get("ses_x")
                .map(|p| p.refusals),
            Some(0)
        );
    }

    #[test]
    fn chats_and_their_turns_in_flight_outlive_a_restart() {
        let dir = tempfile::tempdir().expect("dir");
        let config = ChatsConfig {
            patience: Duration::from_secs(1),
            misbehave: Misbehaviours::default(),
            state_dir: Some(dir.path().to_path_buf()),
        };
        let before = Chats::new(config.clone());
        before.lock().chats.insert(
            "ses_a".into(),
            Chat {
                session_id: "ses_a".into(),
                in_flight: vec![("msg_0001".into(), "hello".into())],
                sent: vec!["msg_0001".into()],
                ..Chat::default()
            },
        );
        before.save_chats();
        let after = Chats::new(config);
        let chat = after.chat("ses_a").expect("kept");
        assert_eq!(
            chat.in_flight,
            vec![("msg_0001".to_string(), "hello".to_string())]
        );
    }

    #[tokio::test]
    async fn a_kept_delete_goes_to_the_device_its_chat_lived_on() {
        let chats = chats();
        chats.set_device(1, "device-1");
        chats.notified(
            1,
            methods::LEMBAS_SESSION_ANNOUNCE,
            &json!({"sessionId": "ses_one"}),
        );
        assert_eq!(
            chats.chat("ses_one").map(|c| c.device).as_deref(),
            Some("device-1")
        );
        chats.delete(None, "ses_one").await.expect("kept");
        assert_eq!(chats.deletes_for("device-1"), ["ses_one"]);
        assert!(
            chats.deletes_for("device-2").is_empty(),
            "not another device's"
        );
    }

    #[test]
    fn a_done_turn_is_imported_from_history() {
        let turns = vec![
            json!({"role": "user", "text": "a", "turnId": "t1"}),
            json!({"role": "assistant", "text": "done"}),
            json!({"role": "user", "text": "b", "turnId": "t2"}),
        ];
        assert_eq!(import(&turns, "t1").as_deref(), Some("done"));
        assert_eq!(import(&turns, "t2").as_deref(), Some(""));
        assert_eq!(import(&turns, "t3"), None);
    }
}
