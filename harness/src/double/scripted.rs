//! A scenario's run, the same for every double: its steps on the double's hub, judged by the
//! engine's runner.

use std::future::Future;
use std::sync::Arc;

use crate::engine::runner::Dialer;
use crate::engine::{Actor, Cell, Hub, PeerProcess, RunOutcome, Runner};
use crate::scenario::Scenario;

/// A scenario's run, as every double makes it: its steps on the double's hub, judged by the
/// runner, reporting progress, until the end or a shutdown.
pub struct Scripted {
    /// The double's hub.
    pub hub: Arc<Hub>,
    /// The cell it runs in.
    pub cell: Cell,
    /// What dials the peer again, for a double that dials.
    pub dialer: Option<Arc<dyn Dialer>>,
    /// What does the scenario's actions.
    pub actor: Arc<dyn Actor>,
    /// The peer's process, for steps that restart it or read its output.
    pub process: Option<Arc<dyn PeerProcess>>,
    /// Why the scenario cannot apply (its set-up is not arranged), if it cannot.
    pub unarranged: Option<String>,
    /// Ends the run at the first finding of this rule.
    pub end_at_finding: Option<String>,
}

impl Scripted {
    /// Runs `scenario`; `None` when `shutdown` came first.
    pub async fn run(
        self,
        scenario: &Scenario,
        shutdown: impl Future<Output = ()>,
    ) -> Option<RunOutcome> {
        let runner = Runner::new(
            self.hub,
            self.cell,
            scenario.timeout.map(|d| d.0),
            self.dialer,
        )
        .with_actor(self.actor)
        .with_process(self.process)
        .unarranged(self.unarranged)
        .ending_at_finding(self.end_at_finding)
        .reporting_progress();
        // Boxed: what an idle run holds is the state it waits in, not the runner's largest.
        tokio::select! {
            outcome = Box::pin(runner.run(scenario)) => Some(outcome),
            () = shutdown => None,
        }
    }
}
