//! A session's model: the one it starts on when the client names none, and the device's ref
//! for a model the client names (`session/new` and `_lembas/configure` both ask these).

use harness::rules::ids;

use super::Sessions;
use crate::model_ref;

impl Sessions {
    /// The device's ref for the model a session starts on when the client names none: the
    /// instance's first chat model for a device whose turns ask the instance, else the device's
    /// own. `None` only when the instance would not say which models it serves (the turn then
    /// asks again, and reports the failure).
    pub(crate) async fn default_model(&self) -> Option<String> {
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
    pub(crate) async fn own_ref(&self, reference: &str) -> String {
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
}
