//! What a person does in LLeMbas's web UI, for `act` steps: open a chat, write in it, rewind
//! it, stop its turn, change its model or mode, delete it. Each waits (up to the step's deadline) for a device that is
//! linked and initialized, and uses only what that device listed in its capabilities: an action
//! that would call what it did not list does not apply to that device (a scenario's run ends
//! not applicable; the simulated web UI's own steps go on without it).

use harness::lembas::methods;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use harness::engine::{ActError, Hub, TypedActor};
use harness::lembas::Discovery;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

pub use crate::attach::AttachFile;
use crate::chats::Chats;
pub use crate::mention::MentionFile;

/// What a person does in the web UI: an `act` step of a fake-instance scenario (or of a
/// device-side scenario's `peer.steps`, which fake-instance does). Each variant is one action
/// key; its result is what `capture` reads.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
// One action is made a step: the size of the chat's Context fields costs nothing worth a box,
// and the variants stay plain for the code that builds them.
#[allow(clippy::large_enum_variant)]
pub enum WebAction {
    /// Open a chat on a device (`session/new`); result `{sessionId, device}`.
    OpenChat(OpenChat),
    /// Write in a chat: a prompt with a new turn id, or a steer while a turn runs; result
    /// `{turnId}` or `{steered: true}`.
    Send(SendMessage),
    /// Edit or regenerate from a turn (`_lembas/session/rewind`, then `text` as a new turn when
    /// given); result `{reverted, turnId?}`.
    Rewind(RewindChat),
    /// Stop the chat's running turn (`session/cancel`); result `{sessionId}`.
    Cancel(String),
    /// Change a chat's model and/or effort (`_lembas/configure`), between its prompts: while
    /// its turn runs the change waits for the turn's answer. Result: the device's answer, or
    /// `{deferred: true}`.
    Configure(ConfigureChat),
    /// Switch a chat's mode (`session/set_mode`) to one the device offered for it; result the
    /// device's answer.
    SetMode(SetMode),
    /// Delete a chat (`_lembas/session/delete`, kept and sent again until answered); result
    /// `{delivered}`.
    DeleteChat(String),
    /// The composer's `@` picker asks the device for files (`_lembas/files/search`); result the
    /// device's answer.
    SearchFiles(ComposerAsk),
    /// The composer lists the device's commands (`_lembas/commands`); result the device's answer.
    ListCommands(ComposerAsk),
    /// Serve discovery with this `protocols` list from now on (`[]`: no list at all), as an
    /// instance upgraded or rolled back between two dials; result `{protocols}`.
    ServeProtocols(Vec<u8>),
    /// Rename a chat (`_lembas/session/title`, the title cut to 200 characters); result the
    /// device's answer.
    Rename(RenameChat),
    /// Compact a chat between its prompts (`_lembas/session/compact`); result the device's
    /// answer.
    Compact(String),
    /// The new chat's folder picker (`_lembas/directories`): the device's places, or the
    /// entries of an absolute `path`; result the device's answer.
    PickFolder(PickFolder),
    /// Open a terminal (`_lembas/terminal/open`) sized within the spec's bounds; result the
    /// device's answer (`terminalId`, …).
    OpenTerminal(OpenTerminal),
    /// Type into a terminal (`_lembas/terminal/input`, base64); result `{terminalId}`.
    TerminalInput(TerminalInput),
    /// Resize a terminal (`_lembas/terminal/resize`, within bounds); result what was sent.
    ResizeTerminal(ResizeTerminal),
    /// Hang a terminal up (`_lembas/terminal/close`); result `{terminalId}`.
    CloseTerminal(String),
    /// The composer's `@` picker: search the chat's files, choose one, and send `text` with it
    /// as `@path` text (escaped as the picker writes it); result `{turnId, mention}`.
    Mention(MentionFile),
}

/// A chat's new title.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RenameChat {
    /// The chat (its session id).
    pub chat: String,
    /// What the person typed (the field keeps 200 characters).
    pub title: String,
}

/// Where the folder picker looks.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PickFolder {
    /// An absolute directory the device listed; none: the device's places.
    #[serde(default)]
    pub path: Option<String>,
}

/// A terminal to open.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OpenTerminal {
    /// Its directory (absolute; the device's first root when absent).
    #[serde(default)]
    pub cwd: Option<String>,
    /// The window's columns (brought within 20–500).
    #[serde(default)]
    pub cols: Option<u64>,
    /// The window's rows (brought within 5–300).
    #[serde(default)]
    pub rows: Option<u64>,
}

/// Keystrokes for a terminal.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TerminalInput {
    /// The terminal (its id from the open's answer).
    pub terminal: String,
    /// What the person typed (a newline is Enter).
    pub text: String,
}

/// A terminal's new window size.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResizeTerminal {
    /// The terminal (its id from the open's answer).
    pub terminal: String,
    /// The window's columns.
    pub cols: u64,
    /// The window's rows.
    pub rows: u64,
}

/// What the web composer asks the device about: a chat's session, or a directory with no
/// session yet.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ComposerAsk {
    /// The chat (its session id).
    #[serde(default)]
    pub chat: Option<String>,
    /// A directory, for a composer with no session yet.
    #[serde(default)]
    pub cwd: Option<String>,
    /// What the person typed after `@` (`search_files` only).
    #[serde(default)]
    pub query: Option<String>,
    /// How many results (`search_files` only; the device's default when absent).
    #[serde(default)]
    pub limit: Option<u64>,
}

/// A chat to open.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OpenChat {
    /// The device to open it on, by name: `device-3` is the one that linked with the third
    /// device token (a fleet's third device). Default: the newest linked.
    #[serde(default)]
    pub device: Option<String>,
    /// Its folder (default: the device's first root, from its hello).
    #[serde(default)]
    pub cwd: Option<String>,
    /// Its mode (`plan`, `manual`, `edit`).
    #[serde(default)]
    pub mode: Option<String>,
    /// Its model, by the id this instance serves it under (`/v1/models`), sent as
    /// `_meta.lembas_model`.
    #[serde(default)]
    pub model: Option<String>,
    /// The chat's authored system prompt, sent as `Context` on session/new and every prompt
    /// when the device lists `context`.
    #[serde(default)]
    pub system_prompt: Option<String>,
    /// The account's personalization (`{personality, personality_custom, instructions}` or
    /// `null`), sent when the device lists `context`.
    #[serde(default)]
    pub personalization: Option<Value>,
    /// Send the account's personalization as this instance's `/v1/me/personalization` gives
    /// it now (`null` when it is off or not available), as LLeMbas does; `personalization`,
    /// when given, wins.
    #[serde(default)]
    pub account_personalization: bool,
    /// The knowledge bases the chat may search (`{bases: [{id, name}]}`), sent when the device
    /// lists `library`.
    #[serde(default)]
    pub library: Option<Value>,
    /// Whether the model may write prototypes (`{offered, sources}`), sent when the device lists
    /// `prototypes`.
    #[serde(default)]
    pub prototypes: Option<Value>,
}

/// A message written in a chat.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SendMessage {
    /// The chat (its session id).
    pub chat: String,
    /// What the person wrote.
    pub text: String,
    /// Files the person attached (a message with files always goes as a prompt).
    #[serde(default)]
    pub attach: Vec<AttachFile>,
}

/// A change of a chat's model or effort.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ConfigureChat {
    /// The chat (its session id).
    pub chat: String,
    /// The model, by the id this instance serves it under (`/v1/models`).
    #[serde(default)]
    pub model: Option<String>,
    /// The effort: a level or `off`.
    #[serde(default)]
    pub effort: Option<String>,
}

/// A switch of a chat's mode.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SetMode {
    /// The chat (its session id).
    pub chat: String,
    /// The mode's id (`plan`, `manual`, `edit`: one of the chat's `availableModes`).
    pub mode: String,
}

/// An edit or a regeneration from a turn.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RewindChat {
    /// The chat (its session id).
    pub chat: String,
    /// The first turn to take back.
    pub turn: String,
    /// The message sent in its place (an edit; the same text: a regeneration).
    #[serde(default)]
    pub text: Option<String>,
}

/// The instance's own side.
pub struct InstanceActor {
    /// The chats.
    pub chats: Arc<Chats>,
    /// The links.
    pub hub: Arc<Hub>,
    /// What discovery serves (shared with the HTTP side).
    pub discovery: Arc<RwLock<Discovery>>,
    /// The web UI's own steps (`--say`, the self-test's `peer.steps`), not a scenario's: an
    /// action the device cannot take is skipped, as the web UI would, and the steps go on.
    pub own_steps: bool,
    /// The HTTP side: the account a chat's personalization is read from.
    pub http: crate::http::HttpState,
}

impl TypedActor for InstanceActor {
    type Action = WebAction;
    const WHO: &'static str = "fake-instance";

    async fn act_typed(&self, action: WebAction, timeout: Duration) -> Result<Value, ActError> {
        match self.act_now(action, timeout).await {
            Err(ActError::NotApplicable(why)) if self.own_steps => {
                tracing::info!("the web UI leaves an action out: {why}");
                Ok(json!({ "skipped": why }))
            }
            done => done,
        }
    }
}

impl InstanceActor {
    pub(crate) async fn act_now(
        &self,
        action: WebAction,
        timeout: Duration,
    ) -> Result<Value, ActError> {
        match action {
            WebAction::ServeProtocols(list) => {
                let protocols = (!list.is_empty()).then(|| list.clone());
                let mut discovery = self
                    .discovery
                    .write()
                    .map_err(|_| ActError::Failed("discovery is unavailable".into()))?;
                *discovery = Discovery::for_protocols(protocols);
                Ok(json!({ "protocols": list }))
            }
            WebAction::DeleteChat(chat) => {
                // A delete is kept even with no device linked: it goes when one links.
                let link = self.chats.ready_link(&self.hub, Duration::ZERO).await.ok();
                Ok(self.chats.delete(link, &chat).await?)
            }
            WebAction::OpenChat(open) => {
                let (peer, facts) = self
                    .chats
                    .ready_link_of(&self.hub, timeout, open.device.as_deref())
                    .await?;
                // `Context` fields the device did not list are left out, as the web UI does; a
                // scenario that relies on them says so in its `needs`.
                let mut context = context_of(&open);
                if open.account_personalization && !context.contains_key("personalization") {
                    context.insert("personalization".into(), self.account_personalization());
                }
                Ok(self
                    .chats
                    .open(
                        &peer,
                        &facts,
                        open.cwd.as_deref(),
                        open.mode.as_deref(),
                        open.model.as_deref(),
                        context,
                    )
                    .await?)
            }
            WebAction::Send(send) => {
                let chat = self.chats.current_chat(&send.chat);
                // A chat lives on its device: written to, it goes to that device's link.
                let device = self.chats.device_of_chat(&chat);
                let (peer, facts) = self
                    .chats
                    .ready_link_of(&self.hub, timeout, device.as_deref())
                    .await?;
                let careless = self
                    .chats
                    .misbehaves(harness::rules::ids::INSTANCE_PROMPT_BLOCKS);
                if !send.attach.is_empty() && !careless {
                    unlisted(&facts, "attachments", "attached files")?;
                }
                Ok(self
                    .chats
                    .send(&peer, &facts, &chat, &send.text, &send.attach)
                    .await?)
            }
            WebAction::Rewind(rewind) => {
                let (peer, facts) = self.chats.ready_link(&self.hub, timeout).await?;
                unlisted(&facts, "rewind", "a rewind")?;
                Ok(self
                    .chats
                    .rewind(
                        &peer,
                        &facts,
                        &rewind.chat,
                        &rewind.turn,
                        rewind.text.as_deref(),
                    )
                    .await?)
            }
            WebAction::Cancel(chat) => {
                let (peer, _) = self.chats.ready_link(&self.hub, timeout).await?;
                self.chats.cancel(&peer, &chat);
                Ok(json!({ "sessionId": chat }))
            }
            WebAction::Configure(change) => {
                let (peer, facts) = self.chats.ready_link(&self.hub, timeout).await?;
                unlisted(&facts, "configure", "a model or effort change")?;
                let change = crate::configure::Change {
                    chat: change.chat,
                    model: change.model,
                    effort: change.effort,
                };
                Ok(crate::configure::configure(&self.chats, &peer, change).await?)
            }
            WebAction::SetMode(switch) => {
                let (peer, _) = self.chats.ready_link(&self.hub, timeout).await?;
                Ok(crate::modes::set_mode(&self.chats, &peer, &switch.chat, &switch.mode).await?)
            }
            WebAction::SearchFiles(ask) => {
                let (peer, facts) = self.chats.ready_link(&self.hub, timeout).await?;
                let mut params = composer_params(&ask)?;
                params["query"] = json!(ask.query.clone().unwrap_or_default());
                if let Some(limit) = ask.limit {
                    params["limit"] = json!(limit);
                }
                self.composer(
                    &peer,
                    &facts,
                    "files",
                    methods::LEMBAS_FILES_SEARCH,
                    params,
                    timeout,
                )
                .await
            }
            WebAction::Rename(rename) => {
                let (peer, facts) = self.chats.ready_link(&self.hub, timeout).await?;
                unlisted(&facts, "title", "a rename")?;
                Ok(
                    crate::chat_menu::rename(&self.chats, &peer, &rename.chat, &rename.title)
                        .await?,
                )
            }
            WebAction::Compact(chat) => {
                let (peer, facts) = self.chats.ready_link(&self.hub, timeout).await?;
                unlisted(&facts, "compact", "a compaction")?;
                Ok(crate::chat_menu::compact(&self.chats, &peer, &chat).await?)
            }
            WebAction::PickFolder(pick) => {
                let (peer, facts) = self.chats.ready_link(&self.hub, timeout).await?;
                unlisted(&facts, "directories", "the folder picker")?;
                Ok(crate::chat_menu::pick_folder(&self.chats, &peer, pick.path.as_deref()).await?)
            }
            WebAction::OpenTerminal(open) => {
                let (peer, facts) = self.chats.ready_link(&self.hub, timeout).await?;
                unlisted(&facts, "terminal", "a terminal")?;
                Ok(crate::web_terminal::open(
                    &self.chats,
                    &peer,
                    open.cwd.as_deref(),
                    open.cols,
                    open.rows,
                )
                .await?)
            }
            WebAction::TerminalInput(typed) => {
                let (peer, facts) = self.chats.ready_link(&self.hub, timeout).await?;
                unlisted(&facts, "terminal", "a terminal")?;
                Ok(crate::web_terminal::input(
                    &self.chats,
                    &peer,
                    &typed.terminal,
                    &typed.text,
                ))
            }
            WebAction::ResizeTerminal(size) => {
                let (peer, facts) = self.chats.ready_link(&self.hub, timeout).await?;
                unlisted(&facts, "terminal", "a terminal")?;
                Ok(crate::web_terminal::resize(
                    &peer,
                    &size.terminal,
                    size.cols,
                    size.rows,
                ))
            }
            WebAction::CloseTerminal(terminal) => {
                let (peer, facts) = self.chats.ready_link(&self.hub, timeout).await?;
                unlisted(&facts, "terminal", "a terminal")?;
                Ok(crate::web_terminal::close(&peer, &terminal))
            }
            WebAction::Mention(mention) => {
                let (peer, facts) = self.chats.ready_link(&self.hub, timeout).await?;
                unlisted(&facts, "files", "the composer's `@` picker")?;
                Ok(crate::mention::mention(&self.chats, &peer, &facts, &mention).await?)
            }
            WebAction::ListCommands(ask) => {
                let (peer, facts) = self.chats.ready_link(&self.hub, timeout).await?;
                let params = composer_params(&ask)?;
                self.composer(
                    &peer,
                    &facts,
                    "commands",
                    methods::LEMBAS_COMMANDS,
                    params,
                    timeout,
                )
                .await
            }
        }
    }
}

impl InstanceActor {
    /// The account's personalization as a chat's `Context` carries it: its three fields while it
    /// is on and available, else `null` (the device's own apply). A misbehaving web UI sends
    /// instructions the account never had.
    fn account_personalization(&self) -> Value {
        let mut saved = self.http.personalization();
        if self.chats.misbehaves_way(
            harness::rules::ids::INSTANCE_CONTEXT_PERSONALIZATION_SOURCE,
            "stale",
        ) {
            // Misbehaving: the account's personalization as it was before its writes.
            let first = self.http.personalization_at_start();
            saved.personality = first.personality;
            saved.personality_custom = first.personality_custom;
            saved.instructions = first.instructions;
        }
        if self
            .chats
            .misbehaves(harness::rules::ids::INSTANCE_CONTEXT_PERSONALIZATION_SOURCE)
        {
            return json!({
                "personality": saved.personality,
                "personality_custom": saved.personality_custom,
                "instructions": format!("{} (remembered from another account)", saved.instructions),
            });
        }
        if !(saved.enabled && saved.available) {
            return Value::Null;
        }
        json!({
            "personality": saved.personality,
            "personality_custom": saved.personality_custom,
            "instructions": saved.instructions,
        })
    }
}

/// An action needing a capability the device did not list does not apply to it (unless the web
/// UI misbehaves on purpose: then it goes ahead, and the device's monitor catches it).
fn unlisted(facts: &crate::chats::LinkFacts, capability: &str, what: &str) -> Result<(), ActError> {
    if facts.capabilities.iter().any(|c| c == capability) {
        return Ok(());
    }
    Err(ActError::NotApplicable(format!(
        "{what} need `{capability}`, which the device did not list"
    )))
}

impl InstanceActor {
    /// Asks the device for the composer, only when it listed the capability (a misbehaving web
    /// UI asks regardless).
    async fn composer(
        &self,
        peer: &Arc<harness::jsonrpc::Peer>,
        facts: &crate::chats::LinkFacts,
        capability: &str,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, ActError> {
        let careless = self
            .chats
            .misbehaves(harness::rules::ids::INSTANCE_COMPOSER_CAPABILITIES);
        let elsewhere = self.chats.misbehaves_way(
            harness::rules::ids::INSTANCE_COMPOSER_CAPABILITIES,
            "other_session",
        );
        if !careless && !elsewhere {
            unlisted(
                facts,
                capability,
                &format!("the composer's `{method}` calls"),
            )?;
        }
        let mut params = params;
        if careless && let Some(fields) = params.as_object_mut() {
            // Misbehaving: the composer forgets which session it is about.
            fields.remove("sessionId");
        }
        if elsewhere && let Some(fields) = params.as_object_mut() {
            // Misbehaving: whatever the device listed, about a session it never gave.
            fields.remove("cwd");
            fields.insert("sessionId".into(), json!("ses_never_given"));
        }
        match peer.request(method, params, timeout).await {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(e)) => Ok(json!({ "error": e.to_value() })),
            Err(e) => Err(ActError::Failed(e.to_string())),
        }
    }
}

/// The params naming what the composer is about: a chat's session or a directory.
fn composer_params(ask: &ComposerAsk) -> Result<Value, ActError> {
    match (&ask.chat, &ask.cwd) {
        (Some(chat), _) => Ok(json!({ "sessionId": chat })),
        (None, Some(cwd)) => Ok(json!({ "cwd": cwd })),
        (None, None) => Err("say the composer's `chat` or `cwd`".into()),
    }
}

/// The `Context` fields a chat is opened with.
fn context_of(open: &OpenChat) -> serde_json::Map<String, Value> {
    let mut context = serde_json::Map::new();
    if let Some(prompt) = &open.system_prompt {
        context.insert("system_prompt".into(), json!(prompt));
    }
    for (field, value) in [
        ("personalization", &open.personalization),
        ("library", &open.library),
        ("prototypes", &open.prototypes),
    ] {
        if let Some(value) = value {
            context.insert(field.into(), value.clone());
        }
    }
    context
}
