//! Durations as people write them: `500ms`, `5s`, `1m 30s`, or `${name}`, a variable of the
//! scenario being loaded.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A duration written as text (`250ms`, `5s`, `2m`), read with `humantime`.
///
/// In a scenario it may also be `${name}`, a variable of its `vars:`: a window that exists for
/// a real peer (a server's restart, a redial) is then one name that a slower peer's test, or
/// the self-test with a double that answers in milliseconds, sets otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Dur(pub Duration);

thread_local! {
    /// The variables `${name}` durations are read from, while a scenario loads on this thread.
    static VARIABLES: RefCell<Option<BTreeMap<String, serde_json::Value>>> =
        const { RefCell::new(None) };
}

/// Reads durations that name a variable from `variables` while `read` runs (on this thread).
pub(crate) fn with_variables<T>(
    variables: BTreeMap<String, serde_json::Value>,
    read: impl FnOnce() -> T,
) -> T {
    let before = VARIABLES.with(|v| v.replace(Some(variables)));
    let out = read();
    VARIABLES.with(|v| *v.borrow_mut() = before);
    out
}

/// `${name}` → `name`.
fn variable_name(text: &str) -> Option<&str> {
    text.strip_prefix("${")?.strip_suffix('}')
}

fn parse(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let Some(name) = variable_name(text) else {
        return humantime::parse_duration(text)
            .map_err(|e| format!("`{text}` is not a duration like 500ms or 5s ({e})"));
    };
    let value = VARIABLES.with(|v| match &*v.borrow() {
        None => Err(format!(
            "`{text}`: only a scenario's durations may name a variable"
        )),
        Some(vars) => vars
            .get(name)
            .cloned()
            .ok_or_else(|| format!("`{text}` names no variable of the scenario's `vars:`")),
    })?;
    match value.as_str().map(|t| humantime::parse_duration(t.trim())) {
        Some(Ok(duration)) => Ok(duration),
        _ => Err(format!(
            "`{text}` is {value}, not a duration like 500ms or 5s"
        )),
    }
}

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        parse(&text).map(Dur).map_err(serde::de::Error::custom)
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
            "pattern": "^\\s*([0-9]+(\\.[0-9]+)?\\s*(ns|us|ms|s|m|h)(\\s*[0-9]+\\s*(ns|us|ms|s|m|h))*|\\$\\{[A-Za-z_][A-Za-z0-9_]*\\})\\s*$",
            "description": "A duration: 500ms, 5s, 2m, 1m 30s; in a scenario also ${name}, a variable of its `vars:`.",
            "examples": ["500ms", "5s"]
        })
    }
}

impl std::fmt::Display for Dur {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", humantime::format_duration(self.0))
    }
}
