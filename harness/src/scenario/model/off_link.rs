//! The steps that happen off the link: an action of the double's own side (`act`), whose
//! vocabulary is the double's, and a signal from the test program (`wait_for_signal`).

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::captures::Captures;
use crate::duration::Dur;

/// Wait for a named signal from the control API.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WaitForSignalStep {
    /// The signal's name (`POST /v1/signals/{name}`).
    pub name: String,
    /// How long to wait (default: the step timeout). A signal raised earlier counts.
    #[serde(default)]
    pub within: Option<Dur>,
}

/// An action of the double's own side: exactly one action key, whose vocabulary is the double's
/// (fake-instance plays a person in LLeMbas's web UI, fake-device a person at the device; each
/// reads its actions into a type of its own), beside `capture` and `timeout`.
#[derive(Debug, Clone, PartialEq)]
pub struct ActStep {
    /// The action's name (`open_chat`, `share_session`).
    pub name: String,
    /// What the action says, as written (`${...}` is substituted across all of it when it runs).
    pub value: Value,
    /// Variables from the action's result: `name: path` (`sessionId`, `turnId`, …).
    pub capture: Captures,
    /// This step's deadline (for actions that wait, like `answer_card` for a card to show).
    pub timeout: Option<Dur>,
}

impl ActStep {
    /// The action as a one-key mapping, `{name: value}`: what a double's action type reads.
    pub fn action(&self) -> Value {
        let mut action = serde_json::Map::new();
        action.insert(self.name.clone(), self.value.clone());
        Value::Object(action)
    }
}

impl<'de> Deserialize<'de> for ActStep {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let mut fields = serde_json::Map::<String, Value>::deserialize(deserializer)?;
        let capture = match fields.remove("capture") {
            Some(value) => serde_json::from_value(value)
                .map_err(|e| D::Error::custom(format!("`capture`: {e}")))?,
            None => Captures::new(),
        };
        let timeout = match fields.remove("timeout") {
            Some(value) => Some(
                serde_json::from_value(value)
                    .map_err(|e| D::Error::custom(format!("`timeout`: {e}")))?,
            ),
            None => None,
        };
        let mut actions = fields.into_iter();
        match (actions.next(), actions.next()) {
            (Some((name, value)), None) => Ok(ActStep {
                name,
                value,
                capture,
                timeout,
            }),
            (None, _) => Err(D::Error::custom(
                "needs exactly one action (see the format reference's `act`), not none",
            )),
            (Some((first, _)), Some((second, _))) => Err(D::Error::custom(format!(
                "needs exactly one action, not `{first}` and `{second}`"
            ))),
        }
    }
}

impl JsonSchema for ActStep {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ActStep".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        // The actions are the doubles' own: `harness schema` puts their schemas in place.
        schemars::json_schema!({
            "type": "object",
            "description": "One action of the double's own side, with `capture` (variables from its result) and `timeout`.",
            "properties": {
                "capture": { "type": "object", "additionalProperties": { "type": "string" } },
                "timeout": { "type": "string" }
            },
            "minProperties": 1
        })
    }
}
