//! What a person does in LLeMbas's web UI, for `act` steps: open a chat, write in it, rewind
//! it, stop its turn, change its model or mode, delete it. Each waits (up to the step's deadline)
//! for a device that is linked and initialized, and uses only what that device listed in its
//! capabilities: an action that would call what it did not list does not apply to that device (a
//! scenario's run ends not applicable; the simulated web UI's own steps go on without it). This
//! file holds the actions' words and their dispatch; each action is done in the room of the
//! method it calls ([`crate::methods`]).

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
#[allow(missing_docs)] // fields whose names say it all go undocumented
pub struct InstanceActor {
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
    /// Does `action` now. Each action is done in the room of the method it calls
    /// (`crate::methods`), as an `impl InstanceActor` of its own.
    pub(crate) async fn act_now(
        &self,
        action: WebAction,
        timeout: Duration,
    ) -> Result<Value, ActError> {
        match action {
            // Discovery.
            WebAction::ServeProtocols(list) => self.serve_protocols(list),
            // session/new and its folder picker.
            WebAction::OpenChat(open) => self.open_chat(open, timeout).await,
            WebAction::PickFolder(pick) => self.pick_folder(pick, timeout).await,
            // session/prompt, session/cancel, rewind.
            WebAction::Send(send) => self.send(send, timeout).await,
            WebAction::Cancel(chat) => self.cancel(chat, timeout).await,
            WebAction::Rewind(rewind) => self.rewind(rewind, timeout).await,
            // A chat's settings and menu.
            WebAction::Configure(change) => self.configure(change, timeout).await,
            WebAction::SetMode(switch) => self.set_mode(switch, timeout).await,
            WebAction::Rename(rename) => self.rename(rename, timeout).await,
            WebAction::Compact(chat) => self.compact(chat, timeout).await,
            WebAction::DeleteChat(chat) => self.delete_chat(chat).await,
            // The composer.
            WebAction::SearchFiles(ask) => self.search_files(ask, timeout).await,
            WebAction::ListCommands(ask) => self.list_commands(ask, timeout).await,
            WebAction::Mention(mention) => self.mention(mention, timeout).await,
            // Terminals.
            WebAction::OpenTerminal(open) => self.open_terminal(open, timeout).await,
            WebAction::TerminalInput(typed) => self.terminal_input(typed, timeout).await,
            WebAction::ResizeTerminal(size) => self.resize_terminal(size, timeout).await,
            WebAction::CloseTerminal(terminal) => self.close_terminal(terminal, timeout).await,
        }
    }
}

/// What an action gives: its result for `capture`, or why it failed or does not apply.
pub(crate) type Acted = Result<Value, ActError>;

/// An action needing a capability the device did not list does not apply to it (unless the web
/// UI misbehaves on purpose: then it goes ahead, and the device's monitor catches it).
pub(crate) fn unlisted(
    facts: &crate::chats::LinkFacts,
    capability: &str,
    what: &str,
) -> Result<(), ActError> {
    if facts.capabilities.iter().any(|c| c == capability) {
        return Ok(());
    }
    Err(ActError::NotApplicable(format!(
        "{what} need `{capability}`, which the device did not list"
    )))
}

impl InstanceActor {
    /// The ready link, for an action that needs `capability` (`what` names the action when the
    /// device did not list it).
    pub(crate) async fn ready_for(
        &self,
        timeout: Duration,
        capability: &str,
        what: &str,
    ) -> Result<(Arc<harness::jsonrpc::Peer>, crate::chats::LinkFacts), ActError> {
        let (peer, facts) = self.chats.ready_link(&self.hub, timeout).await?;
        unlisted(&facts, capability, what)?;
        Ok((peer, facts))
    }
}
