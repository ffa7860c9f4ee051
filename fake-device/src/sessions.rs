//! The session methods' router: `session/new`, `set_mode`, `_lembas/configure` and the
//! `_lembas/session/*` family are answered here; prompts, cancel, steer, rewind and compact go
//! to [`crate::turns`] once the session they name is open. The top room of the session model:
//! it opens sessions in the [`Registry`] and starts each one's turn worker.

use harness::lembas::methods;
use std::sync::Arc;

use harness::jsonrpc::RpcError;
use harness::rules::ids;
use serde_json::{Value, json};

use crate::answers::{Answer, Reply, fresh_id, param_str, refuse};
use crate::events::Client;
use crate::limits::{Limits, MODES};
use crate::live::{JobQueue, Live, State, TITLE_MAX};
use crate::model_ref;
use crate::registry::{ModeReport, Opened, Registry, SessionsConfig};
use crate::store::{Store, StoredSession, TurnLog};
use crate::turns::{Faults, Turns};

/// A session's model and effort: its default, and `_lembas/configure`.
mod model;

/// The Context fields of `_meta.lembas`, with the capability that has the device read each.
const CONTEXT_FIELDS: [(&str, &str); 4] = [
    ("system_prompt", "context"),
    ("personalization", "context"),
    ("library", "library"),
    ("prototypes", "prototypes"),
];

/// Every session of the device, as the link's methods reach them.
#[derive(Debug)]
pub struct Sessions {
    registry: Arc<Registry>,
    /// What the turns get wrong on purpose, resolved once from the configured misbehaviours.
    turn_faults: Faults,
}

impl Sessions {
    /// Sessions over a store.
    pub fn new(store: Store, limits: Limits, config: SessionsConfig) -> Arc<Sessions> {
        let turn_faults = Faults::of(&config.misbehave);
        Arc::new(Sessions {
            registry: Arc::new(Registry::new(store, limits, config)),
            turn_faults,
        })
    }

    /// The registry under the sessions: their store, limits, behaviour and terminal.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The live session `id`, opened from the store when it is not in memory.
    pub async fn open(&self, id: &str) -> Option<Arc<Live>> {
        match self.registry.open(id)? {
            Opened::Already(live) => Some(live),
            Opened::Now(live, queue) => {
                self.start_worker(&live, queue);
                Some(live)
            }
        }
    }

    /// Puts a new session in memory with its turn worker.
    fn spawn_live(&self, stored: StoredSession, turns: TurnLog) -> Arc<Live> {
        let (live, queue) = self.registry.insert(stored, turns);
        self.start_worker(&live, queue);
        live
    }

    fn start_worker(&self, live: &Arc<Live>, queue: JobQueue) {
        tokio::spawn(crate::turns::worker(
            Arc::downgrade(&self.registry),
            Arc::downgrade(live),
            queue,
            self.turn_faults,
        ));
    }

    /// `session/prompt`, once its session is open: see [`Turns::prompt`].
    async fn prompt(&self, params: &Value, client: &Client) -> Result<Reply, RpcError> {
        // Misbehaving: a session left available is refused as still the terminal's.
        if let Some(id) = params.get("sessionId").and_then(Value::as_str)
            && self
                .registry
                .left_held
                .lock()
                .is_ok_and(|held| held.contains(id))
        {
            return Err(refuse(format!("session `{id}` is in use at the terminal")));
        }
        let live = self.session(params).await?;
        Turns::new(&self.registry, &self.turn_faults)
            .prompt(&live, params, client)
            .await
    }

    /// `session/cancel`: stops the running turn (a notification: nothing to answer).
    pub async fn cancel(&self, params: &Value) {
        let Some(id) = params.get("sessionId").and_then(Value::as_str) else {
            return;
        };
        if let Some(live) = self.open(id).await {
            Turns::new(&self.registry, &self.turn_faults)
                .cancel(&live)
                .await;
        }
    }

    /// Misbehaving: a Context field of a capability the device did not list refused as an
    /// unknown field, on session/new (or, the second way, on session/prompt only).
    fn unlisted_context_refused(&self, method: &str, params: &Value) -> Option<RpcError> {
        let rule = ids::DEVICE_CONTEXT_UNLISTED_IGNORED;
        let refuses = match method {
            methods::SESSION_NEW => self.registry.breaks(rule),
            methods::SESSION_PROMPT => self.registry.breaks_way(rule, "on_prompt"),
            _ => false,
        };
        if !refuses {
            return None;
        }
        let context = params.pointer("/_meta/lembas")?.as_object()?;
        let (field, _) = CONTEXT_FIELDS.into_iter().find(|(field, capability)| {
            context.contains_key(*field) && !self.registry.has(capability)
        })?;
        Some(RpcError::new(
            harness::jsonrpc::INVALID_PARAMS,
            format!("unknown field `_meta.lembas.{field}`"),
        ))
    }

    /// Answers a session method; `None` when `method` is none of them (or its capability was not
    /// listed), so the caller answers method-not-found.
    pub async fn handle(&self, method: &str, params: &Value, client: &Client) -> Option<Reply> {
        if let Some(refusal) = self.unlisted_context_refused(method, params) {
            return Some(Reply::Now(Err(refusal)));
        }
        if method == methods::SESSION_PROMPT
            && self
                .registry
                .usage_refused
                .load(std::sync::atomic::Ordering::Relaxed)
        {
            return Some(Reply::Now(Err(RpcError::new(
                harness::jsonrpc::INTERNAL_ERROR,
                "logged out: the instance has no usage",
            ))));
        }
        let has = |capability| self.registry.has(capability);
        let turns = Turns::new(&self.registry, &self.turn_faults);
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
            methods::LEMBAS_CONFIGURE if has("configure") => self.configure(params, client).await,
            methods::LEMBAS_STEER if has("steer") => match self.session(params).await {
                Ok(live) => turns.steer(&live, params).await,
                Err(e) => Err(e),
            },
            methods::LEMBAS_SESSION_STATUS if has("status") => self.status(params).await,
            methods::LEMBAS_SESSION_HISTORY if has("sessions") => self.history(params).await,
            methods::LEMBAS_SESSION_DELETE if has("delete") => self.delete(params).await,
            methods::LEMBAS_SESSION_REWIND if has("rewind") => match self.session(params).await {
                Ok(live) => turns.rewind(&live, params).await,
                Err(e) => Err(e),
            },
            // Misbehaving: compact is listed and answered method-not-found.
            methods::LEMBAS_SESSION_COMPACT
                if has("compact") && !self.registry.breaks(ids::DEVICE_CAPABILITIES_KEPT) =>
            {
                match self.session(params).await {
                    Ok(live) => turns.compact(&live, params, client).await,
                    Err(e) => Err(e),
                }
            }
            methods::LEMBAS_SESSION_TITLE if has("title") => self.title(params, client).await,
            methods::LEMBAS_DIRECTORIES if has("directories") => crate::directories::answer(
                &self.registry.limits(),
                params,
                crate::directories::Faults {
                    any_path: self.registry.breaks(ids::DEVICE_DIRECTORIES_ROOTS),
                    no_subfolders: self.registry.breaks(ids::DEVICE_DIRECTORIES_LISTING),
                    refuses_entries: self.registry.breaks(ids::DEVICE_DIRECTORIES_ACCEPTED),
                    other_code: self
                        .registry
                        .breaks_way(ids::DEVICE_DIRECTORIES_ROOTS, "other_code"),
                    parent_entries: self
                        .registry
                        .breaks_way(ids::DEVICE_DIRECTORIES_LISTING, "siblings"),
                },
            ),
            methods::LEMBAS_COMMANDS if has("commands") => self.commands(params).await,
            methods::LEMBAS_FILES_SEARCH if has("files") => self.search_files(params).await,
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
        if self.registry.config.stdio
            && self
                .registry
                .breaks_way(ids::DEVICE_STDIO_PLAIN_ACP, "announces")
        {
            // Misbehaving: an editor is told of the new session as LLeMbas would be.
            client.peer().notify(
                methods::LEMBAS_SESSION_ANNOUNCE,
                json!({ "sessionId": id, "origin": "client" }),
            );
        }
        if self.registry.breaks(ids::DEVICE_UPDATE_SESSION) {
            client.update("ses_ghost", json!({ "sessionUpdate": "agent_message_chunk", "content": { "type": "text", "text": "boo" } }));
        }
        if self
            .registry
            .breaks_way(ids::DEVICE_UPDATE_SESSION, "event_ghost")
        {
            // Misbehaving: an event about a session the client never had.
            client.event("ses_ghost", json!({ "type": "text", "text": "boo" }));
        }
        // Misbehaving: no command list follows the answer.
        if self.registry.sends_commands()
            && !self.registry.breaks(ids::DEVICE_COMMANDS_AFTER_NEW)
            && let Some(live) = self.registry.live_session(id)
        {
            let project = live.state.lock().await.stored.cwd.clone();
            self.registry.send_commands(id, &project, client);
        }
    }

    /// A person at the device's terminal starts a session in the first root and shares it.
    /// Gives its id (`None`: the device has no root to work in).
    pub fn share_terminal_session(&self) -> Option<String> {
        let cwd = self.registry.limits.read().ok()?.roots.first()?.clone();
        let stored = StoredSession {
            title: "a terminal session".into(),
            // Shared with the client: it may delete it from now on.
            given: true,
            ..StoredSession::new(fresh_id("ses_"), cwd)
        };
        let id = stored.id.clone();
        if let Err(e) = self.registry.store.save_session(&stored) {
            tracing::error!("cannot store the terminal's session: {e}");
        }
        self.spawn_live(stored, TurnLog::default());
        self.registry.share(&id);
        Some(id)
    }

    /// The person at the terminal types `text` into the session it shares: a turn like any
    /// other, with a turn id the device makes, reported to `client`. Gives that turn's id
    /// (`None`: no session is shared, or it could not take the prompt).
    pub async fn terminal_prompt(&self, text: &str, client: &Client) -> Option<String> {
        let id = self.registry.terminal_session()?;
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

    /// Deletes a session on the device, as its terminal would; gives whether it was there.
    /// (Telling the client, now or at the next link, is the caller's: see [`crate::actions`].)
    pub async fn delete_here(&self, id: &str) -> Result<bool, String> {
        if !crate::store::is_store_id(id) {
            return Err(format!("`{id}` is not a session id"));
        }
        match self.open(id).await {
            Some(live) => self
                .registry
                .remove(id, &live)
                .await
                .map_err(|e| e.to_string()),
            None => Ok(false),
        }
    }

    /// Announces the session a terminal shares to `client` (spec, `_lembas/session/announce`),
    /// which the session reports to from then on: the announce first, then what a client
    /// taking a session over hears (the command list, the plan).
    pub async fn announce_to(&self, client: &Client) {
        let Some(id) = self.registry.terminal_session() else {
            return;
        };
        let Some(live) = self.registry.live_session(&id) else {
            return;
        };
        let mut state = live.state.lock().await;
        let params = self.announcement(&id, &state);
        client
            .peer()
            .notify(methods::LEMBAS_SESSION_ANNOUNCE, params);
        self.registry.report_to(&mut state, client);
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
        if self.registry.breaks(ids::DEVICE_ANNOUNCE_SHAPE) {
            params.as_object_mut().map(|p| p.remove("origin"));
        }
        if self
            .registry
            .breaks_way(ids::DEVICE_ANNOUNCE_SHAPE, "wrong_origin")
        {
            // Misbehaving: a terminal's session announced as the service's.
            params["origin"] = json!("service");
        }
        params
    }

    async fn new_session(&self, params: &Value, client: &Client) -> Answer {
        let cwd = param_str(params, "cwd")?;
        let limits = self.registry.limits();
        // Misbehaving: judged by the limits the link's hello said, not by those of now.
        let limits = match self.registry.said_limits() {
            Some(said) if self.registry.breaks(ids::DEVICE_LIMITS_CURRENT) => said,
            _ => limits,
        };
        let mut limits = limits;
        if self
            .registry
            .breaks_way(ids::DEVICE_LIMITS_CURRENT, "remote_ignored")
        {
            // Misbehaving: a cwd judged by the current roots alone, as if remote work were on.
            limits.remote = true;
        }
        let cwd = match limits.check_cwd(cwd) {
            // Misbehaving: a folder below a root, which the picker marks accepted, is refused.
            Ok(path)
                if !limits.roots.contains(&path)
                    && self
                        .registry
                        .breaks_way(ids::DEVICE_DIRECTORIES_ACCEPTED, "refused_by_new") =>
            {
                return Err(refuse("only a root itself may be opened"));
            }
            Ok(path) => path,
            Err(_) if self.registry.breaks(ids::DEVICE_SESSION_NEW_ROOTS) => cwd.into(),
            // Misbehaving: refused, as an internal error rather than invalid params.
            Err(reason)
                if self
                    .registry
                    .breaks_way(ids::DEVICE_SESSION_NEW_ROOTS, "other_code") =>
            {
                return Err(RpcError::new(harness::jsonrpc::INTERNAL_ERROR, reason));
            }
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
        // Misbehaving: the asked mode as it is, above `max_mode` or not.
        let mode = if self.registry.breaks(ids::DEVICE_SESSION_NEW_MODE) {
            asked.to_string()
        } else if self
            .registry
            .breaks_way(ids::DEVICE_SESSION_NEW_MODE, "raised")
            && let Some(max) = limits.lower_mode("edit")
        {
            // Misbehaving: every session opens at `max_mode`, a lower mode asked or not.
            max
        } else {
            mode
        };
        let connection = &self.registry.config.connection;
        let lembas_model = meta
            .and_then(|m| m.get("lembas_model"))
            .and_then(Value::as_str)
            .filter(|_| !self.registry.breaks(ids::DEVICE_SESSION_NEW_LEMBAS_MODEL))
            .map(|name| {
                // Misbehaving: at protocol 1 a served id with a `/` is taken for a ref as it is.
                let provided = client.protocol() >= 2 && name.contains('/');
                let model = name.split_once('/').map_or(name, |(_, model)| model);
                if self.registry.breaks(ids::DEVICE_MODEL_REF_BARE)
                    && client.protocol() == 1
                    && name.contains('/')
                {
                    name.to_string()
                } else if client.protocol() == 1
                    && name.contains('/')
                    && self
                        .registry
                        .breaks_way(ids::DEVICE_MODEL_REF_BARE, "split")
                {
                    // Misbehaving: at protocol 1 an id with a `/` is split, its provider dropped.
                    model_ref::of_served(connection, model)
                } else if provided && self.registry.breaks(ids::DEVICE_MODEL_REF_FORM) {
                    // Misbehaving: the protocol-1 form, the provider left out.
                    format!("{connection}/{model}")
                } else if provided && self.registry.breaks_way(ids::DEVICE_MODEL_REF_FORM, "bare") {
                    // Misbehaving: the model's name alone.
                    model.to_string()
                } else {
                    model_ref::of_served(connection, name)
                }
            });
        let own_model = match meta
            .and_then(|m| m.get("model"))
            .and_then(Value::as_str)
            .filter(|_| !self.registry.breaks(ids::DEVICE_SESSION_NEW_OWN_MODEL))
        {
            Some(reference) => Some(self.own_ref(reference).await),
            None => None,
        };
        // Misbehaving: the model named is answered, and the session runs on the default.
        let reported_only = (lembas_model.is_some()
            && self
                .registry
                .breaks_way(ids::DEVICE_SESSION_NEW_LEMBAS_MODEL, "reported_only"))
            || (lembas_model.is_none()
                && own_model.is_some()
                && self
                    .registry
                    .breaks_way(ids::DEVICE_SESSION_NEW_OWN_MODEL, "reported_only"));
        let model = lembas_model.or(own_model);
        let reported = model.clone();
        let model = if reported_only { None } else { model };
        // No model named: the session starts on the device's default, which it names.
        let model = match model {
            Some(model) => Some(model),
            None => self.default_model().await,
        };
        let effort = meta
            .and_then(|m| m.get("effort"))
            .and_then(Value::as_str)
            .unwrap_or("off")
            .to_string();
        // Misbehaving: every session opens at one effort, whatever the client asked.
        let effort = match self.registry.breaks(ids::DEVICE_SESSION_NEW_EFFORT) {
            true => "medium".to_string(),
            false => effort,
        };
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
        self.registry.read_context(meta, &mut state);
        state.client = Some(client.clone());
        state.reported_link = Some(client.peer().link());
        self.registry.save(&state);
        let mut modes = json!({
            "currentModeId": mode,
            "availableModes": MODES.iter().map(|m| json!({ "id": m, "name": m })).collect::<Vec<_>>(),
        });
        if self.registry.breaks(ids::DEVICE_SESSION_NEW_RESULT) {
            modes = Value::Null;
        }
        let model = if reported_only { reported } else { model };
        let mut result = json!({
            "sessionId": state.stored.id,
            "_meta": { "lembas": { "model": model, "mode": mode, "effort": effort } },
        });
        // Misbehaving: the session's effort left out of `_meta.lembas`.
        if self
            .registry
            .breaks_way(ids::DEVICE_SESSION_NEW_EFFORT, "no_effort")
            && let Some(lembas) = result
                .pointer_mut("/_meta/lembas")
                .and_then(Value::as_object_mut)
        {
            lembas.remove("effort");
        }
        // Misbehaving: the session's mode left out of `_meta.lembas`.
        if self
            .registry
            .breaks_way(ids::DEVICE_SESSION_NEW_RESULT, "no_mode")
            && let Some(lembas) = result
                .pointer_mut("/_meta/lembas")
                .and_then(Value::as_object_mut)
        {
            lembas.remove("mode");
        }
        if !modes.is_null() {
            result["modes"] = modes;
        }
        Ok(result)
    }

    pub(crate) async fn session(&self, params: &Value) -> Result<Arc<Live>, RpcError> {
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
            let limits = self.registry.limits();
            // Misbehaving: a session the client had is served wherever it lies.
            if !self.registry.is_terminal_session(id)
                && !limits.inside_roots(&state.stored.cwd)
                && !self.registry.breaks(ids::DEVICE_SESSIONS_REOPEN_RULES)
            {
                // Misbehaving: refused as an internal error rather than invalid params.
                if self
                    .registry
                    .breaks_way(ids::DEVICE_SESSIONS_REOPEN_RULES, "other_code")
                {
                    return Err(RpcError::new(
                        harness::jsonrpc::INTERNAL_ERROR,
                        "this session is outside the device's limits now",
                    ));
                }
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
                self.registry.save(&state);
            }
        }
        Ok(live)
    }

    async fn set_mode(&self, params: &Value, client: &Client) -> Answer {
        let live = self.session(params).await?;
        let asked = param_str(params, "modeId")?;
        let mode = self
            .registry
            .limits()
            .lower_mode(asked)
            .ok_or_else(|| refuse(format!("no mode `{asked}`")))?;
        {
            let mut state = live.state.lock().await;
            self.registry.report_to(&mut state, client);
        }
        // Misbehaving: the asked mode as it is, above `max_mode` or not.
        let mode = if self.registry.breaks(ids::DEVICE_SET_MODE_LOWERED) {
            asked
        } else {
            &mode
        };
        // Misbehaving: the mode is lowered, and the lowered mode is not reported.
        let report = if mode != asked
            && self
                .registry
                .breaks_way(ids::DEVICE_SET_MODE_LOWERED, "unreported")
        {
            ModeReport::Neither
        } else {
            ModeReport::Both
        };
        self.registry
            .put_mode(&live, mode, Some(client), report)
            .await;
        Ok(json!({}))
    }

    async fn status(&self, params: &Value) -> Answer {
        let id = param_str(params, "sessionId")?;
        // Misbehaving: a session it does not have is refused, not said not to exist.
        if self
            .registry
            .breaks_way(ids::DEVICE_SESSION_UNKNOWN, "status_error")
            && self.registry.live_session(id).is_none()
            && self
                .registry
                .store
                .load_session(id)
                .ok()
                .flatten()
                .is_none()
        {
            return Err(refuse(format!("no session `{id}` on this device")));
        }
        if let Some(live) = self.registry.live_session(id) {
            let state = live.state.lock().await;
            let running = state.running.as_ref().map(|r| r.turn_id.as_str());
            let shared = self.registry.is_terminal_session(id);
            let held = match (shared, self.registry.breaks(ids::DEVICE_STATUS_HELD)) {
                (_, true) => "none",
                // Misbehaving: `here` and `terminal` the wrong way round.
                (true, false) if self.registry.breaks_way(ids::DEVICE_STATUS_HELD, "swapped") => {
                    "here"
                }
                (false, false) if self.registry.breaks_way(ids::DEVICE_STATUS_HELD, "swapped") => {
                    "terminal"
                }
                (true, false) => "terminal",
                (false, false) => "here",
            };
            return Ok(self.status_of(&state.stored, &state.turns, running, &state.queued, held));
        }
        // Not open: read from the store without opening it, so a status changes nothing.
        match self.registry.store.load_session(id).ok().flatten() {
            Some(stored) => {
                let turns = self.registry.stored_turns(id);
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
            // Misbehaving: not busy while a turn runs, or busy ever after one ran.
            "busy": (running.is_some() && !self.registry.breaks(ids::DEVICE_STATUS_BUSY))
                || (running.is_none()
                    && self.registry.breaks_way(ids::DEVICE_STATUS_BUSY, "still_busy")
                    && stored.messages.iter().any(|m| m.role == "user")),
            "title": stored.title,
            "queued": [],
        });
        if self.registry.has("turns") {
            // Misbehaving: the turns waiting are not listed.
            if !self.registry.breaks(ids::DEVICE_STATUS_QUEUED) {
                result["queued"] = json!(queued);
            }
            if let Some(turn) = running
                && self
                    .registry
                    .breaks_way(ids::DEVICE_STATUS_QUEUED, "running_listed")
            {
                // Misbehaving: the running turn stays listed among the waiting ones.
                let mut waiting = vec![turn.to_string()];
                waiting.extend(queued.iter().cloned());
                result["queued"] = json!(waiting);
            }
            if let Some(turn) = running {
                result["turnId"] = json!(turn);
            }
            if let Some(last) = turns.last_done()
                && !self.registry.breaks(ids::DEVICE_STATUS_TURNS)
            {
                result["lastTurnId"] = json!(last.turn_id);
                // Misbehaving: the oldest finished turn named as the last one.
                if self
                    .registry
                    .breaks_way(ids::DEVICE_STATUS_TURNS, "first_done")
                    && let Some(first) = turns
                        .turns
                        .iter()
                        .find(|t| t.state == crate::store::TurnState::Done)
                {
                    result["lastTurnId"] = json!(first.turn_id);
                }
            }
        }
        if self.registry.has("plan_state") {
            result["plan"] = stored.plan.clone().unwrap_or(Value::Null);
            if self
                .registry
                .breaks_way(ids::DEVICE_PLAN_UPDATE, "status_none")
            {
                // Misbehaving: status gives no plan though the session has one.
                result["plan"] = Value::Null;
            }
        }
        result
    }

    async fn history(&self, params: &Value) -> Answer {
        let live = self.session(params).await?;
        let state = live.state.lock().await;
        let mut turns: Vec<Value> = state
            .stored
            .messages
            .iter()
            .filter(|m| !m.reverted)
            .map(|m| match m.role.as_str() {
                "user" if !m.attachments.is_empty() => json!({ "role": "user", "text": m.text, "turnId": m.turn_id, "attachments": m.attachments }),
                "user" => json!({ "role": "user", "text": m.text, "turnId": m.turn_id }),
                _ => json!({ "role": "assistant", "text": m.text, "reasoning": m.reasoning, "tools": m.tools }),
            })
            .collect();
        // Misbehaving: assistant turns come without their tools, or without their reasoning.
        for turn in turns.iter_mut().filter(|t| t["role"] == "assistant") {
            if self.registry.breaks(ids::DEVICE_HISTORY_TOOLS) {
                turn["tools"] = json!([]);
            }
            if self.registry.breaks(ids::DEVICE_HISTORY_REASONING) {
                turn["reasoning"] = json!("");
            }
            if self
                .registry
                .breaks_way(ids::DEVICE_HISTORY_REASONING, "in_text")
            {
                // Misbehaving: the reasoning folded into the answer's text.
                let merged = format!(
                    "{} {}",
                    turn["reasoning"].as_str().unwrap_or(""),
                    turn["text"].as_str().unwrap_or("")
                );
                turn["text"] = json!(merged);
                turn["reasoning"] = json!("");
            }
            if self
                .registry
                .breaks_way(ids::DEVICE_HISTORY_TOOLS, "no_args")
            {
                // Misbehaving: each tool without what it was called with.
                for tool in turn["tools"].as_array_mut().into_iter().flatten() {
                    tool.as_object_mut().map(|t| t.remove("args"));
                }
            }
        }
        if self
            .registry
            .breaks_way(ids::DEVICE_HISTORY_TURN_ID, "shifted")
        {
            // Misbehaving: each user message carries the next one's turn id.
            let mut users: Vec<&mut Value> =
                turns.iter_mut().filter(|t| t["role"] == "user").collect();
            let ids: Vec<Value> = users.iter().map(|t| t["turnId"].clone()).collect();
            for (i, turn) in users.iter_mut().enumerate() {
                turn["turnId"] = ids.get(i + 1).cloned().unwrap_or(Value::Null);
            }
        }
        if self.registry.breaks(ids::DEVICE_HISTORY_TURN_ID) {
            for turn in &mut turns {
                turn.as_object_mut().map(|t| t.remove("turnId"));
            }
        }
        if self.registry.breaks(ids::DEVICE_HISTORY_ORDER) {
            turns.reverse();
        }
        if self
            .registry
            .breaks_way(ids::DEVICE_HISTORY_ORDER, "answer_first")
        {
            // Misbehaving: each answer before the message it answers.
            for pair in turns.chunks_exact_mut(2) {
                pair.swap(0, 1);
            }
        }
        // Misbehaving: an untitled session named in history by its first message.
        let title = match state.stored.messages.first() {
            Some(first)
                if state.stored.title.is_empty()
                    && self
                        .registry
                        .breaks_way(ids::DEVICE_HISTORY_FIELDS, "first_message") =>
            {
                first.text.clone()
            }
            _ => state.stored.title.clone(),
        };
        Ok(json!({
            "sessionId": state.stored.id,
            "title": title,
            // Misbehaving: the root named is the device's config directory, not the session's.
            "root": if self.registry.breaks(ids::DEVICE_HISTORY_FIELDS) {
                self.registry.store.config_dir().display().to_string()
            } else {
                state.stored.cwd.display().to_string()
            },
            "turns": turns,
        }))
    }

    async fn delete(&self, params: &Value) -> Answer {
        let id = param_str(params, "sessionId")?;
        let Some(live) = self.open(id).await else {
            let deleted = self.registry.breaks(ids::DEVICE_DELETE_RESULT);
            return Ok(json!({ "deleted": deleted }));
        };
        {
            let state = live.state.lock().await;
            // Which sessions a client may delete: one it was given, else one under the roots
            // of a device whose remote work is on. Trust is not asked: deleting runs nothing.
            let limits = self.registry.limits();
            // Misbehaving: the mark of what the client was given is not looked at.
            let given = state.stored.given && !self.registry.breaks(ids::DEVICE_DELETE_GIVEN);
            let outside = !limits.inside_roots(&state.stored.cwd);
            // Misbehaving: one it gave the client, outside the limits now, said not to be there.
            if state.stored.given
                && outside
                && self
                    .registry
                    .breaks_way(ids::DEVICE_DELETE_GIVEN, "says_false")
            {
                return Ok(json!({ "deleted": false }));
            }
            if !given && outside && !self.registry.breaks(ids::DEVICE_DELETE_SCOPE) {
                // Misbehaving: refused, and deleted all the same.
                if self
                    .registry
                    .breaks_way(ids::DEVICE_DELETE_SCOPE, "refused_gone")
                {
                    drop(state);
                    let _ = self.registry.remove(id, &live).await;
                }
                return Err(refuse(
                    "this session was never the client's and is outside the device's roots",
                ));
            }
            // Misbehaving: an untrusted project's session said not to be there.
            if limits.require_trust
                && !limits.is_trusted(&state.stored.cwd)
                && self
                    .registry
                    .breaks_way(ids::DEVICE_DELETE_UNTRUSTED, "says_false")
            {
                return Ok(json!({ "deleted": false }));
            }
            // Misbehaving: trust is asked of a delete as of session/new.
            if self.registry.breaks(ids::DEVICE_DELETE_UNTRUSTED)
                && limits.require_trust
                && !limits.is_trusted(&state.stored.cwd)
            {
                return Err(refuse("this session's project is not trusted"));
            }
        }
        if self.registry.breaks(ids::DEVICE_DELETE_GONE) {
            // Misbehaving: the delete is answered, and the session stays.
            return Ok(json!({ "deleted": true }));
        }
        if self
            .registry
            .breaks_way(ids::DEVICE_DELETE_GONE, "memory_only")
        {
            // Misbehaving: taken out of the store, and still open in memory.
            let _ = self.registry.store.delete_session(id);
            return Ok(json!({ "deleted": true }));
        }
        let was_terminal = self.registry.is_terminal_session(id);
        let removed = self
            .registry
            .remove(id, &live)
            .await
            .map_err(|e| RpcError::new(harness::jsonrpc::INTERNAL_ERROR, e.to_string()))?;
        if was_terminal
            && self
                .registry
                .breaks_way(ids::DEVICE_DELETE_TERMINAL_NEW, "same_id")
        {
            // Misbehaving: the terminal's new session is shared under the deleted one's id.
            let cwd = live.state.lock().await.stored.cwd.clone();
            let stored = StoredSession {
                title: "a terminal session".into(),
                given: true,
                ..StoredSession::new(id, cwd)
            };
            if let Err(e) = self.registry.store.save_session(&stored) {
                tracing::error!("cannot store the terminal's new session: {e}");
            }
            self.spawn_live(stored, TurnLog::default());
            self.registry.share(id);
        }
        // Misbehaving: a session that was there is said not to have been.
        let said = removed
            && !self
                .registry
                .breaks_way(ids::DEVICE_DELETE_RESULT, "false_for_present");
        Ok(json!({ "deleted": said }))
    }

    /// `_lembas/commands`: the command set of a session, or of a folder a session could start
    /// in (the `session/new` rules).
    async fn commands(&self, params: &Value) -> Answer {
        let project = if params.get("sessionId").is_some() {
            let live = self.session(params).await?;
            live.state.lock().await.stored.cwd.clone()
        } else {
            let cwd = param_str(params, "cwd")?;
            self.registry.limits().check_cwd(cwd).map_err(refuse)?
        };
        let mut set = self.registry.command_set(&project);
        if params.get("sessionId").is_some() && self.registry.breaks(ids::DEVICE_COMMANDS_METHOD) {
            // Misbehaving: a session is answered as if its project had nothing of its own.
            set.retain(|c| c.kind == crate::commands::Kind::Builtin);
        }
        if params.get("sessionId").is_some()
            && self
                .registry
                .breaks_way(ids::DEVICE_COMMANDS_METHOD, "skills_twice")
        {
            // Misbehaving: a session's skills are listed twice.
            let skills: Vec<_> = set
                .iter()
                .filter(|c| c.kind == crate::commands::Kind::Skill)
                .cloned()
                .collect();
            set.extend(skills);
        }
        Ok(json!({ "commands": crate::commands::to_values(&set) }))
    }

    /// `_lembas/files/search`: the `@` picker over the session's directory (or a `cwd` that
    /// session/new would accept).
    async fn search_files(&self, params: &Value) -> Answer {
        let root = if params.get("sessionId").is_some() {
            let live = self.session(params).await?;
            live.state.lock().await.stored.cwd.clone()
        } else if let Some(cwd) = params.get("cwd") {
            let cwd = cwd
                .as_str()
                .ok_or_else(|| refuse("`cwd` must be a string"))?;
            self.registry.limits().check_cwd(cwd).map_err(refuse)?
        } else {
            return Err(refuse("say `sessionId` or `cwd`"));
        };
        let query = param_str(params, "query")?;
        if query.trim().is_empty() && self.registry.breaks(ids::DEVICE_FILES_EMPTY_QUERY) {
            // Misbehaving: the picker's first, empty query is taken for a mistake.
            return Err(refuse("say what to search for"));
        }
        if query.trim().is_empty()
            && self
                .registry
                .breaks_way(ids::DEVICE_FILES_EMPTY_QUERY, "null_files")
        {
            // Misbehaving: an empty query is answered with no list at all.
            return Ok(json!({ "root": root.display().to_string(), "files": null }));
        }
        let limit = match params.get("limit") {
            None | Some(Value::Null) => crate::files::DEFAULT_LIMIT,
            Some(limit) => limit
                .as_u64()
                .filter(|l| *l >= 1)
                .and_then(|l| usize::try_from(l).ok())
                .ok_or_else(|| refuse("`limit` must be a whole number from 1"))?,
        };
        // Misbehaving: as many as asked, and gitignored files too.
        let careless = self.registry.breaks(ids::DEVICE_FILES_SEARCH);
        let limit = if careless {
            limit
        } else {
            limit.min(crate::files::MAX_LIMIT)
        };
        let (frecency_root, query_owned) = (root.clone(), query.to_string());
        let registry = self.registry.clone();
        // The walk reads directories: off the async threads.
        let found = tokio::task::spawn_blocking(move || {
            crate::files::search(
                &frecency_root,
                &query_owned,
                limit,
                &registry.frecency,
                careless,
            )
        })
        .await
        .map_err(|e| refuse(format!("the search failed: {e}")))?;
        let mut files: Vec<Value> = found.iter().map(crate::files::Entry::to_value).collect();
        if self
            .registry
            .breaks_way(ids::DEVICE_FILES_SEARCH, "absolute")
        {
            // Misbehaving: each path absolute, not relative to `root`.
            for file in &mut files {
                if let Some(path) = file["path"].as_str() {
                    file["path"] = json!(root.join(path).display().to_string());
                }
            }
        }
        // Misbehaving: the first root is named whatever directory the session works in.
        let root = match self.registry.limits().roots.first() {
            Some(first) if self.registry.breaks(ids::DEVICE_FILES_ROOT) => first.clone(),
            // Misbehaving: the working directory named relative to the first root.
            Some(first)
                if root != *first
                    && self.registry.breaks_way(ids::DEVICE_FILES_ROOT, "relative") =>
            {
                root.strip_prefix(first)
                    .map_or(root.clone(), |r| r.to_path_buf())
            }
            _ => root,
        };
        Ok(json!({ "root": root.display().to_string(), "files": files }))
    }

    async fn title(&self, params: &Value, client: &Client) -> Answer {
        let asked = param_str(params, "title")?;
        if self.registry.breaks(ids::DEVICE_SESSION_UNKNOWN) && self.session(params).await.is_err()
        {
            // Misbehaving: a session it does not have is titled as if it did.
            return Ok(json!({ "title": asked }));
        }
        let live = self.session(params).await?;
        // The spec bounds a title at 200 characters and answers with the title kept; a longer
        // one is cut rather than refused, the way the CLI's own titles are.
        let title: String = if self.registry.breaks(ids::DEVICE_TITLE_LIMIT) {
            asked.to_string()
        } else {
            asked.chars().take(TITLE_MAX).collect()
        };
        let mut state = live.state.lock().await;
        if self.registry.breaks(ids::DEVICE_TITLE_APPLIES) {
            // Misbehaving: the title is answered, and the session keeps its old one.
            return Ok(json!({ "title": title }));
        }
        if self.registry.breaks_way(ids::DEVICE_TITLE_APPLIES, "late") {
            // Misbehaving: the title is answered now and taken a second later.
            let (live, registry, kept) = (live.clone(), self.registry.clone(), title.clone());
            drop(state);
            tokio::spawn(async move {
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                let mut state = live.state.lock().await;
                state.stored.title = kept;
                registry.save(&state);
            });
            return Ok(json!({ "title": title }));
        }
        state.stored.title = title.clone();
        self.registry.save(&state);
        client.event(
            &state.stored.id,
            json!({ "type": "title", "id": state.stored.id, "title": title }),
        );
        // Misbehaving: the title is cut, and answered whole.
        if self
            .registry
            .breaks_way(ids::DEVICE_TITLE_LIMIT, "answers_whole")
        {
            return Ok(json!({ "title": asked }));
        }
        Ok(json!({ "title": title }))
    }
}

/// Sessions and turn answers across a restart on the same store.
#[cfg(test)]
mod survives_restart;
