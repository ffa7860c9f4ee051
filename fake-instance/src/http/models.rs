//! `GET /v1/models`: the instance's models, OpenAI-style, each with its `kind`.
//!
//! The id a model is served under follows the spec's paragraph on how a device names an
//! instance's models: an instance that speaks link protocol 2 serves `<provider>/<model>`, one
//! that does not serves the bare id. Whether this instance speaks 2 is what its discovery lists
//! now (by default: what the run's cell protocol implies).

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};

use super::events::{Events, HTTP_MODELS};

/// What `GET /v1/models` reads of the API's state.
pub trait ModelsSource: Clone + Send + Sync + 'static {
    /// The models served.
    fn models(&self) -> &[ModelEntry];
    /// When an entry carries its provider.
    fn provider_field(&self) -> ProviderField;
    /// Whether the instance speaks link protocol 2 now (its discovery lists 2).
    fn speaks_protocol_2(&self) -> bool;
    /// Misbehaving: the first model is served under its bare id even at protocol 2.
    fn serves_a_bare_id(&self) -> bool {
        false
    }
    /// Misbehaving: the first model is served as `<provider>:<model>` at protocol 2.
    fn serves_a_colon_id(&self) -> bool {
        false
    }
    /// Where the request is told.
    fn events(&self) -> &Events;
}

/// One model the instance serves.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ModelEntry {
    /// The model's own id (without its provider).
    pub id: String,
    /// The provider that backs it (`deepseek`); part of the served id at protocol 2.
    #[serde(default)]
    pub provider: Option<String>,
    /// `chat`, `embedding`, `stt`, `tts` or `image`; any other text is served as is (the CLI
    /// must ignore kinds it does not know); `None`: no `kind` key at all.
    #[serde(default)]
    pub kind: Option<String>,
}

impl ModelEntry {
    /// The id it is served under: `<provider>/<id>` by an instance that speaks protocol 2 (when
    /// it has a provider), else the bare id.
    pub fn served_id(&self, speaks_protocol_2: bool) -> String {
        match (&self.provider, speaks_protocol_2) {
            (Some(provider), true) => format!("{provider}/{}", self.id),
            _ => self.id.clone(),
        }
    }

    /// Whether a CLI may talk to it: `chat`, or no `kind` at all.
    pub fn is_chat(&self) -> bool {
        self.kind.as_deref().is_none_or(|k| k == "chat")
    }
}

/// When an entry carries its `provider` field.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ProviderField {
    /// Only while the instance speaks protocol 2: providers came with it, and a protocol 1
    /// instance serves bare ids the CLI names `<login>/<id>`.
    #[default]
    Protocol2,
    /// Always (a protocol 1 instance that sends it anyway).
    Always,
    /// Never (the CLI must then split the served id itself).
    Never,
}

/// The default models: one chat model and one embedding model, both from provider `fake`.
pub fn default_models() -> Vec<ModelEntry> {
    vec![
        ModelEntry {
            id: "echo".into(),
            provider: Some("fake".into()),
            kind: Some("chat".into()),
        },
        ModelEntry {
            id: "embed".into(),
            provider: Some("fake".into()),
            kind: Some("embedding".into()),
        },
    ]
}

/// One entry as served.
fn served(entry: &ModelEntry, speaks_protocol_2: bool, field: ProviderField) -> Value {
    let mut value = json!({
        "id": entry.served_id(speaks_protocol_2),
        "object": "model",
        "owned_by": entry.provider.as_deref().unwrap_or("lembas"),
    });
    if let Some(kind) = &entry.kind {
        value["kind"] = json!(kind);
    }
    let with_provider = match field {
        ProviderField::Protocol2 => speaks_protocol_2,
        ProviderField::Always => true,
        ProviderField::Never => false,
    };
    if let (true, Some(provider)) = (with_provider, &entry.provider) {
        value["provider"] = json!(provider);
    }
    value
}

/// `GET /v1/models`.
pub async fn list<S: ModelsSource>(State(state): State<S>) -> Response {
    let speaks_2 = state.speaks_protocol_2();
    let mut data: Vec<Value> = state
        .models()
        .iter()
        .map(|m| served(m, speaks_2, state.provider_field()))
        .collect();
    if let (true, Some(first), Some(entry)) = (
        state.serves_a_bare_id(),
        data.first_mut(),
        state.models().first(),
    ) {
        first["id"] = json!(entry.id);
    }
    if let (true, true, Some(first), Some(entry)) = (
        speaks_2,
        state.serves_a_colon_id(),
        data.first_mut(),
        state.models().first(),
    ) {
        // Misbehaving: provider and model joined by a colon, not a slash.
        let provider = entry.provider.as_deref().unwrap_or("lembas");
        first["id"] = json!(format!("{provider}:{}", entry.id));
    }
    state.events().emit(
        HTTP_MODELS,
        json!({ "at_ms": state.events().now_ms(), "protocol": if speaks_2 { 2 } else { 1 }, "status": 200 }),
    );
    axum::Json(json!({ "object": "list", "data": data })).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn served_ids_follow_the_protocol() {
        let with = &default_models()[0];
        assert_eq!(with.served_id(true), "fake/echo");
        assert_eq!(with.served_id(false), "echo");
        let without = ModelEntry {
            id: "a/b".into(),
            provider: None,
            kind: None,
        };
        assert_eq!(without.served_id(true), "a/b");
        assert!(without.is_chat());
    }

    #[test]
    fn the_provider_field_follows_its_setting() {
        let entry = &default_models()[1];
        assert_eq!(
            served(entry, false, ProviderField::Protocol2).get("provider"),
            None
        );
        assert_eq!(
            served(entry, true, ProviderField::Protocol2)["provider"],
            "fake"
        );
        assert_eq!(
            served(entry, false, ProviderField::Always)["provider"],
            "fake"
        );
        assert_eq!(
            served(entry, true, ProviderField::Never).get("provider"),
            None
        );
        assert_eq!(
            served(entry, true, ProviderField::Never)["kind"],
            "embedding"
        );
    }
}
