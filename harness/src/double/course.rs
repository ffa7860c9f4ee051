//! What a run is for once its double is up: a scenario's steps judged (or, when the set-up for
//! it broke, a verdict at once), or, with no scenario, the double left running unattended until
//! told to stop; and, beside either, a task of the double's own (a device keeping its link)
//! whose end also ends an unattended run.

use std::future::Future;
use std::sync::Arc;

use crate::engine::runner::Dialer;
use crate::engine::{Actor, Cell, Hub, PeerProcess, RunOutcome};
use crate::scenario::{Scenario, Spanned, Step};

use super::scripted::Scripted;
use super::unattended::Unattended;

/// How a scenario's set-up stands once the peer's side has made its part.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetUp {
    /// Made: the scenario's steps run.
    Ready,
    /// Something it needs is not arranged: the scenario does not apply, for this reason.
    Unarranged(String),
    /// Making it failed: there is nothing to judge, and the run is broken for this reason.
    Broke(String),
}

impl SetUp {
    /// Ready, or not applicable for `why`.
    pub fn unarranged(why: Option<String>) -> SetUp {
        why.map_or(SetUp::Ready, SetUp::Unarranged)
    }

    /// Whether the scenario's steps run, and the peer's side is to play its part in them.
    pub fn is_ready(&self) -> bool {
        *self == SetUp::Ready
    }
}

/// What `scenario` needs arranged when the peer is asked for its `peer:` set-up as it stands:
/// each of the set-up's keys, beside what its steps need.
pub fn needs_as_keyed(scenario: &Scenario) -> Vec<String> {
    let keys = scenario
        .peer
        .as_ref()
        .map(|p| p.value.setup.keys().cloned().collect())
        .unwrap_or_default();
    scenario.set_up_needs(keys)
}

/// A task of the double's own that runs beside the run.
#[derive(Debug)]
pub struct Beside<F> {
    /// The task; what it gives, when it ends by itself, is what ended an unattended run.
    pub task: F,
    /// Whether it also runs while a scenario's steps do (else only unattended).
    pub during_scenario: bool,
}

/// A double's course: its hub and actor, and what its scenario or its unattended run needs.
pub struct Course {
    double: &'static str,
    hub: Arc<Hub>,
    cell: Cell,
    actor: Arc<dyn Actor>,
    dialer: Option<Arc<dyn Dialer>>,
    process: Option<Arc<dyn PeerProcess>>,
    end_at_finding: Option<String>,
    console: bool,
    steps: Vec<Spanned<Step>>,
    steps_of: &'static str,
}

impl Course {
    /// The course of `double` (its name, for the log), acting with `actor` on `hub`.
    pub fn new(double: &'static str, hub: Arc<Hub>, cell: Cell, actor: Arc<dyn Actor>) -> Self {
        Self {
            double,
            hub,
            cell,
            actor,
            dialer: None,
            process: None,
            end_at_finding: None,
            console: false,
            steps: Vec::new(),
            steps_of: "its own steps",
        }
    }

    /// A scenario's steps dial the peer again with `dialer`.
    pub fn dialling(self, dialer: Arc<dyn Dialer>) -> Self {
        Self {
            dialer: Some(dialer),
            ..self
        }
    }

    /// A scenario's steps restart the peer, or read its output, through `process`.
    pub fn with_process(self, process: Option<Arc<dyn PeerProcess>>) -> Self {
        Self { process, ..self }
    }

    /// A scenario ends at the first finding of `rule`.
    pub fn ending_at_finding(self, rule: Option<String>) -> Self {
        Self {
            end_at_finding: rule,
            ..self
        }
    }

    /// Unattended, the double does `steps` by itself (`of`: whose they are, for the log), and
    /// reads actions from stdin when `console`.
    pub fn own_steps(self, of: &'static str, steps: Vec<Spanned<Step>>, console: bool) -> Self {
        Self {
            steps_of: of,
            steps,
            console,
            ..self
        }
    }

    /// Runs `scenario` (or, without one, stays up) until it ends or `shutdown`; `None` when no
    /// scenario came to an end.
    pub async fn run(
        self,
        scenario: Option<&Scenario>,
        set_up: SetUp,
        shutdown: impl Future<Output = ()>,
    ) -> Option<RunOutcome> {
        let beside: Option<Beside<std::future::Pending<()>>> = None;
        self.run_beside(scenario, set_up, beside, shutdown).await.0
    }

    /// [`Course::run`] with `beside` running alongside; gives also what `beside` gave, when
    /// its end was what ended an unattended run.
    pub async fn run_beside<T, F>(
        self,
        scenario: Option<&Scenario>,
        set_up: SetUp,
        beside: Option<Beside<F>>,
        shutdown: impl Future<Output = ()>,
    ) -> (Option<RunOutcome>, Option<T>)
    where
        T: Send + 'static,
        F: Future<Output = T> + Send + 'static,
    {
        let Some(scenario) = scenario else {
            let unattended = Unattended {
                hub: self.hub,
                cell: self.cell,
                actor: self.actor,
                console: self.console,
                steps: self.steps,
                steps_of: self.steps_of,
                double: self.double,
            };
            let end = async {
                match beside {
                    Some(beside) => tokio::select! {
                        ended = beside.task => Some(ended),
                        () = shutdown => None,
                    },
                    None => {
                        shutdown.await;
                        None
                    }
                }
            };
            return (None, unattended.until(end).await);
        };
        let unarranged = match set_up {
            SetUp::Broke(why) => {
                let broken = RunOutcome::broken(scenario.name.clone(), self.cell, why);
                return (Some(broken), None);
            }
            SetUp::Unarranged(why) => Some(why),
            SetUp::Ready => None,
        };
        let keeper = beside
            .filter(|beside| beside.during_scenario)
            .map(|beside| tokio::spawn(beside.task));
        let scripted = Scripted {
            hub: self.hub,
            cell: self.cell,
            dialer: self.dialer,
            actor: self.actor,
            process: self.process,
            unarranged,
            end_at_finding: self.end_at_finding,
        };
        let outcome = scripted.run(scenario, shutdown).await;
        if let Some(keeper) = keeper {
            keeper.abort();
        }
        (outcome, None)
    }
}
