//! The device's sessions: those of the store, opened in memory when named, and the session
//! methods of the spec (`session/new`, `set_mode`, `_lembas/configure`, `_lembas/session/*`).
//! Turns — prompts, their queue, cancel and steer — are in [`crate::turns`].

use harness::lembas::methods;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use harness::jsonrpc::RpcError;
use harness::lembas::Spec;
use harness::rules::{Misbehaviours, ids};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

use crate::answers::{Answer, Reply, fresh_id, param_str, refuse};
use crate::events::Client;
use crate::limits::{Limits, MODES};
use crate::store::{Store, StoredSession, TurnLog, TurnState};
use crate::terminal_card::TerminalCard;
use crate::turns::{Job, Running};

/// The longest title a session keeps (spec, `_lembas/session/title`).
pub const TITLE_MAX: usize = 200;

/// How the sessions behave.
#[derive(Debug, Clone)]
pub struct SessionsConfig {
    /// The spec the device implements.
    pub spec: Spec,
    /// The capabilities it listed in initialize.
    pub capabilities: Vec<String>,
    /// The rules to break.
    pub misbehave: Misbehaviours,
    /// The pause between the pieces of the default (echo) answer: a turn stays "running" that
    /// long, so cancel and steer can reach it.
    pub step_delay: Duration,
    /// The device's name for the instance (`<connection>/<model>` refs).
    pub connection: String,
    /// Serving an editor on stdio (`serve --stdio`): no session is an instance's chat.
    pub stdio: bool,
    /// The device's account on the instance (personalization, usage).
    pub account: crate::account::Account,
    /// The instance's model, when turns ask it (`--agent model`); `None`: the echo agent.
    pub model: Option<crate::model::ModelClient>,
    /// How long a card waits for an answer.
    pub approval_timeout: Duration,
    /// The scripted agent's scripts: a prompt one matches runs it instead of the agent.
    pub scripts: Vec<crate::scripts::AgentScript>,
    /// A person at the terminal answers the cards of the session it shares this long after
    /// they are shown (`None`: nobody answers there).
    pub terminal_answers_after: Option<Duration>,
}

/// A session's state in memory.
#[derive(Debug)]
pub struct State {
    /// What the store keeps.
    pub stored: StoredSession,
    /// The turn log.
    pub turns: TurnLog,
    /// The turn running now.
    pub running: Option<Running>,
    /// The turns waiting, in order.
    pub queued: Vec<String>,
    /// Who waits for each turn's answer.
    pub waiters: HashMap<String, Vec<oneshot::Sender<Value>>>,
    /// The client the session reports to (the last that named it).
    pub client: Option<Client>,
    /// The link that client was last told the session's commands and plan on.
    pub reported_link: Option<u32>,
    /// Commands the person allowed for the rest of the session (`session` on an approval).
    pub allowed: std::collections::HashSet<String>,
    /// Deleted: nothing of it is written again (a turn still ending must not bring it back).
    pub deleted: bool,
}

/// A session open in memory, with its turn worker.
#[derive(Debug)]
pub struct Live {
    /// Its state.
    pub state: tokio::sync::Mutex<State>,
    /// Its turn queue.
    pub jobs: mpsc::UnboundedSender<Job>,
}

/// Every session of the device.
#[derive(Debug)]
pub struct Sessions {
    /// The store.
    pub store: Store,
    /// The limits, as they are now.
    pub limits: RwLock<Limits>,
    /// How they behave.
    pub config: SessionsConfig,
    live: Mutex<HashMap<String, Arc<Live>>>,
    /// The session a terminal on the device shares now, if any.
    terminal: Mutex<Option<String>>,
    /// The cards of the shared session waiting for an answer, oldest first: the person at the
    /// terminal may answer them (`answer_card`).
    pub(crate) terminal_cards: Mutex<Vec<TerminalCard>>,
    /// What the person attached lately, for the file picker's order.
    pub(crate) frecency: crate::files::Frecency,
    /// The command set each session's client was last told.
    commands_sent: Mutex<HashMap<String, Vec<serde_json::Value>>>,
}

impl Sessions {
    /// What the control API shows of the sessions: each live one (its turns, the one running,
    /// those queued), the cards waiting at the terminal, the deletes kept for the next link. A
    /// session busy this instant says so rather than waiting for it.
    pub fn snapshot(&self) -> Value {
        /// The newest turns shown per session.
        const TURNS_SHOWN: usize = 20;
        let live: Vec<(String, Arc<Live>)> = self
            .live
            .lock()
            .map(|l| l.iter().map(|(id, s)| (id.clone(), s.clone())).collect())
            .unwrap_or_default();
        let mut sessions: Vec<Value> = live
            .iter()
            .map(|(id, live)| match live.state.try_lock() {
                Ok(state) => {
                    let turns: Vec<Value> = state
                        .turns
                        .turns
                        .iter()
                        .rev()
                        .take(TURNS_SHOWN)
                        .rev()
                        .map(|t| json!({ "turnId": t.turn_id, "state": t.state }))
                        .collect();
                    json!({
                        "sessionId": id,
                        "cwd": state.stored.cwd,
                        "title": state.stored.title,
                        "mode": state.stored.mode,
                        "running": state.running.as_ref().map(|r| r.turn_id.clone()),
                        "queued": state.queued,
                        "turns": turns,
                    })
                }
                Err(_) => json!({ "sessionId": id, "busy": true }),
            })
            .collect();
        sessions.sort_by(|a, b| a["sessionId"].as_str().cmp(&b["sessionId"].as_str()));
        let cards: Vec<String> = self
            .terminal_cards
            .lock()
            .map(|c| c.iter().map(|card| card.call_id.clone()).collect())
            .unwrap_or_default();
        json!({
            "sessions": sessions,
            "terminal_session": self.terminal_session(),
            "pending_cards": cards,
            "pending_deletes": self.store.pending_deletes().unwrap_or_default(),
        })
    }

    /// Sessions over a store.
    pub fn new(store: Store, limits: Limits, config: SessionsConfig) -> Arc<Sessions> {
        Arc::new(Sessions {
            store,
            limits: RwLock::new(limits),
            config,
            live: Mutex::new(HashMap::new()),
            terminal: Mutex::new(None),
            terminal_cards: Mutex::new(Vec::new()),
            frecency: crate::files::Frecency::default(),
            commands_sent: Mutex::new(HashMap::new()),
        })
    }

    /// Whether the device listed this capability.
    pub fn has(&self, capability: &str) -> bool {
        self.config.capabilities.iter().any(|c| c == capability)
    }

    pub(crate) fn breaks(&self, rule: &str) -> bool {
        self.config.misbehave.breaks(rule)
    }

    fn limits(&self) -> Limits {
        self.limits
            .read()
            .map(|l| l.clone())
            .unwrap_or_else(|p| p.into_inner().clone())
    }

    /// Answers a session method; `None` when `method` is none of them (or its capability was not
    /// listed), so the caller answers method-not-found.
    pub async fn handle(
        self: &Arc<Self>,
        method: &str,
        params: &Value,
        client: &Client,
    ) -> Option<Reply> {
        let answer = match method {
            methods::SESSION_NEW => self.new_session(params, client).await,
            methods::SESSION_PROMPT => {
                return Some(
                    self.prompt(params, client)
                        .await
                        .unwrap_or_else(|e| Reply::Now(Err(e))),
                );
            }
            methods::SESSION_SET_MODE => self.set_mode(params, client).await,
            methods::LEMBAS_CONFIGURE if self.has("configure") => {
                self.configure(params, client).await
            }
            methods::LEMBAS_STEER if self.has("steer") => self.steer(params).await,
            methods::LEMBAS_SESSION_STATUS if self.has("status") => self.status(params).await,
            methods::LEMBAS_SESSION_HISTORY if self.has("sessions") => self.history(params).await,
            methods::LEMBAS_SESSION_DELETE if self.has("delete") => self.delete(params).await,
            methods::LEMBAS_SESSION_REWIND if self.has("rewind") => self.rewind(params).await,
            methods::LEMBAS_SESSION_COMPACT if self.has("compact") => {
                self.compact(params, client).await
            }
            methods::LEMBAS_SESSION_TITLE if self.has("title") => self.title(params, client).await,
            methods::LEMBAS_DIRECTORIES if self.has("directories") => crate::directories::answer(
                &self.limits(),
                params,
                self.breaks(ids::DEVICE_DIRECTORIES_ROOTS),
            ),
            methods::LEMBAS_COMMANDS if self.has("commands") => self.commands(params).await,
            methods::LEMBAS_FILES_SEARCH if self.has("files") => self.search_files(params).await,
            _ => return None,
        };
        Some(Reply::Now(answer))
    }

    /// What follows an answer on the wire: after `session/new`, the command list (capability
    /// `commands`) and the plan, when the session has one.
    pub async fn after(&self, method: &str, answer: &Answer, client: &Client) {
        if method != methods::SESSION_NEW {
            return;
        }
        let Some(id) = answer
            .as_ref()
            .ok()
            .and_then(|a| a.get("sessionId"))
            .and_then(Value::as_str)
        else {
            return;
        };
        if self.breaks(ids::DEVICE_UPDATE_SESSION) {
            client.update("ses_ghost", json!({ "sessionUpdate": "agent_message_chunk", "content": { "type": "text", "text": "boo" } }));
        }
        if self.has("commands")
            && let Some(live) = self.live_session(id)
        {
            let project = live.state.lock().await.stored.cwd.clone();
            self.send_commands(id, &project, client);
        }
    }

    /// The command set of a session in `project` (built-ins, custom commands, skills).
    pub(crate) fn command_set(&self, project: &std::path::Path) -> Vec<crate::commands::Command> {
        crate::commands::command_set(crate::commands::Sources {
            project,
            own: &self.store.config_dir(),
            keeps_tui_names: self.breaks(ids::DEVICE_COMMANDS_CUSTOM),
        })
    }

    /// Tells `client` a session's command set (`available_commands_update`), and remembers it
    /// was told.
    pub(crate) fn send_commands(
        &self,
        session_id: &str,
        project: &std::path::Path,
        client: &Client,
    ) {
        let values = crate::commands::to_values(&self.command_set(project));
        client.update(
            session_id,
            json!({ "sessionUpdate": "available_commands_update", "availableCommands": values }),
        );
        if let Ok(mut sent) = self.commands_sent.lock() {
            sent.insert(session_id.to_string(), values);
        }
    }

    /// After a turn: the command set again, when it changed (a command file written, a skill
    /// made).
    pub(crate) fn commands_changed(
        &self,
        session_id: &str,
        project: &std::path::Path,
        client: &Client,
    ) {
        if !self.has("commands") {
            return;
        }
        let now = crate::commands::to_values(&self.command_set(project));
        let before = self
            .commands_sent
            .lock()
            .ok()
            .and_then(|sent| sent.get(session_id).cloned());
        if before.is_some_and(|before| before != now) {
            self.send_commands(session_id, project, client);
        }
    }

    /// Makes `client` the one a session reports to. A session opened from the store, or taken
    /// over by a new link, first tells it what a new session's client hears: the command list
    /// (capability `commands`) and the plan, when it has one.
    pub(crate) fn report_to(&self, state: &mut State, client: &Client) {
        // By link number, not by route: a route moved to a new link has not told it yet.
        let link = client.peer().link();
        let same_link = state.reported_link == Some(link);
        state.client = Some(client.clone());
        state.reported_link = Some(link);
        if same_link || self.breaks(ids::DEVICE_SESSION_TAKEOVER) {
            return;
        }
        let id = state.stored.id.clone();
        if self.has("commands") {
            self.send_commands(&id, &state.stored.cwd, client);
        }
        if let Some(plan) = &state.stored.plan {
            client.update(&id, crate::cards::plan_update(plan, self.has("plan_state")));
        }
    }

    /// A session's turn log as the store keeps it.
    fn stored_turns(&self, id: &str) -> TurnLog {
        if self.breaks(ids::DEVICE_TURNS_PERSIST) {
            return TurnLog::default();
        }
        self.store.load_turns(id).unwrap_or_default()
    }

    /// The live session `id`, opened from the store when it is not in memory.
    pub async fn open(self: &Arc<Self>, id: &str) -> Option<Arc<Live>> {
        // Looked up, loaded and put in memory under one lock: two requests naming a stored
        // session at once must share one copy of it.
        let mut map = self.live.lock().ok()?;
        if let Some(live) = map.get(id) {
            return Some(live.clone());
        }
        let stored = self.store.load_session(id).ok().flatten()?;
        let mut turns = self.stored_turns(id);
        // A turn left queued or running when the device stopped did not finish: it is unknown
        // now, and a client that sends its prompt again gets it run (spec, reattaching).
        if !self.breaks(ids::DEVICE_TURNS_RESTART) {
            turns.turns.retain(|t| t.state == TurnState::Done);
        }
        let (live, queue) = Self::make_live(stored, turns);
        map.insert(id.to_string(), live.clone());
        drop(map);
        tokio::spawn(crate::turns::worker(
            Arc::downgrade(self),
            Arc::downgrade(&live),
            queue,
        ));
        Some(live)
    }

    fn make_live(
        stored: StoredSession,
        turns: TurnLog,
    ) -> (Arc<Live>, mpsc::UnboundedReceiver<Job>) {
        let (jobs, queue) = mpsc::unbounded_channel();
        let state = State {
            stored,
            turns,
            running: None,
            queued: Vec::new(),
            waiters: HashMap::new(),
            client: None,
            reported_link: None,
            allowed: Default::default(),
            deleted: false,
        };
        (
            Arc::new(Live {
                state: tokio::sync::Mutex::new(state),
                jobs,
            }),
            queue,
        )
    }

    fn spawn_live(self: &Arc<Self>, stored: StoredSession, turns: TurnLog) -> Arc<Live> {
        let id = stored.id.clone();
        let (live, queue) = Self::make_live(stored, turns);
        if let Ok(mut map) = self.live.lock() {
            map.insert(id, live.clone());
        }
        tokio::spawn(crate::turns::worker(
            Arc::downgrade(self),
            Arc::downgrade(&live),
            queue,
        ));
        live
    }

    /// A person at the device's terminal starts a session in the first root and shares it.
    /// Gives its id (`None`: the device has no root to work in).
    pub fn share_terminal_session(self: &Arc<Self>) -> Option<String> {
        let cwd = self.limits.read().ok()?.roots.first()?.clone();
        let stored = StoredSession {
            title: "a terminal session".into(),
            // Shared with the client: it may delete it from now on.
            given: true,
            ..StoredSession::new(fresh_id("ses_"), cwd)
        };
        let id = stored.id.clone();
        if let Err(e) = self.store.save_session(&stored) {
            tracing::error!("cannot store the terminal's session: {e}");
        }
        self.spawn_live(stored, TurnLog::default());
        if let Ok(mut terminal) = self.terminal.lock() {
            *terminal = Some(id.clone());
        }
        Some(id)
    }

    /// The session a terminal on the device shares now.
    pub fn terminal_session(&self) -> Option<String> {
        self.terminal.lock().ok()?.clone()
    }

    /// Whether a terminal on the device shares this session now.
    pub fn is_terminal_session(&self, id: &str) -> bool {
        self.terminal.lock().is_ok_and(|t| t.as_deref() == Some(id))
    }

    /// The person at the terminal types `text` into the session it shares: a turn like any
    /// other, with a turn id the device makes, reported to `client`. Gives that turn's id
    /// (`None`: no session is shared, or it could not take the prompt).
    pub async fn terminal_prompt(self: &Arc<Self>, text: &str, client: &Client) -> Option<String> {
        let id = self.terminal.lock().ok()?.clone()?;
        let params = json!({ "sessionId": id, "prompt": [{ "type": "text", "text": text }] });
        match self.prompt(&params, client).await {
            Ok(Reply::Later { turn_id, answer }) => {
                // Nobody waits for a terminal turn's answer on the link: the client follows it
                // through its events.
                drop(answer);
                Some(turn_id)
            }
            Ok(Reply::Now(_)) => None,
            Err(e) => {
                tracing::warn!("the terminal's prompt was not taken: {e}");
                None
            }
        }
    }

    /// The person at the terminal answers the oldest card waiting in the shared session,
    /// waiting up to `within` for one to show; gives its toolCallId.
    pub async fn answer_terminal_card(
        &self,
        answer: crate::terminal_card::CardAnswer,
        within: Duration,
    ) -> Result<String, String> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let card = self
                .terminal_cards
                .lock()
                .ok()
                .and_then(|mut cards| (!cards.is_empty()).then(|| cards.remove(0)));
            if let Some(card) = card {
                // A card answered on the link meanwhile has nobody waiting: try the next.
                if card.answer.send(answer).is_ok() {
                    return Ok(card.call_id);
                }
                continue;
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(format!(
                    "no card of the shared session waited for an answer within {}",
                    humantime::format_duration(within)
                ));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Deletes a session on the device, as its terminal would; gives whether it was there.
    /// (Telling the client, now or at the next link, is the caller's: see [`crate::actions`].)
    pub async fn delete_here(self: &Arc<Self>, id: &str) -> Result<bool, String> {
        if !crate::store::is_store_id(id) {
            return Err(format!("`{id}` is not a session id"));
        }
        match self.open(id).await {
            Some(live) => self.remove(id, &live).await.map_err(|e| e.to_string()),
            None => Ok(false),
        }
    }

    /// Stops a session, forgets it, and takes it out of the store with its attachments.
    async fn remove(&self, id: &str, live: &Live) -> std::io::Result<bool> {
        {
            let mut state = live.state.lock().await;
            // The session stops: the running turn ends `cancelled` (and answers its prompt),
            // and the turns waiting behind it are answered `cancelled` without running.
            if let Some(running) = &state.running {
                running.cancel();
            }
            for turn in std::mem::take(&mut state.queued) {
                let answer =
                    json!({ "stopReason": "cancelled", "_meta": { "lembas": { "turnId": turn } } });
                for waiter in state.waiters.remove(&turn).unwrap_or_default() {
                    let _ = waiter.send(answer.clone());
                }
            }
            state.deleted = true;
        }
        if let Ok(mut map) = self.live.lock() {
            map.remove(id);
        }
        // A terminal that had it open goes on in a new session of its own (not shared).
        if let Ok(mut terminal) = self.terminal.lock()
            && terminal.as_deref() == Some(id)
        {
            *terminal = None;
        }
        self.store.delete_session(id)
    }

    /// The terminal lets its shared session go; gives its id.
    pub fn leave_terminal_session(&self) -> Option<String> {
        self.terminal.lock().ok()?.take()
    }

    /// Announces the session a terminal shares to `client` (spec, `_lembas/session/announce`),
    /// which the session reports to from then on: the announce first, then what a client
    /// taking a session over hears (the command list, the plan).
    pub async fn announce_to(&self, client: &Client) {
        let Some(id) = self.terminal_session() else {
            return;
        };
        let Some(live) = self.live_session(&id) else {
            return;
        };
        let mut state = live.state.lock().await;
        let params = self.announcement(&id, &state);
        client
            .peer()
            .notify(methods::LEMBAS_SESSION_ANNOUNCE, params);
        self.report_to(&mut state, client);
    }

    /// What `announce` says of a shared session.
    fn announcement(&self, id: &str, state: &State) -> Value {
        let mut params = json!({
            "sessionId": id,
            "cwd": state.stored.cwd.display().to_string(),
            "title": state.stored.title,
            "model": state.stored.model,
            "instance": state.stored.model.is_some(),
            "mode": state.stored.mode,
            "effort": state.stored.effort,
            "busy": state.running.is_some(),
            "origin": "terminal",
        });
        if self.breaks(ids::DEVICE_ANNOUNCE_SHAPE) {
            params.as_object_mut().map(|p| p.remove("origin"));
        }
        params
    }

    /// A session open in memory.
    pub fn live_session(&self, id: &str) -> Option<Arc<Live>> {
        self.live.lock().ok()?.get(id).cloned()
    }

    /// Whether any session is running a turn now.
    pub async fn any_working(&self) -> bool {
        let live: Vec<Arc<Live>> = self
            .live
            .lock()
            .map(|l| l.values().cloned().collect())
            .unwrap_or_default();
        for session in live {
            if session.state.lock().await.running.is_some() {
                return true;
            }
        }
        false
    }

    /// Sends the deletes kept while no link was up, then forgets them (`forget`).
    pub fn send_pending_deletes(&self, peer: &Arc<harness::jsonrpc::Peer>, forget: bool) {
        let pending = self.store.pending_deletes().unwrap_or_default();
        for id in &pending {
            peer.notify(methods::LEMBAS_SESSION_DELETED, json!({ "sessionId": id }));
        }
        if forget
            && !pending.is_empty()
            && let Err(e) = self.store.clear_pending_deletes()
        {
            tracing::error!("cannot forget the pending deletes: {e}");
        }
    }

    /// Saves a session and its turn log; a store that cannot be written is logged, not fatal.
    pub fn save(&self, state: &State) {
        if state.deleted {
            return;
        }
        if let Err(e) = self
            .store
            .save_session(&state.stored)
            .and_then(|_| self.store.save_turns(&state.stored.id, &state.turns))
        {
            // A run's own temporary state directory goes with the run while a turn may still end.
            if e.kind() == std::io::ErrorKind::NotFound {
                tracing::debug!(
                    "session {} not saved: its state directory is gone",
                    state.stored.id
                );
            } else {
                tracing::error!("cannot save session {}: {e}", state.stored.id);
            }
        }
    }

    /// Reads the client's `Context` fields from `_meta.lembas`, each only when its capability
    /// is listed, into the session (newer replaces older).
    pub fn read_context(&self, meta: Option<&Value>, state: &mut State) {
        let Some(lembas) = meta
            .and_then(|m| m.get("lembas"))
            .and_then(Value::as_object)
        else {
            return;
        };
        let mut context = state
            .stored
            .context
            .as_object()
            .cloned()
            .unwrap_or_default();
        for (field, capability) in [
            ("system_prompt", "context"),
            ("personalization", "context"),
            ("library", "library"),
            ("prototypes", "prototypes"),
        ] {
            if let Some(value) = lembas.get(field)
                && self.has(capability)
            {
                context.insert(field.into(), value.clone());
            }
        }
        state.stored.context = Value::Object(context);
    }

    async fn new_session(self: &Arc<Self>, params: &Value, client: &Client) -> Answer {
        let cwd = param_str(params, "cwd")?;
        let limits = self.limits();
        let cwd = match limits.check_cwd(cwd) {
            Ok(path) => path,
            Err(_) if self.breaks(ids::DEVICE_SESSION_NEW_ROOTS) => cwd.into(),
            Err(reason) => return Err(refuse(reason)),
        };
        let meta = params.get("_meta");
        let asked = meta
            .and_then(|m| m.get("mode"))
            .and_then(Value::as_str)
            .unwrap_or("edit");
        let mode = limits
            .lower_mode(asked)
            .ok_or_else(|| refuse(format!("no mode `{asked}`")))?;
        let model = meta
            .and_then(|m| m.get("lembas_model"))
            .and_then(Value::as_str)
            .map(|name| format!("{}/{name}", self.config.connection))
            .or_else(|| {
                meta.and_then(|m| m.get("model"))
                    .and_then(Value::as_str)
                    .map(String::from)
            });
        let effort = meta
            .and_then(|m| m.get("effort"))
            .and_then(Value::as_str)
            .unwrap_or("off")
            .to_string();
        let stored = StoredSession {
            id: fresh_id("ses_"),
            cwd,
            title: String::new(),
            mode: mode.clone(),
            model: model.clone(),
            effort: effort.clone(),
            context: Value::Null,
            plan: None,
            messages: Vec::new(),
            given: true,
        };
        let live = self.spawn_live(stored, TurnLog::default());
        let mut state = live.state.lock().await;
        self.read_context(meta, &mut state);
        state.client = Some(client.clone());
        state.reported_link = Some(client.peer().link());
        self.save(&state);
        let mut modes = json!({
            "currentModeId": mode,
            "availableModes": MODES.iter().map(|m| json!({ "id": m, "name": m })).collect::<Vec<_>>(),
        });
        if self.breaks(ids::DEVICE_SESSION_NEW_RESULT) {
            modes = Value::Null;
        }
        let mut result = json!({
            "sessionId": state.stored.id,
            "_meta": { "lembas": { "model": model, "mode": mode, "effort": effort } },
        });
        if !modes.is_null() {
            result["modes"] = modes;
        }
        Ok(result)
    }

    pub(crate) async fn session(self: &Arc<Self>, params: &Value) -> Result<Arc<Live>, RpcError> {
        let id = param_str(params, "sessionId")?;
        let live = self
            .open(id)
            .await
            .ok_or_else(|| refuse(format!("no session `{id}` on this device")))?;
        {
            let mut state = live.state.lock().await;
            // The limits apply to every request as they are now: a session whose folder left
            // the roots (or remote work turned off) is refused as session/new would refuse it.
            // A terminal's shared session is the terminal's to bound.
            let limits = self.limits();
            if !self.is_terminal_session(id) && !limits.inside_roots(&state.stored.cwd) {
                return Err(refuse(if limits.remote {
                    format!(
                        "session `{id}` works in {}, which is outside the device's remote roots",
                        state.stored.cwd.display()
                    )
                } else {
                    "remote work is off on this device".to_string()
                }));
            }
            // Named by the client: it may delete it from now on (spec, which sessions).
            if !state.stored.given {
                state.stored.given = true;
                self.save(&state);
            }
        }
        Ok(live)
    }

    async fn set_mode(self: &Arc<Self>, params: &Value, client: &Client) -> Answer {
        let live = self.session(params).await?;
        let asked = param_str(params, "modeId")?;
        let mode = self
            .limits()
            .lower_mode(asked)
            .ok_or_else(|| refuse(format!("no mode `{asked}`")))?;
        {
            let mut state = live.state.lock().await;
            self.report_to(&mut state, client);
        }
        self.change_mode(&live, &mode, Some(client)).await;
        Ok(json!({}))
    }

    /// Puts a session in a mode, lowered to `max_mode`, and tells the client
    /// (`current_mode_update`, `mode` event). Gives the mode it is in now.
    pub(crate) async fn change_mode(
        &self,
        live: &Live,
        asked: &str,
        client: Option<&Client>,
    ) -> String {
        let mut state = live.state.lock().await;
        let mode = self
            .limits()
            .lower_mode(asked)
            .unwrap_or_else(|| state.stored.mode.clone());
        state.stored.mode = mode.clone();
        self.save(&state);
        let id = state.stored.id.clone();
        if let Some(client) = client {
            client.update(
                &id,
                json!({ "sessionUpdate": "current_mode_update", "currentModeId": mode }),
            );
            client.event(&id, json!({ "type": "mode", "mode": mode }));
        }
        mode
    }

    async fn configure(self: &Arc<Self>, params: &Value, client: &Client) -> Answer {
        let live = self.session(params).await?;
        let mut state = live.state.lock().await;
        if state.running.is_some() {
            return Err(refuse(
                "the session is working: configure it between prompts",
            ));
        }
        let before = (state.stored.model.clone(), state.stored.effort.clone());
        if let Some(name) = params.get("model").and_then(Value::as_str) {
            state.stored.model = Some(format!("{}/{name}", self.config.connection));
        }
        if let Some(effort) = params.get("effort").and_then(Value::as_str) {
            state.stored.effort = effort.to_string();
        }
        self.save(&state);
        let (model, effort) = (state.stored.model.clone(), state.stored.effort.clone());
        if (model.clone(), effort.clone()) != before && self.has("model") {
            client.event(
                &state.stored.id,
                json!({ "type": "model", "ref": model, "effort": effort, "connection": self.config.connection, "instance": true }),
            );
        }
        Ok(json!({ "model": model, "effort": effort }))
    }

    async fn status(self: &Arc<Self>, params: &Value) -> Answer {
        let id = param_str(params, "sessionId")?;
        let in_memory = self.live.lock().ok().and_then(|l| l.get(id).cloned());
        if let Some(live) = in_memory {
            let state = live.state.lock().await;
            let running = state.running.as_ref().map(|r| r.turn_id.as_str());
            let shared = self
                .terminal
                .lock()
                .ok()
                .and_then(|t| t.clone())
                .is_some_and(|t| t == id);
            let held = if shared { "terminal" } else { "here" };
            return Ok(self.status_of(&state.stored, &state.turns, running, &state.queued, held));
        }
        // Not open: read from the store without opening it, so a status changes nothing.
        match self.store.load_session(id).ok().flatten() {
            Some(stored) => {
                let turns = self.stored_turns(id);
                Ok(self.status_of(&stored, &turns, None, &[], "none"))
            }
            None => Ok(
                json!({ "sessionId": id, "exists": false, "held": "none", "busy": false, "title": "", "queued": [] }),
            ),
        }
    }

    fn status_of(
        &self,
        stored: &StoredSession,
        turns: &TurnLog,
        running: Option<&str>,
        queued: &[String],
        held: &str,
    ) -> Value {
        let mut result = json!({
            "sessionId": stored.id,
            "exists": true,
            "held": held,
            "busy": running.is_some(),
            "title": stored.title,
            "queued": [],
        });
        if self.has("turns") {
            result["queued"] = json!(queued);
            if let Some(turn) = running {
                result["turnId"] = json!(turn);
            }
            if let Some(last) = turns.last_done()
                && !self.breaks(ids::DEVICE_STATUS_TURNS)
            {
                result["lastTurnId"] = json!(last.turn_id);
            }
        }
        if self.has("plan_state") {
            result["plan"] = stored.plan.clone().unwrap_or(Value::Null);
        }
        result
    }

    async fn history(self: &Arc<Self>, params: &Value) -> Answer {
        let live = self.session(params).await?;
        let state = live.state.lock().await;
        let turns: Vec<Value> = state
            .stored
            .messages
            .iter()
            .filter(|m| !m.reverted)
            .map(|m| match m.role.as_str() {
                "user" if !m.attachments.is_empty() => json!({ "role": "user", "text": m.text, "turnId": m.turn_id, "attachments": m.attachments }),
                "user" => json!({ "role": "user", "text": m.text, "turnId": m.turn_id }),
                _ => json!({ "role": "assistant", "text": m.text, "reasoning": m.reasoning, "tools": [] }),
            })
            .collect();
        Ok(json!({
            "sessionId": state.stored.id,
            "title": state.stored.title,
            "root": state.stored.cwd.display().to_string(),
            "turns": turns,
        }))
    }

    async fn delete(self: &Arc<Self>, params: &Value) -> Answer {
        let id = param_str(params, "sessionId")?;
        let Some(live) = self.open(id).await else {
            let deleted = self.breaks(ids::DEVICE_DELETE_RESULT);
            return Ok(json!({ "deleted": deleted }));
        };
        {
            let state = live.state.lock().await;
            // Which sessions a client may delete: one it was given, else one under the roots
            // of a device whose remote work is on. Trust is not asked: deleting runs nothing.
            let limits = self.limits();
            if !state.stored.given
                && !limits.inside_roots(&state.stored.cwd)
                && !self.breaks(ids::DEVICE_DELETE_SCOPE)
            {
                return Err(refuse(
                    "this session was never the client's and is outside the device's roots",
                ));
            }
        }
        let removed = self
            .remove(id, &live)
            .await
            .map_err(|e| RpcError::new(harness::jsonrpc::INTERNAL_ERROR, e.to_string()))?;
        Ok(json!({ "deleted": removed }))
    }

    /// `_lembas/commands`: the command set of a session, or of a folder a session could start
    /// in (the `session/new` rules).
    async fn commands(self: &Arc<Self>, params: &Value) -> Answer {
        let project = if params.get("sessionId").is_some() {
            let live = self.session(params).await?;
            live.state.lock().await.stored.cwd.clone()
        } else {
            let cwd = param_str(params, "cwd")?;
            self.limits().check_cwd(cwd).map_err(refuse)?
        };
        Ok(json!({ "commands": crate::commands::to_values(&self.command_set(&project)) }))
    }

    /// `_lembas/files/search`: the `@` picker over the session's directory (or a `cwd` that
    /// session/new would accept).
    async fn search_files(self: &Arc<Self>, params: &Value) -> Answer {
        let root = if params.get("sessionId").is_some() {
            let live = self.session(params).await?;
            live.state.lock().await.stored.cwd.clone()
        } else if let Some(cwd) = params.get("cwd") {
            let cwd = cwd
                .as_str()
                .ok_or_else(|| refuse("`cwd` must be a string"))?;
            self.limits().check_cwd(cwd).map_err(refuse)?
        } else {
            return Err(refuse("say `sessionId` or `cwd`"));
        };
        let query = param_str(params, "query")?;
        let limit = match params.get("limit") {
            None | Some(Value::Null) => crate::files::DEFAULT_LIMIT,
            Some(limit) => limit
                .as_u64()
                .filter(|l| *l >= 1)
                .and_then(|l| usize::try_from(l).ok())
                .ok_or_else(|| refuse("`limit` must be a whole number from 1"))?,
        };
        // Misbehaving: as many as asked, and gitignored files too.
        let careless = self.breaks(ids::DEVICE_FILES_SEARCH);
        let limit = if careless {
            limit
        } else {
            limit.min(crate::files::MAX_LIMIT)
        };
        let (frecency_root, query_owned) = (root.clone(), query.to_string());
        let sessions = self.clone();
        // The walk reads directories: off the async threads.
        let found = tokio::task::spawn_blocking(move || {
            crate::files::search(
                &frecency_root,
                &query_owned,
                limit,
                &sessions.frecency,
                careless,
            )
        })
        .await
        .map_err(|e| refuse(format!("the search failed: {e}")))?;
        let files: Vec<Value> = found.iter().map(crate::files::Entry::to_value).collect();
        Ok(json!({ "root": root.display().to_string(), "files": files }))
    }

    async fn title(self: &Arc<Self>, params: &Value, client: &Client) -> Answer {
        let asked = param_str(params, "title")?;
        if self.breaks(ids::DEVICE_SESSION_UNKNOWN) && self.session(params).await.is_err() {
            // Misbehaving: a session it does not have is titled as if it did.
            return Ok(json!({ "title": asked }));
        }
        let live = self.session(params).await?;
        // The spec bounds a title at 200 characters and answers with the title kept; a longer
        // one is cut rather than refused, the way the CLI's own titles are.
        let title: String = if self.breaks(ids::DEVICE_TITLE_LIMIT) {
            asked.to_string()
        } else {
            asked.chars().take(TITLE_MAX).collect()
        };
        let mut state = live.state.lock().await;
        state.stored.title = title.clone();
        self.save(&state);
        client.event(
            &state.stored.id,
            json!({ "type": "title", "id": state.stored.id, "title": title }),
        );
        Ok(json!({ "title": title }))
    }
}

/// Sessions and turn answers across a restart on the same store.
#[cfg(test)]
mod survives_restart;
