//! A hooks file: each action name mapped to a command, an HTTP request, or a line to the system
//! under test's standard input.

use std::collections::BTreeMap;
use std::path::Path;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::duration::Dur;
use crate::scenario::LoadError;

/// How long a hook may take, unless it says.
pub const DEFAULT_HOOK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// A hooks file: action name → what does it.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(transparent)]
pub struct Hooks {
    /// Each hook, by the action it does.
    pub hooks: BTreeMap<String, Hook>,
}

/// What does one action: exactly one of `run`, `http` or `stdin`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Hook {
    /// A command, run by `sh -c` with placeholders shell-quoted in; it must exit 0. Its stdout,
    /// when it is JSON, is the action's result (for `capture`).
    #[serde(default)]
    pub run: Option<String>,
    /// An HTTP request. A 2xx answer's JSON body is the action's result; a 4xx answer is the
    /// action refused by the project (a message to a chat deleted meanwhile), whose result is
    /// `{refused: STATUS, body}`; a 501 says the project does not implement the action as asked,
    /// which makes the run not applicable; anything else (5xx, no answer, a timeout) is a broken
    /// set-up.
    #[serde(default)]
    pub http: Option<HttpHook>,
    /// A text written to the system under test's standard input (`{action}` is the action as
    /// one JSON line, for a stand-in that reads them).
    #[serde(default)]
    pub stdin: Option<String>,
    /// With `stdin`: a regular expression for the line the system under test answers with (on
    /// stdout or stderr, after the text was written); its first group, read as JSON when it
    /// parses, is the action's result. Without it, a `stdin` hook's result is `{}`.
    #[serde(default)]
    pub reply: Option<String>,
    /// More environment for `run` (placeholders expanded).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// How long it may take (default 30s).
    #[serde(default)]
    pub timeout: Option<Dur>,
}

/// An HTTP request a hook makes.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HttpHook {
    /// The method (default POST).
    #[serde(default)]
    pub method: Option<String>,
    /// The URL (placeholders expanded).
    pub url: String,
    /// Headers (placeholders expanded).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// A JSON body, with placeholders expanded in its strings.
    #[serde(default)]
    pub json: Option<Value>,
    /// A text body (placeholders expanded), instead of `json`.
    #[serde(default)]
    pub body: Option<String>,
}

impl Hooks {
    /// Reads a hooks file; an error names the file, the line and the key at fault.
    pub fn load(path: &Path) -> Result<Hooks, LoadError> {
        let hooks: Hooks = crate::scenario::load_yaml_file(path)?;
        for (name, hook) in &hooks.hooks {
            let kinds = [
                hook.run.is_some(),
                hook.http.is_some(),
                hook.stdin.is_some(),
            ]
            .iter()
            .filter(|k| **k)
            .count();
            if kinds != 1 {
                return Err(LoadError {
                    file: path.display().to_string(),
                    line: None,
                    column: None,
                    key_path: Some(name.clone()),
                    message: format!(
                        "hook `{name}` must have exactly one of `run`, `http` or `stdin` (it has {kinds})"
                    ),
                    snippet: None,
                });
            }
        }
        Ok(hooks)
    }

    /// The hook of an action.
    pub fn get(&self, action: &str) -> Option<&Hook> {
        self.hooks.get(action)
    }

    /// The actions it has hooks for.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.hooks.keys().map(String::as_str)
    }
}

/// Why a set-up action the scenario needs is not done, when no hook does it.
pub fn needs_hook(action: &str) -> String {
    format!("needs hook `{action}`")
}
