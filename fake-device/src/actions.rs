//! What happens on the device off the link: a person at its terminal shares a session, types in
//! it, answers its cards, lets it go, deletes a session; someone edits its `remote:` block. A
//! scenario's `act` steps do these (and the self-test's timers, for scenarios run against it).

use harness::lembas::methods;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use harness::engine::{ActError, Hub, TypedActor};
use harness::rules::ids;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::agent::AgentModel;
use crate::dial::DeviceDialer;
use crate::sessions::Sessions;
pub use crate::terminal_card::CardAnswer;

/// What happens on the device off the link: an `act` step of a fake-device scenario (or of an
/// instance-side scenario's `peer.steps`, which fake-device does). Each variant is one action
/// key; its result is what `capture` reads.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum DeviceAction {
    /// A person starts a session at the terminal and shares it (`true`); result `{sessionId}`.
    ShareSession(bool),
    /// The person types this into the shared session (a turn with a device-made id); result
    /// `{sessionId, turnId}`.
    TerminalPrompt(String),
    /// The person answers the oldest card waiting in the shared session at the terminal:
    /// `allow` (allow once, the first option, approve) or `deny` (deny, dismiss); result
    /// `{toolCallId}`.
    AnswerCard(CardAnswer),
    /// The terminal lets the shared session go (`true`); result `{sessionId}`.
    LeaveSession(bool),
    /// The session is deleted on the device, as its terminal would; result `{sessionId, told}`
    /// (`told` false when no link was up: the delete is kept for the next one).
    DeleteSession(String),
    /// The `remote:` block is edited; the device relinks once no session works; result
    /// `{roots, remote}`.
    ChangeLimits(LimitsChange),
    /// A person changes one personalization field at the device (`/settings`), which it writes
    /// back to the instance; result `{status, body}` of the write.
    SetPersonalization(PersonalizationChange),
    /// A person opens `/usage` (`true`); result `{status_bar, page}`, or `{absent: true}` for an
    /// instance without usage.
    ShowUsage(bool),
    /// The device calls the instance's HTTP API (`/v1/...`, `/api/v1/instance`, `/mcp`) with its
    /// token, or without it; result `{status, body}`. A successful answer is also checked
    /// against the catalogue's shapes for that route.
    Http(HttpCall),
    /// The device's model calls one of the instance's library tools (`/mcp` `tools/call`,
    /// through the MCP SDK, with the device token), within `scope` when given; result `{text}`,
    /// or `{error}` with the refusal or the tool's error.
    Library(LibraryCall),
}

/// One library call, as the device's model makes it.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LibraryCall {
    /// The tool (`library_search`, `library_bases`).
    pub tool: String,
    /// Its arguments.
    #[serde(default)]
    pub arguments: Value,
    /// The session the call is made for (`_meta.lembas.scope`); none: the account's default
    /// data group.
    #[serde(default)]
    pub scope: Option<String>,
}

/// One call of the instance's HTTP API.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HttpCall {
    /// `GET` (the default), `PUT`, `POST`, ….
    #[serde(default = "get_verb")]
    pub method: String,
    /// The path, from the instance's base URL (`/v1/usage`).
    pub path: String,
    /// A JSON body to send.
    #[serde(default)]
    pub body: Option<Value>,
    /// Send the device token (the default); `false` to see the instance refuse a call without.
    #[serde(default = "yes")]
    pub token: bool,
}

fn get_verb() -> String {
    "GET".into()
}

fn yes() -> bool {
    true
}

/// An edit of the device's `remote:` block.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LimitsChange {
    /// Add a new (trusted) root directory, made for the run.
    #[serde(default)]
    pub add_root: bool,
    /// Turn remote work on or off.
    #[serde(default)]
    pub remote: Option<bool>,
}

/// One personalization field changed at the device.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PersonalizationChange {
    /// `personality`, `personality_custom` or `instructions`.
    pub field: String,
    /// Its new text.
    pub value: String,
}

/// The device's own side.
#[allow(missing_docs)] // fields whose names say it all go undocumented
pub struct DeviceActor {
    pub sessions: Arc<Sessions>,
    /// The agent (which links are LLeMbas clients).
    pub model: Arc<AgentModel>,
    /// Its links.
    pub hub: Arc<Hub>,
    /// Its dialer (a limits change relinks).
    pub dialer: Arc<DeviceDialer>,
    /// Where roots added by a limits change are made.
    pub scratch: PathBuf,
}

impl DeviceActor {
    /// The current link's client, when it is LLeMbas (said `_meta.lembas` in initialize).
    pub(crate) fn lembas_link(&self) -> Option<Arc<harness::jsonrpc::Peer>> {
        self.hub
            .current()
            .filter(|p| !p.is_closed() && self.model.is_lembas(p))
    }

    /// A person at the terminal starts a session in the first root and shares it; it is
    /// announced now (and whenever a link comes up).
    pub async fn share_session(&self) -> Result<Value, String> {
        // Sharing is announcing: a device that does not list `sessions` keeps its terminal's
        // session to itself, and sends the client nothing of it.
        if !self.model.capabilities().contains(&"sessions") {
            return Err(
                "this device does not list `sessions`: a session at its terminal is not shared"
                    .into(),
            );
        }
        let id = self
            .sessions
            .share_terminal_session()
            .ok_or("the device has no root to start a session in")?;
        // Misbehaving: the share is announced only when a link next comes up.
        if let Some(peer) = self
            .lembas_link()
            .filter(|_| !self.model.breaks(ids::DEVICE_ANNOUNCE_ON_SHARE))
        {
            self.model.announce_now(&peer).await;
        }
        Ok(json!({ "sessionId": id }))
    }

    /// The person types `text` into the shared session.
    pub async fn terminal_prompt(&self, text: &str) -> Result<Value, String> {
        let (session, turn, _answer) = self.terminal_turn(text).await?;
        Ok(json!({ "sessionId": session, "turnId": turn }))
    }

    /// [`DeviceActor::terminal_prompt`], giving the session, the turn, and where the turn's
    /// answer comes when it ends.
    pub(crate) async fn terminal_turn(
        &self,
        text: &str,
    ) -> Result<(String, String, tokio::sync::oneshot::Receiver<Value>), String> {
        let peer = self
            .hub
            .current()
            .filter(|p| !p.is_closed())
            .ok_or("no link is up to report the terminal's turn to")?;
        let client = self.model.client(&peer);
        let session = self
            .sessions
            .registry()
            .terminal_session()
            .ok_or("no session is shared: share one first (`share_session`)")?;
        let (turn, answer) = self
            .sessions
            .terminal_turn(text, &client)
            .await
            .map_err(|_| "the shared session did not take the prompt")?;
        Ok((session, turn, answer))
    }

    /// The terminal lets the shared session go, and says so (`left`, available to the client).
    pub async fn leave_session(&self) -> Result<Value, String> {
        let id = self
            .sessions
            .registry()
            .leave_terminal_session()
            .ok_or("no session is shared")?;
        if self.model.breaks(ids::DEVICE_TURNS_SHARED_LOG)
            && let Some(live) = self.sessions.registry().live_session(&id)
        {
            // Misbehaving: the terminal's turn log does not pass to the service.
            let mut state = live.state.lock().await;
            state.turns = crate::store::TurnLog::default();
            self.sessions.registry().save(&state);
        }
        if self
            .sessions
            .registry()
            .breaks_way(ids::DEVICE_LEFT_AVAILABLE, "still_held")
            && let Ok(mut held) = self.sessions.registry().left_held.lock()
        {
            // Misbehaving: said available, and refused as still the terminal's.
            held.insert(id.clone());
        }
        if self
            .sessions
            .registry()
            .breaks_way(ids::DEVICE_TURNS_SHARED_LOG, "no_answers")
            && let Some(live) = self.sessions.registry().live_session(&id)
        {
            // Misbehaving: the terminal's turns pass to the service without their answers.
            let mut state = live.state.lock().await;
            for turn in &mut state.turns.turns {
                turn.answer = None;
            }
            self.sessions.registry().save(&state);
        }
        if self.model.breaks(ids::DEVICE_LEFT_AVAILABLE) {
            // Misbehaving: said available, and gone from the store all the same.
            self.sessions.delete_here(&id).await?;
        }
        if !self.sessions.registry().breaks(ids::DEVICE_LEFT_SHAPE)
            && let Some(peer) = self.lembas_link()
        {
            if self
                .sessions
                .registry()
                .breaks_way(ids::DEVICE_LEFT_SHAPE, "next_link")
            {
                // Misbehaving: `left` kept for the next link though this one is up.
                if let Ok(mut kept) = self.sessions.registry().lefts_kept.lock() {
                    kept.push(id.clone());
                }
                return Ok(json!({ "sessionId": id }));
            }
            peer.notify(
                methods::LEMBAS_SESSION_LEFT,
                json!({ "sessionId": id, "available": true }),
            );
        }
        Ok(json!({ "sessionId": id }))
    }

    /// Deletes a session on the device: `deleted` now to a linked LLeMbas client, else kept
    /// for the next link.
    pub async fn delete_session(&self, id: &str) -> Result<Value, String> {
        self.sessions.delete_here(id).await?;
        // Misbehaving: kept for the next link even while one is up.
        let told = match self
            .lembas_link()
            .filter(|_| !self.sessions.registry().breaks(ids::DEVICE_DELETED_LIVE))
        {
            // Misbehaving: the client hears `left`, not available, where `deleted` is due.
            Some(peer)
                if self.sessions.registry().has("delete")
                    && self
                        .sessions
                        .registry()
                        .breaks_way(ids::DEVICE_DELETED_LIVE, "as_left") =>
            {
                peer.notify(
                    methods::LEMBAS_SESSION_LEFT,
                    json!({ "sessionId": id, "available": false }),
                );
                true
            }
            Some(peer) if self.sessions.registry().has("delete") => {
                peer.notify(methods::LEMBAS_SESSION_DELETED, json!({ "sessionId": id }));
                true
            }
            _ => {
                self.sessions
                    .registry()
                    .store
                    .add_pending_delete(id)
                    .map_err(|e| format!("cannot keep the delete for the next link: {e}"))?;
                false
            }
        };
        Ok(json!({ "sessionId": id, "told": told }))
    }

    /// Edits the `remote:` block; the device closes its link once no session works and dials
    /// again at once, so the client hears the new limits.
    pub fn change_limits(&self, add_root: bool, remote: Option<bool>) -> Result<Value, String> {
        let said = {
            let mut limits = self
                .sessions
                .registry()
                .limits
                .write()
                .map_err(|_| "the limits are unavailable")?;
            if add_root {
                let n = limits.roots.len();
                let root = self.scratch.join(format!("added-root-{n}"));
                std::fs::create_dir_all(&root)
                    .map_err(|e| format!("cannot make {}: {e}", root.display()))?;
                limits.add_root(&root);
            }
            if let Some(remote) = remote {
                limits.remote = remote;
            }
            json!({ "roots": limits.said_roots(), "remote": limits.remote })
        };
        // Relinking on changed limits came with spec 1.1.0; a 1.0.0 device says its new limits
        // when its link next comes up.
        if self.sessions.registry().config.spec != harness::lembas::Spec::V1_0_0
            && !self.sessions.registry().breaks(ids::DEVICE_LIMITS_RELINK)
        {
            let (dialer, sessions) = (self.dialer.clone(), self.sessions.clone());
            tokio::spawn(async move { dialer.relink(&sessions).await });
        }
        Ok(said)
    }
}

impl DeviceActor {
    /// A person opens `/usage`: the instance's usage, rendered as the CLI shows it. An
    /// instance without usage (404) shows nothing, and nothing else changes.
    /// Calls the instance's HTTP API, and checks a successful answer's shape.
    pub async fn http(&self, call: &HttpCall) -> Result<Value, String> {
        let account = &self.sessions.registry().config.account;
        let answer = account
            .call(&call.method, &call.path, call.body.as_ref(), call.token)
            .await?;
        if (200..300).contains(&answer.status) {
            let shapes = harness::shapes::ShapeWatch::new(
                harness::rules::catalogue(),
                harness::rules::Binds::Instance,
                &harness::rules::Misbehaviours::default(),
                self.model.spec().as_str(),
            );
            let route = harness::shapes::route(&call.method, &call.path);
            for finding in shapes.check_response(&route, &answer.body) {
                self.hub.findings().push(finding);
            }
        }
        Ok(json!({ "status": answer.status, "body": answer.body }))
    }

    pub async fn show_usage(&self) -> Result<Value, String> {
        match self.sessions.registry().config.account.usage().await? {
            Some(view) => {
                tracing::info!(status_bar = ?view.status_bar, "usage: {}", view.page.join(" | "));
                Ok(json!({ "status_bar": view.status_bar, "page": view.page }))
            }
            None => {
                if self.sessions.registry().breaks(ids::DEVICE_USAGE_ABSENT)
                    && let Some(peer) = self.hub.current()
                {
                    // Misbehaving: an instance without usage is taken for a broken login.
                    peer.close(1011, "the instance has no usage");
                }
                if self
                    .sessions
                    .registry()
                    .breaks_way(ids::DEVICE_USAGE_ABSENT, "refuses_turns")
                {
                    // Misbehaving: taken for a broken login, and every later prompt refused.
                    self.sessions
                        .registry()
                        .usage_refused
                        .store(true, std::sync::atomic::Ordering::Relaxed);
                }
                Ok(json!({ "absent": true }))
            }
        }
    }
}

impl TypedActor for DeviceActor {
    type Action = DeviceAction;
    const WHO: &'static str = "fake-device";

    async fn act_typed(&self, action: DeviceAction, timeout: Duration) -> Result<Value, ActError> {
        self.act_now(action, timeout)
            .await
            .map_err(ActError::Failed)
    }
}

impl DeviceActor {
    pub(crate) async fn act_now(
        &self,
        action: DeviceAction,
        timeout: Duration,
    ) -> Result<Value, String> {
        match action {
            DeviceAction::ShareSession(true) => self.share_session().await,
            DeviceAction::TerminalPrompt(text) => self.terminal_prompt(&text).await,
            DeviceAction::AnswerCard(answer) => {
                let call = self
                    .sessions
                    .registry()
                    .answer_terminal_card(answer, timeout)
                    .await?;
                Ok(json!({ "toolCallId": call }))
            }
            DeviceAction::LeaveSession(true) => self.leave_session().await,
            DeviceAction::DeleteSession(id) => self.delete_session(&id).await,
            DeviceAction::ChangeLimits(change) => {
                self.change_limits(change.add_root, change.remote)
            }
            DeviceAction::SetPersonalization(change) => {
                let answer = self
                    .sessions
                    .registry()
                    .config
                    .account
                    .change(&change.field, &change.value)
                    .await?;
                Ok(json!({ "status": answer.status, "body": answer.body }))
            }
            DeviceAction::ShowUsage(true) => self.show_usage().await,
            DeviceAction::Http(call) => self.http(&call).await,
            DeviceAction::Library(call) => {
                let account = &self.sessions.registry().config.account;
                let library = crate::library::Library {
                    base: account.base.clone(),
                    token: account.token.clone(),
                };
                Ok(
                    match library
                        .call(&call.tool, &call.arguments, call.scope.as_deref())
                        .await
                    {
                        Ok(text) => json!({ "text": text }),
                        // An instance with no library at all (its `/mcp` is 404) is told from a
                        // call it refused: the scenario judges a library only where there is one.
                        Err(why) => match library.served().await {
                            false => json!({ "absent": true, "error": why }),
                            true => json!({ "error": why }),
                        },
                    },
                )
            }
            DeviceAction::ShareSession(false)
            | DeviceAction::LeaveSession(false)
            | DeviceAction::ShowUsage(false) => {
                Err("an action set to `false` does nothing: write `true`".into())
            }
        }
    }
}
