//! What a person does in LLeMbas's web UI, for `act` steps: open a chat, write in it, rewind
//! it, stop its turn, delete it. Each waits (up to the step's deadline) for a device that is
//! linked and initialized, and uses only what that device listed in its capabilities: an action
//! that would call what it did not list does not apply to that device (a scenario's run ends
//! not applicable; the simulated web UI's own steps go on without it).

use std::sync::{Arc, RwLock};
use std::time::Duration;

use harness::engine::{ActError, Actor, Hub};
use harness::lembas::Discovery;
use harness::scenario::ActStep;
use serde_json::{Value, json};

use crate::chats::Chats;

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
        action: ActStep,
        timeout: Duration,
    ) -> std::pin::Pin<Box<dyn Future<Output = Result<Value, ActError>> + Send + 'a>> {
        Box::pin(async move {
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
    async fn act_now(&self, action: ActStep, timeout: Duration) -> Result<Value, ActError> {
        {
            if let Some(list) = &action.serve_protocols {
                let protocols = (!list.is_empty()).then(|| list.clone());
                let mut discovery = self
                    .discovery
                    .write()
                    .map_err(|_| ActError::Failed("discovery is unavailable".into()))?;
                *discovery = Discovery::for_protocols(protocols);
                return Ok(json!({ "protocols": list }));
            }
            if let Some(chat) = &action.delete_chat {
                // A delete is kept even with no device linked: it goes when one links.
                let link = self.chats.ready_link(&self.hub, Duration::ZERO).await.ok();
                return Ok(self.chats.delete(link, chat).await?);
            }
            let (peer, facts) = self.chats.ready_link(&self.hub, timeout).await?;
            if let Some(open) = &action.open_chat {
                // `Context` fields the device did not list are left out, as the web UI does; a
                // scenario that relies on them says so in its `needs`.
                return Ok(self
                    .chats
                    .open(
                        &peer,
                        &facts,
                        open.cwd.as_deref(),
                        open.mode.as_deref(),
                        context_of(open),
                    )
                    .await?);
            }
            if let Some(send) = &action.send {
                let careless = self
                    .chats
                    .misbehaves(harness::rules::ids::INSTANCE_PROMPT_BLOCKS);
                if !send.attach.is_empty() && !careless {
                    unlisted(&facts, "attachments", "attached files")?;
                }
                return Ok(self
                    .chats
                    .send(&peer, &facts, &send.chat, &send.text, &send.attach)
                    .await?);
            }
            if let Some(rewind) = &action.rewind {
                unlisted(&facts, "rewind", "a rewind")?;
                return Ok(self
                    .chats
                    .rewind(
                        &peer,
                        &facts,
                        &rewind.chat,
                        &rewind.turn,
                        rewind.text.as_deref(),
                    )
                    .await?);
            }
            if let Some(chat) = &action.cancel {
                self.chats.cancel(&peer, chat);
                return Ok(json!({ "sessionId": chat }));
            }
            if let Some(ask) = &action.search_files {
                let mut params = composer_params(ask)?;
                params["query"] = json!(ask.query.clone().unwrap_or_default());
                if let Some(limit) = ask.limit {
                    params["limit"] = json!(limit);
                }
                return self
                    .composer(
                        &peer,
                        &facts,
                        "files",
                        "_lembas/files/search",
                        params,
                        timeout,
                    )
                    .await;
            }
            if let Some(ask) = &action.list_commands {
                let params = composer_params(ask)?;
                return self
                    .composer(
                        &peer,
                        &facts,
                        "commands",
                        "_lembas/commands",
                        params,
                        timeout,
                    )
                    .await;
            }
            Err(ActError::Failed(format!(
                "fake-instance has no action `{}`",
                action.actions().join(", ")
            )))
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
fn composer_params(ask: &harness::scenario::ComposerAsk) -> Result<Value, ActError> {
    match (&ask.chat, &ask.cwd) {
        (Some(chat), _) => Ok(json!({ "sessionId": chat })),
        (None, Some(cwd)) => Ok(json!({ "cwd": cwd })),
        (None, None) => Err("say the composer's `chat` or `cwd`".into()),
    }
}

/// The `Context` fields a chat is opened with.
fn context_of(open: &harness::scenario::OpenChat) -> serde_json::Map<String, Value> {
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
