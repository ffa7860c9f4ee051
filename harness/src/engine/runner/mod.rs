//! Walking a scenario's steps over a hub, each with a deadline.
//!
//! The [`Runner`] holds one run's state and settings, and is built here; the rest is split by
//! job. `walk` goes through a scenario's steps (unfolding `when`, skipping all after the first
//! step that fails or does not apply); `steps` does each kind of step, grouped by what it
//! works on; `admission` asks the double whether the peer claimed what a step needs;
//! `context` is what every step draws on (variables, captures, the link in use); `describe`
//! and `missed` put failures into words. What a run hands back ([`Cell`], [`RunOutcome`],
//! [`Verdict`]) and what a double lends `dial` and `act` steps ([`Dialer`], [`Actor`]) have
//! modules of their own, re-exported here, where the doubles and the CLI find them.

mod abilities;
mod admission;
mod cell;
mod context;
mod describe;
mod missed;
mod outcome;
mod steps;
mod walk;

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

pub use abilities::{Actor, DialRequest, DialResult, Dialer, TypedActor};
pub use cell::Cell;
pub use describe::title;
pub use outcome::{RunOutcome, Verdict};

use super::hub::Hub;
use super::verdict::StepVerdict;
use crate::jsonrpc::RpcError;
use crate::scenario::model::Scenario;

/// The default deadline of a step that waits.
pub const DEFAULT_TIMEOUT: Duration = crate::scenario::DEFAULT_TIMEOUT;

/// Runs one scenario in one cell.
pub struct Runner {
    hub: Arc<Hub>,
    cell: Cell,
    default_timeout: Duration,
    dialer: Option<Arc<dyn Dialer>>,
    actor: Option<Arc<dyn Actor>>,
    process: Option<Arc<dyn super::process::PeerProcess>>,
    /// The last output line an `expect_output` step matched: the next looks past it.
    output_seen: std::sync::atomic::AtomicU64,
    verdicts: Vec<StepVerdict>,
    /// A step failed, erred or did not apply: the rest are skipped.
    stopped: bool,
    /// Why the run does not apply to the peer, once a step found it does not.
    not_applicable: Option<String>,
    /// Set-up the scenario needs that nothing arranged: the run does not apply from the start.
    unarranged: Option<String>,
    /// The link the scenario last talked on (0: none yet): what the peer sent a step, or a step
    /// sent on. `expect_close` watches it, so a peer that closes one link and dials the next at
    /// once is judged on the link the scenario was using, not on the new one.
    focus: std::sync::atomic::AtomicU32,
    /// Whether this is the run's scenario, whose steps watchers follow (`--events`, the control
    /// API): the background steps of a peer's set-up are not.
    reports_progress: bool,
    /// The link each captured message came on, by variable: a `reply` answers on that link
    /// (a redialled peer starts its ids again, so an id alone does not say which request).
    origins: std::sync::Mutex<std::collections::HashMap<String, u32>>,
    /// Requests sent by `start`, by name: their method, deadline and answer to come.
    started: std::sync::Mutex<std::collections::HashMap<String, Started>>,
    /// The inbox's newest arrival when each `start` sent its request, or each named `send` its
    /// message, by name: an `expect` with `after` looks only past it.
    start_marks: std::sync::Mutex<std::collections::HashMap<String, u64>>,
    /// The rule whose first finding ends the run (see [`Runner::ending_at_finding`]).
    end_at: Option<String>,
}

/// A request sent by `start`: its method, its deadline, and the task that waits for its answer.
type Started = (
    String,
    Duration,
    tokio::task::JoinHandle<Result<Result<Value, RpcError>, crate::jsonrpc::RequestError>>,
);

impl Runner {
    /// A runner over a hub whose links the double feeds.
    pub fn new(
        hub: Arc<Hub>,
        cell: Cell,
        default_timeout: Option<Duration>,
        dialer: Option<Arc<dyn Dialer>>,
    ) -> Self {
        Self {
            hub,
            cell,
            default_timeout: default_timeout.unwrap_or(DEFAULT_TIMEOUT),
            dialer,
            actor: None,
            process: None,
            output_seen: std::sync::atomic::AtomicU64::new(0),
            verdicts: Vec::new(),
            stopped: false,
            not_applicable: None,
            unarranged: None,
            focus: std::sync::atomic::AtomicU32::new(0),
            reports_progress: false,
            origins: Default::default(),
            started: Default::default(),
            start_marks: Default::default(),
            end_at: None,
        }
    }

    /// Ends the run at the first finding under `rule`, skipping the steps left: the
    /// self-test's misbehaviour cases know by then that the check caught the break, and the
    /// steps after it would only wait out deadlines the break makes them miss.
    pub fn ending_at_finding(mut self, rule: Option<String>) -> Self {
        self.end_at = rule;
        self
    }

    /// The double's actions, for `act` steps.
    pub fn with_actor(mut self, actor: Arc<dyn Actor>) -> Self {
        self.actor = Some(actor);
        self
    }

    /// The peer's process, for `expect_exit`, `expect_output` and `restart_peer` steps.
    pub fn with_process(mut self, process: Option<Arc<dyn super::process::PeerProcess>>) -> Self {
        self.process = process;
        self
    }

    /// Tells the hub's watchers of each step (`--events`, the control API's current step): for
    /// the run's scenario, not for steps run in the background.
    pub fn reporting_progress(mut self) -> Self {
        self.reports_progress = true;
        self
    }

    /// Set-up the scenario needs and nothing arranges (see
    /// [`applicability::unarranged`](super::applicability::unarranged)): the run will not apply,
    /// and runs no step.
    pub fn unarranged(mut self, why: Option<String>) -> Self {
        self.unarranged = why;
        self
    }

    /// Runs every step; the first failure, or the first step that does not apply to the peer,
    /// skips the rest.
    pub async fn run(mut self, scenario: &Scenario) -> RunOutcome {
        let started = Instant::now();
        if let Some(why) = self.unarranged.take() {
            self.stopped = true;
            self.not_applicable = Some(why);
        }
        self.steps(&scenario.steps, "").await;
        RunOutcome {
            scenario: scenario.name.clone(),
            cell: self.cell,
            steps: self.verdicts,
            findings: self.hub.findings().all(),
            not_applicable: self.not_applicable,
            elapsed_ms: started.elapsed().as_secs_f64() * 1000.0,
            process: None,
            hooks: Vec::new(),
            listed_rules: scenario.rules.clone(),
        }
    }
}
