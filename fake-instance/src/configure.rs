//! The web UI's model picker and effort switch: `_lembas/configure` for a chat's session, sent
//! only between its prompts (spec, `_lembas/configure`). A change made while the chat's turn
//! runs waits for the turn's answer, then goes.

use std::sync::Arc;
use std::time::Duration;

use harness::jsonrpc::Peer;
use harness::lembas::methods;
use harness::rules::ids;
use serde_json::{Value, json};

use crate::chats::Chats;

/// How long a change made mid-turn waits for the turn to end before the web UI drops it.
const TURN_WAIT: Duration = Duration::from_secs(600);

/// How often a waiting change looks whether the turn has ended.
const POLL: Duration = Duration::from_millis(20);

/// What the person changed: the model (the instance's served name) and/or the effort.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Change {
    /// The chat (its session id).
    pub chat: String,
    /// The model, as the instance serves it.
    pub model: Option<String>,
    /// The effort: a level or `off`.
    pub effort: Option<String>,
}

impl Change {
    /// Configure's params for this change (`misshapen`: effort `off` sent as `false`, on
    /// purpose).
    fn params(&self, misshapen: bool) -> Value {
        let mut params = json!({ "sessionId": self.chat });
        if let Some(model) = &self.model {
            params["model"] = json!(model);
        }
        match self.effort.as_deref() {
            Some("off") if misshapen => params["effort"] = json!(false),
            Some(effort) => params["effort"] = json!(effort),
            None => {}
        }
        params
    }
}

/// Configures the chat now when it is idle, and gives the device's answer; while its turn runs,
/// the change goes once the turn is answered (in a task of its own) and this gives
/// `{deferred: true}`. A misbehaving web UI sends it at once.
pub async fn configure(
    chats: &Arc<Chats>,
    peer: &Arc<Peer>,
    change: Change,
) -> Result<Value, String> {
    let chat = chats
        .chat(&change.chat)
        .ok_or_else(|| format!("no chat `{}`", change.chat))?;
    let mut params = change.params(chats.misbehaves(ids::INSTANCE_CONFIGURE_SHAPE));
    // Misbehaving: a configure that names no session.
    if chats.misbehaves_way(ids::INSTANCE_CONFIGURE_SHAPE, "no_session")
        && let Some(fields) = params.as_object_mut()
    {
        fields.remove("sessionId");
    }
    let running = !chat.in_flight.is_empty();
    if !running || chats.misbehaves(ids::INSTANCE_CONFIGURE_BETWEEN) {
        return send(peer, params, chats.patience()).await;
    }
    let (chats, peer) = (chats.clone(), peer.clone());
    if chats.misbehaves_way(ids::INSTANCE_CONFIGURE_BETWEEN, "timer") {
        // Misbehaving: held for a second, not until the prompt is answered.
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(1)).await;
            let _ = send(&peer, params, chats.patience()).await;
        });
        return Ok(json!({ "deferred": true }));
    }
    tokio::spawn(async move {
        if !turn_ended(&chats, &change.chat).await {
            tracing::info!(
                "the change to chat {} is dropped: its turn ran past {TURN_WAIT:?}",
                change.chat
            );
            return;
        }
        if let Err(why) = send(&peer, params, chats.patience()).await {
            tracing::info!(
                "the deferred configure of chat {} failed: {why}",
                change.chat
            );
        }
    });
    Ok(json!({ "deferred": true }))
}

/// Waits (up to [`TURN_WAIT`]) until the chat has no turn in flight; false when it never
/// ended, true also when the chat went away (nothing to wait for, and the device refuses).
async fn turn_ended(chats: &Chats, chat: &str) -> bool {
    let deadline = tokio::time::Instant::now() + TURN_WAIT;
    while tokio::time::Instant::now() < deadline {
        if chats.chat(chat).is_none_or(|c| c.in_flight.is_empty()) {
            return true;
        }
        tokio::time::sleep(POLL).await;
    }
    false
}

/// Sends the configure and gives the device's answer (a refusal as `{error}`).
async fn send(peer: &Arc<Peer>, params: Value, patience: Duration) -> Result<Value, String> {
    match peer
        .request(methods::LEMBAS_CONFIGURE, params, patience)
        .await
    {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(e)) => Ok(json!({ "error": e.to_value() })),
        Err(e) => Err(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_params_name_only_what_changed() {
        let effort = Change {
            chat: "ses_a".into(),
            effort: Some("off".into()),
            ..Change::default()
        };
        assert_eq!(
            effort.params(false),
            json!({ "sessionId": "ses_a", "effort": "off" })
        );
        assert_eq!(
            effort.params(true),
            json!({ "sessionId": "ses_a", "effort": false })
        );
        let model = Change {
            chat: "ses_a".into(),
            model: Some("fake/deep".into()),
            ..Change::default()
        };
        assert_eq!(
            model.params(true),
            json!({ "sessionId": "ses_a", "model": "fake/deep" })
        );
    }
}
