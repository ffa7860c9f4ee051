//! Spawns (spec, "Spawn"): where the real daemon clones a repo and starts a container whose
//! pi loads the plugin, the fake daemon starts the plugin itself, in this process, dialing its
//! own agent link with `agent: true` and the repo in its hello. What a test sees is the same:
//! an answer at once, a job in `/api/spawn/status`, then a session in the list.

use std::sync::{Arc, Mutex};

use harness::lvmh::plugin::{Plugin, PluginConfig};
use serde_json::{Value, json};

/// The most spawns one run keeps (each is a plugin running here).
pub const SPAWNS_MAX: usize = 64;

/// One spawn job and its plugin.
struct Job {
    repo: String,
    state: &'static str,
    container: String,
    session: String,
    plugin: Option<Arc<Plugin>>,
}

/// The run's spawns.
#[derive(Default)]
pub struct Spawns {
    jobs: Mutex<Vec<Job>>,
    /// Sessions a scenario started here (pi in a terminal, not in a container).
    locals: Mutex<Vec<Arc<Plugin>>>,
    /// The agent link's URL (`ws://addr/agent/ws`), known once the daemon listens.
    pub agent_url: Mutex<String>,
}

impl Spawns {
    /// `GET /api/spawn/status`'s jobs.
    pub fn jobs(&self) -> Vec<Value> {
        self.jobs
            .lock()
            .map(|jobs| {
                jobs.iter()
                    .map(|j| {
                        json!({"repo": j.repo, "state": j.state, "containerId": j.container, "sessionId": j.session})
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Stops the container of `session` (its plugin goes without a word); false when no spawn
    /// made it.
    pub fn stop(&self, session: &str) -> bool {
        let Ok(mut jobs) = self.jobs.lock() else {
            return false;
        };
        let Some(job) = jobs.iter_mut().find(|j| j.session == session) else {
            return false;
        };
        if let Some(plugin) = job.plugin.take() {
            plugin.kill();
        }
        job.state = "stopped";
        true
    }

    /// Stops every spawned plugin (the run ends).
    pub fn stop_all(&self) {
        let mut plugins: Vec<Arc<Plugin>> = self
            .jobs
            .lock()
            .map(|mut jobs| jobs.iter_mut().filter_map(|j| j.plugin.take()).collect())
            .unwrap_or_default();
        if let Ok(mut locals) = self.locals.lock() {
            plugins.append(&mut locals);
        }
        for plugin in plugins {
            plugin.kill();
        }
    }
}

/// The 6 hex digits the spec adds to a repo's volume name; here they name the container.
fn short_hash(text: &str) -> String {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    text.hash(&mut hasher);
    format!("{:06x}", hasher.finish() & 0xff_ffff)
}

/// Why a spawn was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// The run has [`SPAWNS_MAX`] spawns already.
    TooMany,
    /// The plugin could not start.
    Failed(String),
}

impl Spawns {
    /// Spawns a session for `repo`: its plugin starts here, dialing the daemon with `token`.
    /// Gives the session's and the container's ids.
    pub fn start(
        &self,
        repo: String,
        token: &str,
        limits: harness::transport::FrameLimits,
    ) -> Result<(String, String), Refused> {
        let url = self.agent_url.lock().map(|u| u.clone()).unwrap_or_default();
        let (session, container) = {
            let jobs = self
                .jobs
                .lock()
                .map_err(|_| Refused::Failed("spawns unavailable".into()))?;
            if jobs.len() >= SPAWNS_MAX {
                return Err(Refused::TooMany);
            }
            // Ids of their own, as pi's are: a daemon restarted on its store has had sessions
            // before, which a counter from 1 would meet again.
            let n = harness::random::u64();
            (
                format!("spawn-{n:016x}"),
                format!("lvmh-worker-{}-{:08x}", short_hash(&repo), n >> 32),
            )
        };
        let mut config = PluginConfig::new(&url, token, &session, "/workspace");
        config.session["agent"] = json!(true);
        config.session["repo"] = json!(repo);
        config.limits = limits;
        let plugin = start_plugin(config)?;
        if let Ok(mut jobs) = self.jobs.lock() {
            jobs.push(Job {
                repo,
                state: "running",
                container: container.clone(),
                session: session.clone(),
                plugin: Some(plugin),
            });
        }
        Ok((session, container))
    }

    /// Starts a pi session of its own here, as in a terminal (`agent: false`, no repo): its
    /// plugin dials the daemon with `token`. Gives the session's id.
    pub fn local(
        &self,
        token: &str,
        limits: harness::transport::FrameLimits,
    ) -> Result<String, Refused> {
        let url = self.agent_url.lock().map(|u| u.clone()).unwrap_or_default();
        let mut locals = self
            .locals
            .lock()
            .map_err(|_| Refused::Failed("sessions unavailable".into()))?;
        if locals.len() >= SPAWNS_MAX {
            return Err(Refused::TooMany);
        }
        let session = format!("pi-{:016x}", harness::random::u64());
        let mut config = PluginConfig::new(&url, token, &session, "/home/pi/project");
        config.limits = limits;
        locals.push(start_plugin(config)?);
        Ok(session)
    }
}

/// Starts a plugin of the daemon's own: no scenario runs over it, and its journal is kept in
/// memory (what it sends is judged on the daemon's side of its link).
fn start_plugin(config: PluginConfig) -> Result<Arc<Plugin>, Refused> {
    Plugin::start(
        config,
        Arc::new(harness::journal::Journal::in_memory()),
        Arc::default(),
        Default::default(),
        None,
        None,
    )
    .map_err(|e| Refused::Failed(e.to_string()))
}
