//! Durations as people write them: `500ms`, `5s`, `1m 30s`.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A duration written as text (`250ms`, `5s`, `2m`), read with `humantime`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Dur(pub Duration);

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        humantime::parse_duration(text.trim())
            .map(Dur)
            .map_err(|e| {
                serde::de::Error::custom(format!(
                    "`{text}` is not a duration like 500ms or 5s ({e})"
                ))
            })
    }
}

impl Serialize for Dur {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&humantime::format_duration(self.0).to_string())
    }
}

impl JsonSchema for Dur {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Duration".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "pattern": "^\\s*[0-9]+(\\.[0-9]+)?\\s*(ns|us|ms|s|m|h)(\\s*[0-9]+\\s*(ns|us|ms|s|m|h))*\\s*$",
            "description": "A duration: 500ms, 5s, 2m, 1m 30s.",
            "examples": ["500ms", "5s"]
        })
    }
}

impl std::fmt::Display for Dur {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", humantime::format_duration(self.0))
    }
}
