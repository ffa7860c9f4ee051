//! A double left running with no scenario: a console, a test's control API or its own steps
//! drive it until something ends it.

use std::future::Future;
use std::sync::Arc;

use crate::engine::{Actor, Cell, Hub, Runner};
use crate::scenario::{Scenario, Spanned, Step};

/// A double with no scenario: driven from a console on stdin, a test's control API or its own
/// steps, until something ends it.
pub struct Unattended {
    /// The double's hub.
    pub hub: Arc<Hub>,
    /// The cell it runs in.
    pub cell: Cell,
    /// What does the actions.
    pub actor: Arc<dyn Actor>,
    /// Whether actions are read from stdin, one JSON line each.
    pub console: bool,
    /// Steps it does by itself (a peer's `peer.steps`), run once.
    pub steps: Vec<Spanned<Step>>,
    /// Whose steps they are, for the log (`the device's own steps`).
    pub steps_of: &'static str,
    /// The double's name, for the log.
    pub double: &'static str,
}

impl Unattended {
    /// Stays up until `end` is ready; gives what it gave.
    pub async fn until<T>(self, end: impl Future<Output = T>) -> T {
        let console = self.console.then(|| {
            tokio::spawn(crate::engine::console::read_actions(
                self.actor.clone(),
                tokio::io::stdin(),
            ))
        });
        // Only steps read the inbox: without any (or once they are done) the peer's messages
        // are not kept, so a closed link leaves nothing of its own behind.
        if self.steps.is_empty() {
            self.hub.keep_nothing();
        }
        let own_steps = (!self.steps.is_empty()).then(|| {
            let runner =
                Runner::new(self.hub.clone(), self.cell, None, None).with_actor(self.actor);
            let steps = Scenario::of_steps(self.steps_of, self.steps);
            let (hub, steps_of, double) = (self.hub.clone(), self.steps_of, self.double);
            tokio::spawn(async move {
                let outcome = runner.run(&steps).await;
                hub.keep_nothing();
                if !outcome.passed() {
                    tracing::warn!(
                        "{steps_of} did not all run: {}",
                        crate::report::human::render(double, &outcome, &[])
                    );
                }
            })
        });
        let ended = end.await;
        if let Some(task) = own_steps {
            task.abort();
        }
        if let Some(task) = console {
            task.abort();
        }
        ended
    }
}
