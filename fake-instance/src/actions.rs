//! What a person does in LLeMbas's web UI, for `act` steps: open a chat, write in it, rewind
//! it, stop its turn, change its model or mode, delete it. Each waits (up to the step's deadline) for a device that is
//! linked and initialized, and uses only what that device listed in its capabilities: an action
//! that would call what it did not list does not apply to that device (a scenario's run ends
//! not applicable; the simulated web UI's own steps go on without it).

use harness::lembas::methods;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use harness::engine::{ActError, Actor, Hub};
use harness::lembas::Discovery;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

pub use crate::attach::AttachFile;
use crate::chats::Chats;

/// What a person does in the web UI: an `act` step of a fake-instance scenario (or of a
/// device-side scenario's `peer.steps`, which fake-instance does). Each variant is one action
/// key; its result is what `capture` reads.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum WebAction {
    /// Open a chat on the device (`session/new`); result `{sessionId}`.
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
    /// Its folder (default: the device's first root, from its hello).
    #[serde(default)]
    pub cwd: Option<String>,
    /// Its mode (`plan`, `manual`, `edit`).
    #[serde(default)]
    pub mode: Option<String>,
    /// The chat's authored system prompt, sent as `Context` on session/new and every prompt
    /// when the device lists `context`.
    #[serde(default)]
    pub system_prompt: Option<String>,
    /// The account's personalization (`{personality, personality_custom, instructions}` or
    /// `null`), sent when the device lists `context`.
    #[serde(default)]
    pub personalization: Option<Value>,
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
}

impl Actor for InstanceActor {
    fn act<'a>(
        &'a self,
        action: Value,
        timeout: Duration,
    ) -> std::pin::Pin<Box<dyn Future<Output = Result<Value, ActError>> + Send + 'a>> {
        Box::pin(async move {
            let action: WebAction = serde_json::from_value(action)
                .map_err(|e| ActError::Unknown(format!("not an action of fake-instance: {e}")))?;
            match self.act_now(action, timeout).await {
                Err(ActError::NotApplicable(why)) if self.own_steps => {
                    tracing::info!("the web UI leaves an action out: {why}");
                    Ok(json!({ "skipped": why }))
                }
                done => done,
            }
        })
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
                let (peer, facts) = self.chats.ready_link(&self.hub, timeout).await?;
                // `Context` fields the device did not list are left out, as the web UI does; a
                // scenario that relies on them says so in its `needs`.
                Ok(self
                    .chats
                    .open(
                        &peer,
                        &facts,
                        open.cwd.as_deref(),
                        open.mode.as_deref(),
                        context_of(&open),
                    )
                    .await?)
            }
            WebAction::Send(send) => {
                let (peer, facts) = self.chats.ready_link(&self.hub, timeout).await?;
                let careless = self
                    .chats
                    .misbehaves(harness::rules::ids::INSTANCE_PROMPT_BLOCKS);
                if !send.attach.is_empty() && !careless {
                    unlisted(&facts, "attachments", "attached files")?;
                }
                Ok(self
                    .chats
                    .send(&peer, &facts, &send.chat, &send.text, &send.attach)
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
        if !careless {
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
