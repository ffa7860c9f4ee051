//! The scenario's variables as the loader sees them: read ahead of the rest (a duration written
//! `${name}` takes their value), the self-test's own values for them, and which names a run
//! knows from its start.

use std::collections::BTreeMap;

use super::error::LoadError;
use super::who::Reader;
use super::yaml::{parse, top_key_at};
use crate::scenario::model::Scenario;

/// The scenario's variables for `reader`, read ahead of the rest; a file whose variables do
/// not read gets its error from the whole parse that follows, which says more.
pub(super) fn variables_of(
    text: &str,
    file: &str,
    reader: Reader,
) -> Result<BTreeMap<String, serde_json::Value>, LoadError> {
    #[derive(serde::Deserialize, Default)]
    struct Variables {
        #[serde(default)]
        vars: BTreeMap<String, serde_json::Value>,
        #[serde(default)]
        selftest: Option<crate::scenario::model::SelftestSettings>,
    }
    let Ok(Variables { mut vars, selftest }) = parse::<Variables>(text, file) else {
        return Ok(Default::default());
    };
    for (name, value) in selftest.map(|s| s.vars).unwrap_or_default() {
        if !vars.contains_key(&name) {
            // The line it is written on: the first mention of the name after `selftest:`.
            // Else (the name written with escapes, `selftest` quoted) the line of `selftest`.
            let line = text
                .find("selftest:")
                .and_then(|at| {
                    let found = at + text[at..].find(name.as_str())?;
                    u32::try_from(text[..found].matches('\n').count() + 1).ok()
                })
                .or_else(|| top_key_at(text, "selftest").map(|(line, _)| line));
            return Err(LoadError::found(
                file,
                (line, None),
                format!("selftest.vars.{name}"),
                format!(
                    "`{name}` is no variable of `vars:`; the self-test only gives those another value"
                ),
            ));
        }
        if reader == Reader::Selftest {
            vars.insert(name, value);
        }
    }
    Ok(vars)
}

/// The variables every run has from its start (fake-device adds `link_protocol` per dial).
const START_VARIABLES: [&str; 7] = [
    "protocol",
    "spec",
    "url",
    "token",
    "tmp",
    "link_url",
    "link_protocol",
];

/// The first `${name…}` in `value` that names no variable known at the start of a run.
pub(super) fn unknown_start_variable(
    value: &serde_json::Value,
    scenario: &Scenario,
) -> Option<String> {
    match value {
        serde_json::Value::String(text) => {
            let mut rest = text.as_str();
            while let Some(at) = rest.find("${") {
                let after = &rest[at + 2..];
                let name: String = after
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '-')
                    .collect();
                let escaped = at > 0 && rest[..at].ends_with('$');
                let made =
                    crate::pattern::generated(after.split('}').next().unwrap_or("")).is_some();
                if !escaped
                    && !made
                    && !START_VARIABLES.contains(&name.as_str())
                    && !scenario.vars.contains_key(&name)
                {
                    return Some(name);
                }
                rest = after;
            }
            None
        }
        serde_json::Value::Array(items) => items
            .iter()
            .find_map(|v| unknown_start_variable(v, scenario)),
        serde_json::Value::Object(map) => map
            .values()
            .find_map(|v| unknown_start_variable(v, scenario)),
        _ => None,
    }
}
