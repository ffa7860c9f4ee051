//! Hooks: what only the real project under test can do, done by the user's own commands or
//! requests (`--hooks FILE`). A scenario's `peer:` set-up and each `act` of its `peer.steps`
//! name an action (`share_session`, `open_chat`, …); a hooks file maps each name to a command,
//! an HTTP request, or a line written to the system under test's standard input, with the same
//! `{…}` placeholders as `--exec` plus the action's own fields. An action with no hook is not
//! done, and the run does not apply ("needs hook `share_session`"): never a failure.
//!
//! The engine knows no action's name: each double says which actions its scenarios need.

mod actor;
mod drive;
mod run;

use std::collections::BTreeMap;
use std::path::Path;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::scenario::{Dur, LoadError};

pub use actor::HookActor;
pub use drive::{Timed, drive, steps_of};
pub use run::HookContext;

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
    /// An HTTP request; it must answer 2xx. A JSON body is the action's result.
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

/// What one hook did, for the report.
#[derive(Debug, Clone, Serialize)]
pub struct HookRun {
    /// The action.
    pub action: String,
    /// `run`, `http` or `stdin`.
    pub kind: &'static str,
    /// The command, the request line, or the text written.
    pub detail: String,
    /// Whether it did what it should (exit 0, a 2xx answer, the text written).
    pub ok: bool,
    /// Its exit code, or the HTTP status.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<i32>,
    /// What it printed or answered (bounded), or why it failed.
    pub output: String,
    /// When it started, in milliseconds since the run began.
    pub at_ms: f64,
    /// How long it took.
    pub elapsed_ms: f64,
}

impl std::fmt::Display for HookRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let status = match (self.kind, self.status) {
            ("http", Some(status)) => format!("HTTP {status}"),
            (_, Some(code)) => format!("exit {code}"),
            (_, None) => String::new(),
        };
        write!(
            f,
            "hook `{}` ({} {}): {}{}",
            self.action,
            self.kind,
            self.detail.trim_end(),
            if self.ok { "done" } else { "FAILED" },
            if status.is_empty() {
                String::new()
            } else {
                format!(", {status}")
            }
        )
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hooks_file_is_read_and_a_hook_with_two_kinds_is_located() {
        let dir = tempfile::tempdir().expect("dir");
        let good = dir.path().join("hooks.yaml");
        std::fs::write(
            &good,
            "share_session: { run: \"lembas share {root}\" }\nopen_chat:\n  http: { url: \"{url}/test/chats\", json: { device: \"{token}\" } }\n  timeout: 5s\nterminal_prompt: { stdin: \"{action}\\n\" }\n",
        )
        .expect("write");
        let hooks = Hooks::load(&good).expect("it loads");
        assert_eq!(
            hooks.names().collect::<Vec<_>>(),
            ["open_chat", "share_session", "terminal_prompt"]
        );
        let bad = dir.path().join("bad.yaml");
        std::fs::write(&bad, "share_session: { run: x, stdin: y }\n").expect("write");
        let e = Hooks::load(&bad).expect_err("two kinds");
        assert_eq!(e.key_path.as_deref(), Some("share_session"));
        std::fs::write(&bad, "share_session:\n  rum: x\n").expect("write");
        let e = Hooks::load(&bad).expect_err("a typo");
        assert_eq!(e.line, Some(2), "{e}");
        assert!(e.to_string().contains("rum"), "{e}");
    }
}
