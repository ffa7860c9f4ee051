//! How a plugin runs: the daemon it dials, the session it is, and what its scripted agent
//! answers. Kept apart from the running plugin so a double can build one before it starts.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::lvmh::{BACKOFF_CAP, BUFFER_CAP};
use crate::rules::Misbehaviours;
use crate::transport::FrameLimits;

/// What the scripted agent answers a prompt with.
#[derive(Debug, Clone)]
pub struct AgentScript {
    /// The assistant's reply; `{prompt}` stands for the prompt's text.
    pub reply: String,
    /// How many `message_update` deltas the reply streams in.
    pub deltas: usize,
    /// The pause between two deltas.
    pub pace: Duration,
    /// A tool the agent calls before it answers: its name and what it returns.
    pub tool: Option<(String, String)>,
}

impl Default for AgentScript {
    fn default() -> Self {
        Self {
            reply: "Done: {prompt}".into(),
            deltas: 3,
            pace: Duration::from_millis(5),
            tool: None,
        }
    }
}

/// How the plugin runs.
#[derive(Debug, Clone)]
pub struct PluginConfig {
    /// The daemon's agent WebSocket (`ws://host:port/agent/ws`).
    pub url: String,
    /// `LVMH_TOKEN`.
    pub token: String,
    /// The session snapshot hello and `session_info` carry (`id`, `name`, `cwd`, …).
    pub session: Value,
    /// The first pause between two dials; it doubles up to
    /// [`BACKOFF_CAP`](crate::lvmh::BACKOFF_CAP).
    pub backoff: Duration,
    /// How many unpersisted events are kept while the daemon is away.
    pub buffer_cap: usize,
    /// The agent's answers.
    pub agent: AgentScript,
    /// The plugin rules to break (`--misbehave`), to prove a daemon's test can catch it.
    pub misbehave: Misbehaviours,
    /// Each link's frame limits.
    pub limits: FrameLimits,
    /// Whether it dials at all: a plugin that does not is a pi session whose daemon is never
    /// reached (the session runs, its events kept).
    pub dial: bool,
    /// The last seq the session gave out before this process (a resumed session numbers on
    /// after it: the seq is kept for the session's lifetime); 0 for a new session.
    pub first_seq: u64,
}

impl PluginConfig {
    /// A plugin for session `id` dialing `url` with `token`, in `cwd`, as the spec's defaults
    /// have it.
    pub fn new(url: &str, token: &str, id: &str, cwd: &str) -> Self {
        Self {
            url: url.into(),
            token: token.into(),
            session: json!({
                "id": id,
                "name": null,
                "cwd": cwd,
                "model": "glm-5.3",
                "provider": "zai-renaud",
                "agent": false,
                "repo": null,
                "startedAt": crate::lvmh::now_ms(),
            }),
            backoff: Duration::from_millis(250),
            buffer_cap: BUFFER_CAP,
            agent: AgentScript::default(),
            misbehave: Misbehaviours::default(),
            limits: FrameLimits::default(),
            dial: true,
            first_seq: 0,
        }
    }

    /// The session's id.
    pub fn session_id(&self) -> String {
        self.session
            .get("id")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    }
}

/// A check of each frame the daemon sends (the double judging a daemon): what it broke.
pub type FrameCheck = Arc<dyn Fn(&str, &Value) -> Vec<crate::finding::Finding> + Send + Sync>;

/// The pause before dial number `attempt` (0 for the first redial): `first · 2^attempt`, at most
/// [`BACKOFF_CAP`], of which a random half is taken off (jitter), so plugins that lost the same
/// daemon do not all come back at once.
pub fn backoff(first: Duration, attempt: u32) -> Duration {
    let full = first
        .checked_mul(1u32 << attempt.min(20))
        .unwrap_or(BACKOFF_CAP)
        .min(BACKOFF_CAP);
    full.mul_f64(crate::random::between(0.5, 1.0))
}
