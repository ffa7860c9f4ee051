//! What a person in the web UI makes the fake daemon do, as `act` steps of an lvmh scenario
//! run by fake-instance: send a prompt or an abort to a session's plugin, reload a session's
//! page (its persisted events), read the session list; and, for a scenario judging a web UI,
//! start a pi session here, drop the browsers' links and see what the web UI fetched after.

use std::sync::Arc;
use std::time::Duration;

use harness::engine::{ActError, TypedActor};
use serde::Deserialize;
use serde_json::{Value, json};

use super::daemon::Daemon;

/// One action of the web UI in front of the fake daemon.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum DaemonAction {
    /// Send a prompt into a session, as `POST /api/sessions/:id/prompt` does; fails when the
    /// session is offline. Gives `{promptId}`.
    Prompt {
        /// The session.
        session: String,
        /// The text.
        message: String,
    },
    /// Abort a session's run, as `POST /api/sessions/:id/abort` does.
    Abort {
        /// The session.
        session: String,
    },
    /// Reload a session's page: its persisted events after `after`, as `GET
    /// /api/sessions/:id/events` gives them. Gives `{events, seqs}`.
    Events {
        /// The session.
        session: String,
        /// Only events after this seq.
        #[serde(default)]
        after: u64,
    },
    /// The session list, as `GET /api/sessions` gives it. Gives `{sessions}`.
    Sessions {},
    /// The daemon goes down for a while: it drops every plugin link and refuses dials (503)
    /// until `for` has passed. Gives `{dropped}`.
    Down {
        /// How long it stays down.
        #[serde(rename = "for")]
        span: harness::scenario::Dur,
    },
    /// A pi session starts in a terminal and its plugin (run here) links to the daemon: a
    /// session for a web UI under test to show. Gives `{session}`.
    StartSession {},
    /// Every browser's link closes at once (its network blinked). Gives `{browsers,
    /// subscribed}`: how many were open, and the sessions they were subscribed to.
    DropBrowsers {},
    /// Waits (up to the step's timeout) for a fetch of the session's events since the browsers
    /// were dropped that starts from the last seq the web had been shown: `after` between the
    /// highest persisted seq and the highest seq it was shown (only deltas, never served
    /// again, lie between). Gives `{fromLastSeen, after, seen, seenPersisted, fetches}`:
    /// whether one came, its `after` (else the first fetch's, or null), the two marks, and
    /// every fetch's `after` since the drop.
    Refetched {
        /// The session.
        session: String,
    },
}

/// WebSocket close 1001: the daemon goes away.
const GOING_AWAY: u16 = 1001;

/// The web UI's hands on the daemon.
#[allow(missing_docs)] // fields whose names say it all go undocumented
pub struct DaemonActor {
    pub(crate) daemon: Arc<Daemon>,
    /// Where sessions of its own start.
    pub(crate) spawns: Arc<super::spawn::Spawns>,
    /// `LVMH_TOKEN`, which those sessions' plugins dial with.
    pub token: String,
    /// Each link's frame limits.
    pub limits: harness::transport::FrameLimits,
}

impl TypedActor for DaemonActor {
    type Action = DaemonAction;
    const WHO: &'static str = "the fake daemon";

    async fn act_typed(&self, action: DaemonAction, timeout: Duration) -> Result<Value, ActError> {
        match action {
            DaemonAction::Refetched { session } => Ok(self.refetched(&session, timeout).await),
            action => self.act_now(action),
        }
    }
}

impl DaemonActor {
    /// Does `action` now.
    pub fn act_now(&self, action: DaemonAction) -> Result<Value, ActError> {
        match action {
            DaemonAction::Prompt { session, message } => {
                match self.daemon.prompt(&session, &message) {
                    Some(id) => Ok(json!({ "promptId": id })),
                    None => Err(ActError::Failed(format!(
                        "session `{session}` is offline: no plugin is linked for it"
                    ))),
                }
            }
            DaemonAction::Abort { session } => match self.daemon.abort(&session) {
                true => Ok(json!({})),
                false => Err(ActError::Failed(format!("session `{session}` is offline"))),
            },
            DaemonAction::Events { session, after } => {
                let events = self
                    .daemon
                    .events(&session, after, super::routes::EVENTS_LIMIT_MAX);
                let seqs: Vec<Value> = events.iter().map(|e| e["seq"].clone()).collect();
                Ok(json!({ "events": events, "seqs": seqs }))
            }
            DaemonAction::Sessions {} => Ok(json!({ "sessions": self.daemon.session_list() })),
            DaemonAction::Down { span } => {
                self.daemon.refuse_for(span.0);
                let dropped = self.daemon.drop_plugins(GOING_AWAY);
                Ok(json!({ "dropped": dropped }))
            }
            DaemonAction::StartSession {} => match self.spawns.local(&self.token, self.limits) {
                Ok(session) => Ok(json!({ "session": session })),
                Err(why) => Err(ActError::Failed(format!(
                    "no session could start here: {why:?}"
                ))),
            },
            DaemonAction::DropBrowsers {} => {
                let (browsers, subscribed) = self.daemon.drop_browsers(GOING_AWAY);
                Ok(json!({ "browsers": browsers, "subscribed": subscribed }))
            }
            DaemonAction::Refetched { session } => Ok(self.fetched_since_drop(&session)),
        }
    }

    /// Waits for a fetch of `session` from its last seen seq since the drop, until `timeout`.
    async fn refetched(&self, session: &str, timeout: Duration) -> Value {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let found = self.fetched_since_drop(session);
            if found["fromLastSeen"] == true || tokio::time::Instant::now() >= deadline {
                return found;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    fn fetched_since_drop(&self, session: &str) -> Value {
        let (afters, shown) = self.daemon.web().since_drop(session);
        let fitting = afters
            .iter()
            .find(|after| (shown.persisted..=shown.any).contains(after));
        json!({
            "fromLastSeen": fitting.is_some(),
            "after": fitting.or(afters.first()),
            "seen": shown.any,
            "seenPersisted": shown.persisted,
            "fetches": afters,
        })
    }
}
