//! `_lembas/files/search` and `_lembas/commands`: what the web composer asks the device (the
//! `@` picker's files, a mention sent with the message, the commands), each only when the device
//! listed it, and the composer's misbehaviours about which session it asks for.

use std::sync::Arc;
use std::time::Duration;

use harness::engine::ActError;
use harness::lembas::methods;
use serde_json::{Value, json};

use crate::actions::{Acted, ComposerAsk, InstanceActor, MentionFile, unlisted};

impl InstanceActor {
    /// The `@` picker asks the device for files.
    pub(crate) async fn search_files(&self, ask: ComposerAsk, timeout: Duration) -> Acted {
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

    /// The composer lists the device's commands.
    pub(crate) async fn list_commands(&self, ask: ComposerAsk, timeout: Duration) -> Acted {
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

    /// The `@` picker: a file searched, chosen, and sent as `@path` text.
    pub(crate) async fn mention(&self, mention: MentionFile, timeout: Duration) -> Acted {
        let (peer, facts) = self
            .ready_for(timeout, "files", "the composer's `@` picker")
            .await?;
        Ok(crate::mention::mention(&self.chats, &peer, &facts, &mention).await?)
    }

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
