//! What every step draws on: its deadline, the run's variables and captures, and the link the
//! scenario talks on.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

use super::Runner;
use crate::engine::verdict::Failure;
use crate::jsonrpc::Peer;
use crate::pattern::{MatchOutcome, Vars, substitute};
use crate::scenario::Dur;
use crate::scenario::model::*;

impl Runner {
    /// The scenario talked on this link. Only forward: a message taken late from an older link
    /// does not make a link the peer closed long ago the one `expect_close` watches. (Links
    /// count from 1; a message that came on no link is on 0 and moves nothing.)
    pub(super) fn focus_on(&self, link: u32) {
        self.focus
            .fetch_max(link, std::sync::atomic::Ordering::Relaxed);
    }

    /// The step's own deadline, or the run's default.
    pub(super) fn timeout(&self, own: Option<Dur>) -> Duration {
        own.map(|d| d.0).unwrap_or(self.default_timeout)
    }

    /// The run's variables as they are now (none, if their lock was poisoned).
    pub(super) fn vars(&self) -> Vars {
        self.hub.vars.lock().map(|v| v.clone()).unwrap_or_default()
    }

    /// `value` with every `${...}` substituted; a variable never set is the scenario's error.
    pub(super) fn render(&self, value: &Value) -> Result<Value, String> {
        substitute(value, &self.vars()).map_err(|e| format!("cannot substitute: {e}"))
    }

    /// Sets the step's captures from `message`: the pattern's own, and each `capture:` path
    /// (read in the message, or in its fields directly). `link` is where the message came
    /// from, so that a `reply` to a captured request answers on it.
    pub(super) fn capture(
        &self,
        message: &Value,
        outcome: &MatchOutcome,
        paths: &Captures,
        link: Option<u32>,
    ) -> Result<(), String> {
        if let (Some(link), Ok(mut origins)) = (link, self.origins.lock()) {
            for name in outcome.captures.keys().chain(paths.keys()) {
                origins.insert(name.clone(), link);
            }
        }
        let mut scope = Vars::default();
        scope.set("$", message.clone());
        if let Value::Object(fields) = message {
            for (key, value) in fields {
                scope.set(key, value.clone());
            }
        }
        let mut vars = self
            .hub
            .vars
            .lock()
            .map_err(|_| "variables are unavailable".to_string())?;
        for (name, value) in &outcome.captures {
            vars.set(name, value.clone());
        }
        for (name, path) in paths {
            let value = scope.lookup(path).cloned().ok_or_else(|| {
                format!("cannot capture `{name}`: the message has nothing at `{path}`")
            })?;
            vars.set(name, value);
        }
        Ok(())
    }

    /// The link to talk on, waited for until `deadline`; its absence is the peer's failure.
    pub(super) async fn link(&self, deadline: Instant) -> Result<Arc<Peer>, Failure> {
        self.hub
            .wait_current(deadline)
            .await
            .ok_or_else(|| Failure {
                summary: "no link from the peer".into(),
                awaited: Some("an open link".into()),
                ..Failure::default()
            })
    }
}
