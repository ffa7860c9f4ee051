//! What a person does in LLeMbas's web UI, for `act` steps: open a chat, write in it, rewind
//! it, stop its turn, delete it. Each waits (up to the step's deadline) for a device that is
//! linked and initialized, and uses only what that device listed in its capabilities.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use harness::engine::{Actor, Hub};
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
}

impl Actor for InstanceActor {
    fn act<'a>(
        &'a self,
        action: ActStep,
        timeout: Duration,
    ) -> std::pin::Pin<Box<dyn Future<Output = Result<Value, String>> + Send + 'a>> {
        Box::pin(async move {
            if let Some(list) = &action.serve_protocols {
                let protocols = (!list.is_empty()).then(|| list.clone());
                let mut discovery = self
                    .discovery
                    .write()
                    .map_err(|_| "discovery is unavailable")?;
                *discovery = Discovery::for_protocols(protocols);
                return Ok(json!({ "protocols": list }));
            }
            if let Some(chat) = &action.delete_chat {
                // A delete is kept even with no device linked: it goes when one links.
                let link = self.chats.ready_link(&self.hub, Duration::ZERO).await.ok();
                return self.chats.delete(link, chat).await;
            }
            let (peer, facts) = self.chats.ready_link(&self.hub, timeout).await?;
            if let Some(open) = &action.open_chat {
                return self
                    .chats
                    .open(
                        &peer,
                        &facts,
                        open.cwd.as_deref(),
                        open.mode.as_deref(),
                        context_of(open),
                    )
                    .await;
            }
            if let Some(send) = &action.send {
                return self
                    .chats
                    .send(&peer, &facts, &send.chat, &send.text, &send.attach)
                    .await;
            }
            if let Some(rewind) = &action.rewind {
                return self
                    .chats
                    .rewind(
                        &peer,
                        &facts,
                        &rewind.chat,
                        &rewind.turn,
                        rewind.text.as_deref(),
                    )
                    .await;
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
            Err(format!(
                "fake-instance has no action `{}`",
                action.actions().join(", ")
            ))
        })
    }
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
    ) -> Result<Value, String> {
        let listed = facts.capabilities.iter().any(|c| c == capability);
        let careless = self
            .chats
            .misbehaves(harness::rules::ids::INSTANCE_COMPOSER_CAPABILITIES);
        if !listed && !careless {
            return Ok(json!({ "skipped": format!("the device did not list `{capability}`") }));
        }
        let mut params = params;
        if careless && let Some(fields) = params.as_object_mut() {
            // Misbehaving: the composer forgets which session it is about.
            fields.remove("sessionId");
        }
        match peer.request(method, params, timeout).await {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(e)) => Ok(json!({ "error": e.to_value() })),
            Err(e) => Err(e.to_string()),
        }
    }
}

/// The params naming what the composer is about: a chat's session or a directory.
fn composer_params(ask: &harness::scenario::ComposerAsk) -> Result<Value, String> {
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
