//! What both doubles' embedding handles share: a run started on the test's own tokio runtime,
//! stopped when its handle goes, and its verdict taken once, within a deadline. A verdict owed
//! and never taken fails the test when the handle is dropped, as a mock server that verifies on
//! drop does.

mod builder;
mod handle;
mod in_process;
mod plan;
mod started;

pub use builder::{BuilderCore, RestartedWithScenario, START_WITHIN, VERDICT_WITHIN, control_url};
pub use in_process::{InProcessPeer, isolated};
pub use plan::RunPlan;
pub use started::{Ready, Started};

use std::fmt::Display;
use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::engine::{Cell, RunOutcome};
use crate::finding::Finding;
use crate::journal::Entry;
use crate::report::RunReport;

/// How long a run without a scenario may take to stop once told.
const STOP_WITHIN: Duration = Duration::from_secs(30);

/// The double's hands in its current run (its actor), replaced when a restart starts the next
/// run; shared by the handle and the runs.
#[derive(Debug)]
pub struct Hands<T>(std::sync::Mutex<Option<std::sync::Arc<T>>>);

impl<T> Default for Hands<T> {
    fn default() -> Self {
        Self(std::sync::Mutex::new(None))
    }
}

impl<T> Hands<T> {
    /// The current run's hands are these.
    pub fn set(&self, hands: std::sync::Arc<T>) {
        if let Ok(mut slot) = self.0.lock() {
            *slot = Some(hands);
        }
    }

    /// The current run's hands, or why there are none.
    pub fn current(&self) -> Result<std::sync::Arc<T>, crate::engine::ActError> {
        self.0
            .lock()
            .ok()
            .and_then(|hands| hands.clone())
            .ok_or_else(|| crate::engine::ActError::Failed("the double is not running".into()))
    }
}

/// What a double's run ended with.
#[derive(Debug)]
pub struct Ended {
    /// The scenario's outcome, when one ran to its end.
    pub outcome: Option<RunOutcome>,
    /// What the monitors found.
    pub findings: Vec<Finding>,
    /// The last messages.
    pub recent: Vec<Entry>,
}

/// The future a run waits on to stop.
pub type Shutdown = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Why a double never said it was up when its run gave no error of its own: a double's start
/// error carries it, beside the causes of its own.
#[derive(Debug, thiserror::Error)]
pub enum NotUp {
    /// It ended, or its task stopped, before it came up.
    #[error("{double} ended before it was up: {why}")]
    Ended {
        /// Which double.
        double: &'static str,
        /// Why, as far as known.
        why: String,
    },
    /// It did not come up in time.
    #[error("{double} was not up within {within:?}")]
    Late {
        /// Which double.
        double: &'static str,
        /// How long it had.
        within: Duration,
    },
}

/// A double's run on the test's runtime.
pub struct Running<E> {
    plan: RunPlan,
    stop: Option<oneshot::Sender<()>>,
    run: Option<JoinHandle<Result<Ended, E>>>,
    verdict_owed: bool,
    started: Instant,
}

impl<E: Display + Send + 'static> Running<E> {
    /// Spawns `run` (given where to say it is up, and what to wait on to stop), and waits until
    /// it says it is up, handing back what it said; the run's own error if it ended first, else
    /// why it is not up as `E`.
    pub async fn start<L, Fut>(
        plan: RunPlan,
        run: impl FnOnce(oneshot::Sender<L>, Shutdown) -> Fut,
    ) -> Result<(L, Running<E>), E>
    where
        E: From<NotUp>,
        L: Send + 'static,
        Fut: Future<Output = Result<Ended, E>> + Send + 'static,
    {
        let (up_tx, up_rx) = oneshot::channel::<L>();
        let (stop_tx, stop_rx) = oneshot::channel::<()>();
        let shutdown: Shutdown = Box::pin(async move {
            let _ = stop_rx.await;
        });
        let task = tokio::spawn(run(up_tx, shutdown));
        let double = plan.double;
        let up = match tokio::time::timeout(plan.up_within, up_rx).await {
            Ok(Ok(up)) => up,
            Ok(Err(_)) => {
                return Err(match task.await {
                    Ok(Err(e)) => e,
                    Ok(Ok(_)) => E::from(NotUp::Ended {
                        double,
                        why: "it ended by itself".into(),
                    }),
                    Err(e) => E::from(NotUp::Ended {
                        double,
                        why: e.to_string(),
                    }),
                });
            }
            Err(_) => {
                task.abort();
                return Err(E::from(NotUp::Late {
                    double,
                    within: plan.up_within,
                }));
            }
        };
        let running = Running {
            verdict_owed: plan.scenario.is_some(),
            plan,
            stop: Some(stop_tx),
            run: Some(task),
            started: Instant::now(),
        };
        Ok((up, running))
    }

    /// The protocol and spec of the run.
    pub fn cell(&self) -> &Cell {
        &self.plan.cell
    }

    /// The scenario's name, when one runs.
    pub fn scenario(&self) -> Option<&str> {
        self.plan.scenario.as_deref()
    }

    /// The verdict: with a scenario, once it has ended (within the plan's `verdict_within`);
    /// without one, what the monitors found until now. The run stops either way.
    pub async fn verdict(mut self) -> RunReport {
        self.verdict_owed = false;
        let name = self
            .plan
            .scenario
            .clone()
            .unwrap_or_else(|| format!("(no scenario: a simulated {})", self.plan.double));
        let within = if self.plan.scenario.is_some() {
            self.plan.verdict_within
        } else {
            self.stop_now();
            STOP_WITHIN
        };
        let Some(run) = self.run.take() else {
            return self.broken(&name, "its verdict was already taken".into());
        };
        let ended = tokio::time::timeout(within, run).await;
        self.stop_now();
        match ended {
            Ok(Ok(Ok(ended))) => {
                let outcome = ended.outcome.unwrap_or_else(|| {
                    RunOutcome::of_monitors(
                        name,
                        self.plan.cell,
                        ended.findings,
                        self.started.elapsed(),
                    )
                });
                RunReport::new(self.plan.double, outcome, ended.recent)
            }
            Ok(Ok(Err(e))) => self.broken(&name, e.to_string()),
            Ok(Err(e)) => self.broken(&name, format!("{} stopped: {e}", self.plan.double)),
            Err(_) => self.broken(&name, format!("the scenario did not end within {within:?}")),
        }
    }

    /// Stops the run without taking its verdict: for a test that failed before the run could
    /// end, so the failure it reports is its own and not a verdict nobody took.
    pub fn dismiss(mut self) {
        self.verdict_owed = false;
        self.stop_now();
    }

    fn stop_now(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }

    fn broken(&self, name: &str, why: String) -> RunReport {
        RunReport::new(
            self.plan.double,
            RunOutcome::broken(name, self.plan.cell, why),
            Vec::new(),
        )
    }
}

impl<E> std::fmt::Debug for Running<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Running")
            .field("plan", &self.plan)
            .field("verdict_owed", &self.verdict_owed)
            .finish_non_exhaustive()
    }
}

impl<E> Drop for Running<E> {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if self.verdict_owed && !std::thread::panicking() {
            panic!(
                "{} ran scenario `{}` and was dropped without its verdict: end the test with \
                 `.verdict().await.assert_passed()`",
                self.plan.double,
                self.plan.scenario.as_deref().unwrap_or_default()
            );
        }
    }
}
