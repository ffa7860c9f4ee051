//! A session's model and effort: the model a session starts on when the client names none, and
//! `_lembas/configure`, which changes either between prompts.

use serde_json::{Value, json};

use harness::jsonrpc::RpcError;
use harness::rules::ids;

use super::Sessions;
use crate::answers::{Answer, refuse};
use crate::events::Client;
use crate::model_ref;

/// The effort a configure that names only the model falls back to, when misbehaving.
const RESET_EFFORT: &str = "medium";

impl Sessions {
    /// The device's ref for the model a session starts on when the client names none: the
    /// instance's first chat model for a device whose turns ask the instance, else the device's
    /// own. `None` only when the instance would not say which models it serves (the turn then
    /// asks again, and reports the failure).
    pub(super) async fn default_model(&self) -> Option<String> {
        let config = &self.registry.config;
        let Some(model) = &config.model else {
            return Some(model_ref::OWN_MODEL.to_string());
        };
        match model.first_chat_model().await {
            Ok(served) => Some(model_ref::of_served(&config.connection, &served)),
            Err(e) => {
                tracing::warn!("no default model for a new session: {e}");
                None
            }
        }
    }

    /// The ref a session named by `_meta.model` runs on: an instance model in any of the forms
    /// that name it becomes the device's ref for it (spec, the old forms still name the same
    /// model); the device's own refs stay as they are.
    pub(super) async fn own_ref(&self, reference: &str) -> String {
        let config = &self.registry.config;
        let (Some(model), Some(_)) = (
            &config.model,
            model_ref::served_id(&config.connection, reference),
        ) else {
            return reference.to_string();
        };
        // Misbehaving: only the ref's newest form is understood.
        if self.registry.breaks(ids::DEVICE_MODEL_OLD_FORMS) {
            return reference.to_string();
        }
        match model.chat_models().await {
            Ok(served)
                if self
                    .registry
                    .breaks_way(ids::DEVICE_MODEL_OLD_FORMS, "default")
                    && model_ref::canonical(&config.connection, reference, &served)
                        != reference =>
            {
                // Misbehaving: an old form is taken for an unknown model: the default runs.
                self.default_model()
                    .await
                    .unwrap_or_else(|| reference.to_string())
            }
            Ok(served) => model_ref::canonical(&config.connection, reference, &served),
            Err(e) => {
                tracing::warn!("cannot read the instance's models: {e}");
                reference.to_string()
            }
        }
    }

    /// `_lembas/configure`: sets the session's model (the instance's served name) and/or its
    /// effort between prompts, answers both as they now are, and tells a lembas client with a
    /// `model` event when something changed (capability `model`).
    pub(super) async fn configure(&self, params: &Value, client: &Client) -> Answer {
        let asked_model = optional_str(params, "model")?;
        let asked_effort = optional_str(params, "effort")?;
        let live = self.session(params).await?;
        // A session opened from an older store may have no model yet: it is on the default.
        let fallback = if asked_model.is_none() && live.state.lock().await.stored.model.is_none() {
            self.default_model().await
        } else {
            None
        };
        // Misbehaving: a configure of the effort alone puts the model back to the default.
        let reset = match asked_model.is_none()
            && asked_effort.is_some()
            && self
                .registry
                .breaks_way(ids::DEVICE_CONFIGURE_PARTIAL, "model_reset")
        {
            true => self.default_model().await,
            false => None,
        };
        let mut state = live.state.lock().await;
        // The spec has configure sent between prompts; a turn keeps the model it started on.
        if state.running.is_some() {
            return Err(refuse(
                "the session is working: configure it between prompts",
            ));
        }
        let connection = &self.registry.config.connection;
        let before = (state.stored.model.clone(), state.stored.effort.clone());
        let model = match asked_model {
            Some(name) => Some(model_ref::of_served(connection, name)),
            None => reset.or_else(|| state.stored.model.clone()).or(fallback),
        };
        let effort = match asked_effort {
            Some(effort) => effort.to_string(),
            None if asked_model.is_some()
                && self.registry.breaks(ids::DEVICE_CONFIGURE_PARTIAL) =>
            {
                RESET_EFFORT.to_string()
            }
            None => state.stored.effort.clone(),
        };
        // Misbehaving: the answer names the new model, but the session stays on its old one.
        if asked_model.is_none() || !self.registry.breaks(ids::DEVICE_CONFIGURE_APPLIES) {
            state.stored.model = model.clone();
        }
        state.stored.effort = effort.clone();
        self.registry.save(&state);
        let changed = (model.clone(), effort.clone()) != before;
        if changed
            && self.registry.has("model")
            && !self.registry.breaks(ids::DEVICE_CONFIGURE_MODEL_EVENT)
            && let Some(reference) = &model
        {
            let mut event = model_ref::event(connection, reference, &effort);
            if self
                .registry
                .breaks_way(ids::DEVICE_CONFIGURE_MODEL_EVENT, "old_model")
                && let Some(old) = &before.0
            {
                // Misbehaving: the event names the model the session had before.
                event = model_ref::event(connection, old, &effort);
            }
            if self.registry.breaks(ids::DEVICE_EVENT_MODEL_INSTANCE) {
                // Misbehaving: `instance` says the opposite of where the model is served.
                event["instance"] = json!(event["instance"] != json!(true));
            }
            if self
                .registry
                .breaks_way(ids::DEVICE_EVENT_MODEL_INSTANCE, "other_connection")
            {
                // Misbehaving: `instance` true through a connection that is not this instance.
                event["connection"] = json!("elsewhere");
                event["instance"] = json!(true);
            }
            client.event(&state.stored.id, event);
        }
        if self.registry.breaks(ids::DEVICE_CONFIGURE_RESULT) {
            return Ok(json!({}));
        }
        if self
            .registry
            .breaks_way(ids::DEVICE_CONFIGURE_RESULT, "no_effort")
        {
            return Ok(json!({ "model": model }));
        }
        if self
            .registry
            .breaks_way(ids::DEVICE_CONFIGURE_APPLIES, "old_answer")
            && asked_model.is_some()
        {
            // Misbehaving: the session moves, but the answer names the model it had before.
            return Ok(json!({ "model": before.0, "effort": effort }));
        }
        Ok(json!({ "model": model, "effort": effort }))
    }
}

/// An optional string param: absent or `null` is none; any other type is refused.
fn optional_str<'a>(params: &'a Value, key: &str) -> Result<Option<&'a str>, RpcError> {
    match params.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text)),
        Some(other) => Err(refuse(format!("`{key}` must be a string, not {other}"))),
    }
}
