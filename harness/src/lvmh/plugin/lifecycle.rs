//! A plugin's start and its end: the agent and the dialing spawned on a hub of its own, and
//! the ways it stops (a `bye` first, or killed without a word).

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, Weak};

use serde_json::json;
use tokio::sync::{Notify, mpsc, watch};

use super::config::FrameCheck;
use super::inbox::Follow;
use super::{GOING_AWAY, Plugin, PluginConfig, State};
use crate::engine::Hub;
use crate::lvmh::envelope::{fields, kinds};
use crate::lvmh::rules;

/// The backlog of prompts a busy agent keeps (the TUI's type-ahead); more are dropped, and
/// said so in the log.
const PROMPT_QUEUE: usize = 256;

impl Plugin {
    /// Starts a plugin: the agent at once, the link in the background, on a hub of its own
    /// (with `scenario`'s variables and steps, when one runs over it). `check` sees every frame
    /// of the daemon's.
    pub fn start(
        config: PluginConfig,
        journal: Arc<crate::journal::Journal>,
        findings: Arc<crate::finding::Findings>,
        vars: crate::pattern::Vars,
        scenario: Option<&crate::scenario::Scenario>,
        check: Option<FrameCheck>,
    ) -> Result<Arc<Plugin>, crate::engine::HubError> {
        let (prompts, prompts_rx) = mpsc::channel(PROMPT_QUEUE);
        let mut made: Result<(), crate::engine::HubError> = Ok(());
        let plugin = Arc::new_cyclic(|me: &Weak<Plugin>| {
            let hub = Hub::for_scenario(
                Arc::new(Follow(me.clone())),
                scenario,
                vars,
                journal,
                findings,
            )
            .unwrap_or_else(|e| {
                made = Err(e);
                Hub::new(
                    Arc::new(Follow(me.clone())),
                    Default::default(),
                    Default::default(),
                    Arc::new(crate::journal::Journal::in_memory()),
                    Default::default(),
                )
            });
            let state = State {
                session: config.session.clone(),
                seq: config.first_seq,
                ..State::default()
            };
            Plugin {
                config,
                hub,
                state: Mutex::new(state),
                prompts,
                abort: Notify::new(),
                aborted: AtomicBool::new(false),
                stop: watch::channel(false).0,
                pending: std::sync::atomic::AtomicUsize::new(0),
                check,
            }
        });
        made?;
        if scenario.is_none() {
            plugin.hub.keep_nothing();
        }
        tokio::spawn(Arc::clone(&plugin).agent(prompts_rx));
        tokio::spawn(Arc::clone(&plugin).dial_forever());
        Ok(plugin)
    }

    /// Says `bye` and stops dialing (pi shuts down).
    pub fn quit(&self) {
        let reason = match self.config.misbehave.breaks(rules::BYE) {
            true => "exit",
            false => "shutdown",
        };
        // Misbehaving: gone without a word.
        if !self.config.misbehave.breaks_way(rules::BYE, "silent") {
            self.emit(kinds::BYE, fields(json!({ "reason": reason })));
        }
        self.stop_with(crate::transport::CLOSE_NORMAL, "bye");
    }

    /// Whether the plugin has stopped (quit or killed).
    pub(super) fn stopped(&self) -> bool {
        *self.stop.borrow()
    }

    /// Resolves once the plugin stops.
    pub(super) async fn until_stopped(&self) {
        let mut stop = self.stop.subscribe();
        let _ = stop.wait_for(|stopped| *stopped).await;
    }

    /// Says `bye` and stops, as [`Plugin::quit`], then waits (at most `within`) until the link
    /// that carried it has closed: a process that ends right after (pi on SIGTERM or SIGINT)
    /// gets its `bye` out first.
    pub async fn quit_and_wait(&self, within: std::time::Duration) {
        let live = self.state.lock().ok().and_then(|s| s.live.clone());
        self.quit();
        if let Some(peer) = live {
            let _ = tokio::time::timeout(within, peer.closed()).await;
        }
    }

    /// Stops at once, without a word (the process is killed).
    pub fn kill(&self) {
        self.stop_with(GOING_AWAY, "killed");
    }

    /// Stops dialing and closes its links, the one welcomed and the one waiting for it.
    fn stop_with(&self, code: u16, reason: &str) {
        self.stop.send_replace(true);
        let links = self
            .state
            .lock()
            .map(|mut s| [s.live.take(), s.waiting.take()])
            .unwrap_or_default();
        for peer in links.into_iter().flatten() {
            peer.close(code, reason);
        }
    }
}
