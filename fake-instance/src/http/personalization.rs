//! `GET` and `PUT /v1/me/personalization`: the account's personality and instructions, which a
//! CLI logged in to one instance uses in place of its own.
//!
//! The spec's section on the HTTP API asks an instance to take a partial `PUT` (the CLI sends
//! only the field it changed, with `enabled: true`), to refuse with 403 and a `detail` naming the
//! reason, and with 422 a wrongly typed field. The run keeps what was saved, and a journal of
//! every write so a step can check what the CLI sent.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use harness::rules::ids;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::events::{Events, HTTP_PERSONALIZATION};
use super::reply::{detail, json_body};

/// What `/v1/me/personalization` reads of the API's state.
pub trait PersonalizationSource: Clone + Send + Sync + 'static {
    /// The saved personalization.
    fn store(&self) -> &Store;
    /// Where the request is told.
    fn events(&self) -> &Events;
    /// Whether this instance was told to break `rule` (`instance.personalization.*`).
    fn breaks(&self, _rule: &str) -> bool {
        false
    }
    /// Whether this instance was told to break `rule` in its way `name`.
    fn breaks_way(&self, _rule: &str, _name: &str) -> bool {
        false
    }
}

/// The 403 `detail` when personalization is not available.
pub const NOT_AVAILABLE: &str = "personalization is not available on this instance";
/// The 403 `detail` when the token is not a device's token.
pub const NOT_A_DEVICE: &str = "personalization can only be written with a device's token";

/// The personalization a run starts with, and who may write it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct PersonalizationConfig {
    /// Whether the account can use personalization at all; `false`: writes get 403.
    pub available: bool,
    /// Whether the caller's token counts as a device's token; `false`: writes get 403.
    pub device_token: bool,
    /// Whether the account's personalization is on.
    pub enabled: bool,
    /// The personality preset.
    pub personality: String,
    /// The account's own personality text.
    pub personality_custom: String,
    /// The account's instructions.
    pub instructions: String,
}

impl Default for PersonalizationConfig {
    fn default() -> Self {
        Self {
            available: true,
            device_token: true,
            enabled: true,
            personality: String::new(),
            personality_custom: String::new(),
            instructions: String::new(),
        }
    }
}

/// The personalization as served.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Personalization {
    /// Whether it is on.
    pub enabled: bool,
    /// Whether the account can use it.
    pub available: bool,
    /// The personality preset.
    pub personality: String,
    /// The account's own personality text.
    pub personality_custom: String,
    /// The account's instructions.
    pub instructions: String,
}

/// One `PUT`, as it came, with the status it was answered with.
#[derive(Debug, Clone, PartialEq)]
pub struct PersonalizationWrite {
    /// Milliseconds since the run's HTTP API started.
    pub at_ms: u64,
    /// The body; `None`: it was not JSON.
    pub body: Option<Value>,
    /// The answer's status code.
    pub status: u16,
}

/// A write the body asks for, once every field in it has the right type.
#[derive(Debug, Default, PartialEq)]
struct Change {
    enabled: Option<bool>,
    personality: Option<String>,
    personality_custom: Option<String>,
    instructions: Option<String>,
}

impl Change {
    /// Reads a body. Only the spec's fields are read: others (`available` included, which is
    /// the instance's to say) are ignored, as an instance that grows fields would.
    fn read(body: &Value) -> Result<Change, String> {
        let Some(fields) = body.as_object() else {
            return Err("the body must be a JSON object".into());
        };
        let enabled = match fields.get("enabled") {
            None => None,
            Some(Value::Bool(b)) => Some(*b),
            Some(_) => return Err("`enabled` must be a boolean".into()),
        };
        Ok(Change {
            enabled,
            personality: text(fields, "personality")?,
            personality_custom: text(fields, "personality_custom")?,
            instructions: text(fields, "instructions")?,
        })
    }

    /// Merges the fields present; the others keep what was saved.
    fn apply(self, to: &mut Personalization) {
        if let Some(enabled) = self.enabled {
            to.enabled = enabled;
        }
        if let Some(text) = self.personality {
            to.personality = text;
        }
        if let Some(text) = self.personality_custom {
            to.personality_custom = text;
        }
        if let Some(text) = self.instructions {
            to.instructions = text;
        }
    }
}

/// A text field of the body, if present; present but not a string (`null` included) is an error.
fn text(fields: &Map<String, Value>, key: &str) -> Result<Option<String>, String> {
    match fields.get(key) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(format!("`{key}` must be a string")),
    }
}

/// What a run keeps: the saved personalization and the journal of writes.
#[derive(Clone)]
pub struct Store {
    device_token: bool,
    inner: Arc<Mutex<Saved>>,
}

struct Saved {
    now: Personalization,
    /// As the run started, before any write.
    first: Personalization,
    writes: Vec<PersonalizationWrite>,
}

impl Store {
    pub(super) fn new(config: &PersonalizationConfig) -> Self {
        let first = Personalization {
            enabled: config.enabled,
            available: config.available,
            personality: config.personality.clone(),
            personality_custom: config.personality_custom.clone(),
            instructions: config.instructions.clone(),
        };
        Self {
            device_token: config.device_token,
            inner: Arc::new(Mutex::new(Saved {
                now: first.clone(),
                first,
                writes: Vec::new(),
            })),
        }
    }

    /// The lock; a panic elsewhere while holding it leaves plain data behind, still usable.
    fn lock(&self) -> MutexGuard<'_, Saved> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn current(&self) -> Personalization {
        self.lock().now.clone()
    }

    pub(super) fn first(&self) -> Personalization {
        self.lock().first.clone()
    }

    pub(super) fn writes(&self) -> Vec<PersonalizationWrite> {
        self.lock().writes.clone()
    }

    /// Answers one `PUT` body and journals it; the check and the merge happen under one lock so
    /// two writes cannot interleave.
    /// `refuses`: whether a write the account or token may not make is refused (the spec);
    /// `false` is the misbehaviour that saves it anyway.
    fn write(
        &self,
        at_ms: u64,
        body: Result<Value, String>,
        refuses: bool,
    ) -> (Response, PersonalizationWrite) {
        let mut saved = self.lock();
        let (journaled, response) = match body {
            Err(not_json) => (None, detail(StatusCode::BAD_REQUEST, not_json)),
            Ok(body) => {
                let response = if !self.device_token && refuses {
                    detail(StatusCode::FORBIDDEN, NOT_A_DEVICE)
                } else if !saved.now.available && refuses {
                    detail(StatusCode::FORBIDDEN, NOT_AVAILABLE)
                } else {
                    match Change::read(&body) {
                        Err(why) => detail(StatusCode::UNPROCESSABLE_ENTITY, why),
                        Ok(change) => {
                            change.apply(&mut saved.now);
                            axum::Json(saved.now.clone()).into_response()
                        }
                    }
                };
                (Some(body), response)
            }
        };
        let write = PersonalizationWrite {
            at_ms,
            body: journaled,
            status: response.status().as_u16(),
        };
        saved.writes.push(write.clone());
        (response, write)
    }
}

/// `GET /v1/me/personalization`: what is saved (also when not available, which it says).
pub async fn show<S: PersonalizationSource>(State(state): State<S>) -> Response {
    state.events().emit(
        HTTP_PERSONALIZATION,
        json!({ "at_ms": state.events().now_ms(), "verb": "GET", "status": 200 }),
    );
    axum::Json(state.store().current()).into_response()
}

/// `PUT /v1/me/personalization`: merges the fields the body has.
pub async fn update<S: PersonalizationSource>(State(state): State<S>, body: Bytes) -> Response {
    let at_ms = state.events().now_ms();
    let mut body = json_body(&body);
    if let Ok(Value::Object(fields)) = &mut body {
        if state.breaks(ids::INSTANCE_PERSONALIZATION_VALIDATION) {
            // Misbehaving: a field of the wrong type is dropped, not refused.
            fields.retain(|key, value| match key.as_str() {
                "enabled" => value.is_boolean(),
                "personality" | "personality_custom" | "instructions" => value.is_string(),
                _ => true,
            });
        }
        if state.breaks(ids::INSTANCE_PERSONALIZATION_PARTIAL_PUT) {
            // Misbehaving: a partial write blanks the fields it leaves out.
            for field in ["personality", "personality_custom", "instructions"] {
                fields
                    .entry(field)
                    .or_insert_with(|| Value::String(String::new()));
            }
        }
    }
    // Misbehaving: a write the account may not make is saved all the same.
    let refuses = !state.breaks(ids::INSTANCE_PERSONALIZATION_FORBIDDEN);
    let partial = matches!(&body, Ok(Value::Object(fields))
        if ["personality", "personality_custom", "instructions"]
            .iter()
            .any(|f| !fields.contains_key(*f)));
    let misread = body.as_ref().is_ok_and(|b| Change::read(b).is_err());
    let refused_early = if state.breaks_way(ids::INSTANCE_HTTP_DEVICE_TOKEN, "not_a_device") {
        // Misbehaving: the device's own token taken for some other kind of token.
        Some(detail(StatusCode::FORBIDDEN, NOT_A_DEVICE))
    } else if partial && state.breaks_way(ids::INSTANCE_PERSONALIZATION_PARTIAL_PUT, "refused") {
        // Misbehaving: a write of only some fields is refused.
        Some(detail(
            StatusCode::UNPROCESSABLE_ENTITY,
            "personality, personality_custom and instructions are all required",
        ))
    } else if misread && state.breaks_way(ids::INSTANCE_PERSONALIZATION_VALIDATION, "bad_request") {
        // Misbehaving: a field of the wrong type is refused as 400, not 422.
        Some(detail(
            StatusCode::BAD_REQUEST,
            "the body could not be read",
        ))
    } else {
        None
    };
    let (mut response, write) = match refused_early {
        Some(response) => {
            let write = PersonalizationWrite {
                at_ms,
                body: body.ok(),
                status: response.status().as_u16(),
            };
            (response, write)
        }
        None => state.store().write(at_ms, body, refuses),
    };
    if response.status() == StatusCode::FORBIDDEN
        && state.breaks_way(ids::INSTANCE_PERSONALIZATION_FORBIDDEN, "no_detail")
    {
        // Misbehaving: the refusal does not say why.
        response = StatusCode::FORBIDDEN.into_response();
    }
    state.events().emit(
        HTTP_PERSONALIZATION,
        json!({ "at_ms": write.at_ms, "verb": "PUT", "body": write.body, "status": write.status }),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_change_reads_only_its_fields_and_checks_their_types() {
        assert_eq!(
            Change::read(&json!({"instructions": "x", "enabled": true, "available": false})),
            Ok(Change {
                enabled: Some(true),
                instructions: Some("x".into()),
                ..Change::default()
            })
        );
        assert!(Change::read(&json!({"enabled": "yes"})).is_err());
        assert!(Change::read(&json!({"personality": null})).is_err());
        assert!(Change::read(&json!({"personality_custom": 3})).is_err());
        assert!(Change::read(&json!([])).is_err());
    }

    #[test]
    fn a_refused_write_changes_nothing() {
        let store = Store::new(&PersonalizationConfig {
            instructions: "keep".into(),
            ..PersonalizationConfig::default()
        });
        let (refused, _) = store.write(0, Ok(json!({"instructions": "new", "enabled": 1})), true);
        assert_eq!(refused.status(), StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(store.current().instructions, "keep");
        assert_eq!(store.writes().len(), 1);
    }
}
