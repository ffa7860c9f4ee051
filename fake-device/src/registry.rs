//! The session registry: the sessions open in memory and the store under them, with what every
//! room of the session model reads (limits, behaviour, the terminal and its cards, frecency)
//! and the reports a session owes its client (commands, plan, mode). It runs no turn: whoever
//! opens a session here hands its queue to a turn worker ([`crate::sessions`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use harness::lembas::{Spec, methods};
use harness::rules::{Misbehaviours, ids};
use serde_json::{Value, json};

use crate::events::Client;
use crate::limits::Limits;
use crate::open_session::{JobQueue, OpenSession, State};
use crate::store::{Store, StoredSession, TurnLog, TurnState};
use crate::terminal_card::TerminalCard;

/// How the sessions behave.
#[derive(Debug, Clone)]
pub struct SessionsConfig {
    /// The spec the device implements.
    pub spec: Spec,
    /// The capabilities it listed in initialize.
    pub capabilities: Vec<&'static str>,
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
    pub model: Option<crate::instance_model::ModelClient>,
    /// How long a card waits for an answer.
    pub approval_timeout: Duration,
    /// The scripted agent's scripts: a prompt one matches runs it instead of the agent.
    pub scripts: Vec<crate::scripts::AgentScript>,
    /// A person at the terminal answers the cards of the session it shares this long after
    /// they are shown (`None`: nobody answers there).
    pub terminal_answers_after: Option<Duration>,
    /// `library: local`: the model's library searches stay on the device.
    pub library_local: bool,
}

/// The sessions the device has in memory, the store under them, and what every room of the
/// session model reads: the limits, how the device behaves, the terminal and its cards.
#[derive(Debug)]
#[allow(missing_docs)] // fields whose names say it all go undocumented
pub struct Registry {
    pub store: Store,
    /// The limits, as they are now.
    pub limits: RwLock<Limits>,
    /// How they behave.
    pub config: SessionsConfig,
    /// The sessions open in memory, by id.
    live: Mutex<HashMap<String, Arc<OpenSession>>>,
    /// The session a terminal on the device shares now, if any.
    terminal: Mutex<Option<String>>,
    /// The cards of the shared session waiting for an answer, oldest first: the person at the
    /// terminal may answer them (`answer_card`).
    pub(crate) terminal_cards: Mutex<Vec<TerminalCard>>,
    /// What the person attached lately, for the file picker's order.
    pub(crate) frecency: crate::files::Frecency,
    /// The command set each session's client was last told.
    commands_sent: Mutex<HashMap<String, Vec<serde_json::Value>>>,
    /// The limits the latest hello said (what a link was told, which may be older than now).
    said_limits: Mutex<Option<Limits>>,
    /// The `left`s kept for the next link (only a device misbehaving on device.left.shape).
    pub(crate) lefts_kept: Mutex<Vec<String>>,
    /// Sessions left available and still refused as the terminal's (only a device misbehaving
    /// on device.left.available).
    /// Set when a misbehaving device took an instance without usage for a broken login: it
    /// refuses every prompt after.
    pub(crate) usage_refused: std::sync::atomic::AtomicBool,
    pub(crate) left_held: Mutex<std::collections::HashSet<String>>,
}

/// How a change of a session's mode is told to its client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ModeReport {
    /// A `current_mode_update` and, to a lembas client, a `mode` event.
    Both,
    /// Only the `mode` event: no `current_mode_update` (a misbehaving device).
    EventOnly,
    /// Neither (a misbehaving device).
    Neither,
}

/// A session [`Registry::open`] found.
#[derive(Debug)]
pub enum Opened {
    /// It was in memory already, with its worker.
    Already(Arc<OpenSession>),
    /// Opened from the store now: its queue waits for a worker.
    Now(Arc<OpenSession>, JobQueue),
}

impl Registry {
    /// What the control API shows of the sessions: each live one (its turns, the one running,
    /// those queued), the cards waiting at the terminal, the deletes kept for the next link. A
    /// session busy this instant says so rather than waiting for it.
    pub fn snapshot(&self) -> Value {
        /// The newest turns shown per session.
        const TURNS_SHOWN: usize = 20;
        let live: Vec<(String, Arc<OpenSession>)> = self
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
    pub fn new(store: Store, limits: Limits, config: SessionsConfig) -> Registry {
        Registry {
            store,
            limits: RwLock::new(limits),
            config,
            live: Mutex::new(HashMap::new()),
            terminal: Mutex::new(None),
            terminal_cards: Mutex::new(Vec::new()),
            frecency: crate::files::Frecency::default(),
            commands_sent: Mutex::new(HashMap::new()),
            said_limits: Mutex::new(None),
            lefts_kept: Mutex::new(Vec::new()),
            left_held: Mutex::new(Default::default()),
            usage_refused: Default::default(),
        }
    }

    /// Whether the device listed this capability.
    pub fn has(&self, capability: &str) -> bool {
        self.config.capabilities.contains(&capability)
    }

    pub(crate) fn breaks(&self, rule: &str) -> bool {
        self.config.misbehave.breaks(rule)
    }

    /// Whether to break `rule` in its way `name` (one of the catalogue's `ways` for it).
    pub(crate) fn breaks_way(&self, rule: &str, name: &str) -> bool {
        self.config.misbehave.breaks_way(rule, name)
    }

    /// Whether sessions send their command list (`available_commands_update`): with capability
    /// `commands` only, unless misbehaving on purpose.
    pub(crate) fn sends_commands(&self) -> bool {
        self.has("commands") || self.breaks(ids::DEVICE_COMMANDS_CAPABILITY)
    }

    /// The limits as they are now.
    pub fn limits(&self) -> Limits {
        self.limits
            .read()
            .map(|l| l.clone())
            .unwrap_or_else(|p| p.into_inner().clone())
    }

    /// Remembers the limits a hello said now.
    pub fn said_in_hello(&self) {
        let now = self.limits();
        if let Ok(mut said) = self.said_limits.lock() {
            *said = Some(now);
        }
    }

    /// The limits the latest hello said, if one was sent.
    pub fn said_limits(&self) -> Option<Limits> {
        self.said_limits.lock().ok()?.clone()
    }

    /// The command set of a session in `project` (built-ins, custom commands, skills).
    pub(crate) fn command_set(
        &self,
        project: &std::path::Path,
    ) -> Vec<crate::command_set::Command> {
        let mut set = crate::command_set::command_set(crate::command_set::Sources {
            project,
            own: &self.store.config_dir(),
            keeps_tui_names: self.breaks(ids::DEVICE_COMMANDS_CUSTOM),
        });
        if self.breaks(ids::DEVICE_COMMANDS_BUILTINS) {
            // Misbehaving: `continue` is left out of the built-ins.
            set.retain(|c| c.name != "continue");
        }
        if self
            .config
            .misbehave
            .breaks_way(ids::DEVICE_COMMANDS_BUILTINS, "review_custom")
        {
            // Misbehaving: `review` listed, but as a custom command.
            for command in set.iter_mut().filter(|c| c.name == "review") {
                command.kind = crate::command_set::Kind::Custom;
            }
        }
        if self.breaks(ids::DEVICE_COMMANDS_BUILTINS_FIRST) {
            // Misbehaving: custom commands and skills before the built-ins.
            set.sort_by_key(|c| matches!(c.kind, crate::command_set::Kind::Builtin));
        }
        if self.breaks_way(ids::DEVICE_COMMANDS_BUILTINS_FIRST, "skills_before_custom") {
            // Misbehaving: the skills between the built-ins and the custom commands.
            set.sort_by_key(|c| match c.kind {
                crate::command_set::Kind::Builtin => 0,
                crate::command_set::Kind::Skill => 1,
                crate::command_set::Kind::Custom => 2,
            });
        }
        set
    }

    /// Tells `client` a session's command set (`available_commands_update`), and remembers it
    /// was told.
    pub(crate) fn send_commands(
        &self,
        session_id: &str,
        project: &std::path::Path,
        client: &Client,
    ) {
        let values = crate::command_set::to_values(&self.command_set(project));
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
        if !self.sends_commands() {
            return;
        }
        let now = crate::command_set::to_values(&self.command_set(project));
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
        // Misbehaving: the command list and the plan name another session than the one taken.
        let id = if self.breaks_way(ids::DEVICE_SESSION_TAKEOVER, "other_session") {
            format!("{id}_other")
        } else {
            id
        };
        if self.sends_commands() {
            self.send_commands(&id, &state.stored.cwd, client);
        }
        if let Some(plan) = &state.stored.plan
            && !self.breaks(ids::DEVICE_PLAN_AFTER_NEW)
        {
            // Misbehaving: the update says the plan is cleared.
            let plan = if self.breaks_way(ids::DEVICE_PLAN_AFTER_NEW, "as_cleared") {
                &serde_json::Value::Null
            } else {
                plan
            };
            client.update(&id, crate::plan::plan_update(plan, self.has("plan_state")));
        }
    }

    /// A session's turn log as the store keeps it.
    pub fn stored_turns(&self, id: &str) -> TurnLog {
        if self.breaks(ids::DEVICE_TURNS_PERSIST) {
            return TurnLog::default();
        }
        let mut log = self.store.load_turns(id).unwrap_or_default();
        if self.breaks_way(ids::DEVICE_TURNS_PERSIST, "no_answers") {
            // Misbehaving: the finished turns' ids outlive a restart, their answers do not.
            for turn in &mut log.turns {
                turn.answer = None;
            }
        }
        log
    }

    /// The live session `id`, opened from the store when it is not in memory: a session opened
    /// now comes with its turn queue, which the caller hands to a turn worker.
    pub fn open(&self, id: &str) -> Option<Opened> {
        // Looked up, loaded and put in memory under one lock: two requests naming a stored
        // session at once must share one copy of it.
        let mut map = self.live.lock().ok()?;
        if let Some(live) = map.get(id) {
            return Some(Opened::Already(live.clone()));
        }
        if self.breaks(ids::DEVICE_SESSIONS_REOPEN) {
            // Misbehaving: a session not in memory is not looked for in the store.
            return None;
        }
        let mut stored = match self.store.load_session(id).ok().flatten() {
            Some(stored) => stored,
            // Misbehaving: a deleted session named again comes back with its conversation.
            None if self.breaks_way(ids::DEVICE_DELETE_GONE_LATER, "conversation_kept") => {
                self.store.load_aside(id).ok().flatten()?
            }
            None => return None,
        };
        if self.breaks_way(ids::DEVICE_SESSIONS_REOPEN, "empty") {
            // Misbehaving: opened from the store without its conversation.
            stored.messages.clear();
        }
        let mut turns = self.stored_turns(id);
        // A turn left queued or running when the device stopped did not finish: it is unknown
        // now, and a client that sends its prompt again gets it run (spec, reattaching).
        if self.breaks_way(ids::DEVICE_TURNS_RESTART, "as_done") {
            // Misbehaving: a turn cut short by the restart is counted as finished.
            for turn in &mut turns.turns {
                turn.state = TurnState::Done;
            }
        } else if !self.breaks(ids::DEVICE_TURNS_RESTART) {
            turns.turns.retain(|t| t.state == TurnState::Done);
        }
        let (live, queue) = OpenSession::new(stored, turns);
        map.insert(id.to_string(), live.clone());
        Some(Opened::Now(live, queue))
    }

    /// Puts a new session in memory; gives it with the turn queue the caller hands to a turn
    /// worker.
    pub fn insert(&self, stored: StoredSession, turns: TurnLog) -> (Arc<OpenSession>, JobQueue) {
        let id = stored.id.clone();
        let (live, queue) = OpenSession::new(stored, turns);
        if let Ok(mut map) = self.live.lock() {
            map.insert(id, live.clone());
        }
        (live, queue)
    }

    /// A terminal on the device shares session `id` from now on.
    pub fn share(&self, id: &str) {
        if let Ok(mut terminal) = self.terminal.lock() {
            *terminal = Some(id.to_string());
        }
    }

    /// The session a terminal on the device shares now.
    pub fn terminal_session(&self) -> Option<String> {
        self.terminal.lock().ok()?.clone()
    }

    /// Whether a terminal on the device shares this session now.
    pub fn is_terminal_session(&self, id: &str) -> bool {
        self.terminal.lock().is_ok_and(|t| t.as_deref() == Some(id))
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

    /// Stops a session, forgets it, and takes it out of the store with its attachments.
    pub async fn remove(&self, id: &str, live: &OpenSession) -> std::io::Result<bool> {
        {
            let mut state = live.state.lock().await;
            // The session stops: the running turn ends `cancelled` (and answers its prompt),
            // and the turns waiting behind it are answered `cancelled` without running.
            // Misbehaving: the running turn goes on, its output after the delete's answer.
            if let Some(running) = &state.running
                && !self.breaks(ids::DEVICE_DELETE_STOPS)
            {
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
        // Misbehaving: a terminal that had it open goes on in it, still shared.
        let kept = self.breaks(ids::DEVICE_DELETE_TERMINAL_NEW) && self.is_terminal_session(id);
        if let Ok(mut map) = self.live.lock()
            && !kept
        {
            map.remove(id);
        }
        // A terminal that had it open goes on in a new session of its own (not shared).
        if let Ok(mut terminal) = self.terminal.lock()
            && terminal.as_deref() == Some(id)
            && !kept
        {
            *terminal = None;
        }
        if self.breaks(ids::DEVICE_DELETE_GONE_LATER) {
            // Misbehaving: gone from memory, and still in the store for the next start.
            return Ok(true);
        }
        if self.breaks_way(ids::DEVICE_DELETE_GONE_LATER, "conversation_kept")
            && let Err(e) = self.store.set_aside(id)
        {
            tracing::error!("cannot keep session {id} aside: {e}");
        }
        self.store.delete_session(id)
    }

    /// The terminal lets its shared session go; gives its id.
    pub fn leave_terminal_session(&self) -> Option<String> {
        self.terminal.lock().ok()?.take()
    }

    /// A session open in memory.
    pub fn live_session(&self, id: &str) -> Option<Arc<OpenSession>> {
        self.live.lock().ok()?.get(id).cloned()
    }

    /// Every session open in memory now.
    fn live_sessions(&self) -> Vec<Arc<OpenSession>> {
        self.live
            .lock()
            .map(|l| l.values().cloned().collect())
            .unwrap_or_default()
    }

    /// Cancels every running turn (only a device breaking `device.limits.wait` in its way
    /// `cancels_turn` does, to relink sooner).
    pub async fn cancel_all(&self) {
        let live = self.live_sessions();
        for session in live {
            if let Some(running) = &session.state.lock().await.running {
                running.cancel();
            }
        }
    }

    /// Forgets the ids of the turns waiting in every session's queue (only a device breaking
    /// `device.turns.dedup` in its way `lost_on_drop` does, when its link drops): they still
    /// run, but a prompt sent again with one of their ids is taken for a new turn.
    pub async fn forget_queued_turns(&self) {
        for session in self.live_sessions() {
            let mut state = session.state.lock().await;
            let waiting = state.queued.clone();
            state.turns.turns.retain(|t| !waiting.contains(&t.turn_id));
        }
    }

    /// Whether any session is running a turn now.
    pub async fn any_working(&self) -> bool {
        let live = self.live_sessions();
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
                // Misbehaving: a null personalization leaves the chat's earlier one in place.
                if field == "personalization"
                    && value.is_null()
                    && self.breaks_way(ids::DEVICE_CONTEXT_PERSONALIZATION, "null_kept")
                {
                    continue;
                }
                // Misbehaving: an empty list of bases leaves the earlier bases named.
                if field == "library"
                    && value
                        .pointer("/bases")
                        .and_then(Value::as_array)
                        .is_some_and(Vec::is_empty)
                    && self.breaks_way(ids::DEVICE_CONTEXT_LIBRARY, "kept_when_empty")
                {
                    continue;
                }
                // Misbehaving: a newer authored prompt is added to the older, not put in its place.
                if field == "system_prompt"
                    && self.breaks_way(ids::DEVICE_CONTEXT_READ, "appended")
                    && let (Some(old), Some(new)) =
                        (context.get(field).and_then(Value::as_str), value.as_str())
                    && !old.is_empty()
                    && !new.is_empty()
                {
                    let both = format!("{old}\n\n{new}");
                    context.insert(field.into(), Value::String(both));
                    continue;
                }
                context.insert(field.into(), value.clone());
            }
        }
        state.stored.context = Value::Object(context);
    }

    /// Puts a session in a mode, lowered to `max_mode`, and tells the client
    /// (`current_mode_update`, `mode` event). Gives the mode it is in now.
    pub(crate) async fn change_mode(
        &self,
        live: &OpenSession,
        asked: &str,
        client: Option<&Client>,
    ) -> String {
        let lowered = self.limits().lower_mode(asked);
        let mode = match lowered {
            Some(mode) => mode,
            None => live.state.lock().await.stored.mode.clone(),
        };
        self.put_mode(live, &mode, client, ModeReport::Both).await;
        mode
    }

    /// Puts a session in `mode` as it is (the caller lowered it, or misbehaves), and tells the
    /// client as `report` says.
    pub(crate) async fn put_mode(
        &self,
        live: &OpenSession,
        mode: &str,
        client: Option<&Client>,
        report: ModeReport,
    ) {
        let mut state = live.state.lock().await;
        state.stored.mode = mode.to_string();
        self.save(&state);
        let id = state.stored.id.clone();
        if let Some(client) = client {
            if report == ModeReport::Both {
                client.update(
                    &id,
                    json!({ "sessionUpdate": "current_mode_update", "currentModeId": mode }),
                );
            }
            if report != ModeReport::Neither {
                client.event(&id, json!({ "type": "mode", "mode": mode }));
            }
        }
    }
}
