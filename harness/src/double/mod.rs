//! What every double's run does the same way, whatever it plays: bind its port and serve, run
//! the scenario's steps or stay up unattended (a console, its own steps) until told to stop,
//! close its links, and end with what it found. Each double's run is its own set-up (its model,
//! its actor, its server) around these calls; nothing here knows what a double plays.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use crate::embed::Ended;
use crate::engine::runner::Dialer;
use crate::engine::{Actor, Cell, Hub, PeerProcess, RunOutcome, Runner};
use crate::finding::Findings;
use crate::journal::Journal;
use crate::scenario::{Scenario, Spanned, Step};

/// How many of the last messages an ended run keeps for its report.
pub const RECENT_KEPT: usize = 200;

/// Takes the listener a restart handed over (`bound`), or binds `listen`; gives it and the
/// address it has.
pub async fn bind(
    listen: SocketAddr,
    bound: Option<&Arc<std::net::TcpListener>>,
) -> std::io::Result<(tokio::net::TcpListener, SocketAddr)> {
    let listener = match bound {
        Some(bound) => bound
            .try_clone()
            .and_then(tokio::net::TcpListener::from_std)?,
        None => tokio::net::TcpListener::bind(listen).await?,
    };
    let addr = listener.local_addr()?;
    Ok((listener, addr))
}

/// Serves `app` on `listener` until the task is aborted. Connections that send no request, or
/// sit idle, are closed, and TCP_NODELAY is set (see [`crate::transport::guarded`]).
pub fn serve(
    listener: tokio::net::TcpListener,
    app: axum::Router,
    what: &'static str,
) -> tokio::task::JoinHandle<()> {
    let app = app.into_make_service_with_connect_info::<crate::transport::guarded::RemoteAddr>();
    let listener = crate::transport::guarded::GuardedListener::new(listener);
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!("{what} stopped: {e}");
        }
    })
}

/// Stops a server [`serve`] started, and waits until its listener is closed: the address is
/// free when this returns (a restart binds it again).
pub async fn stop(server: tokio::task::JoinHandle<()>) {
    server.abort();
    let _ = server.await;
}

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

/// Closes every link still open, saying `reason`; with a `grace`, waits that long at most for
/// the peers to answer the close (so a peer sees a clean close before it is stopped, and a
/// seeded run's journal ends the same way each time).
pub async fn close_links(hub: &Hub, reason: &str, grace: Option<Duration>) {
    let closing: Vec<_> = hub
        .links()
        .into_iter()
        .filter(|link| !link.peer.is_closed())
        .map(|link| {
            link.peer.close(crate::transport::CLOSE_NORMAL, reason);
            link.peer
        })
        .collect();
    if let Some(grace) = grace {
        let _ = tokio::time::timeout(
            grace,
            futures_util::future::join_all(closing.iter().map(|peer| peer.closed())),
        )
        .await;
    }
}

/// What a run ended with: its outcome, what the monitors found and the last messages (the
/// journal is finished first, so a file journal holds every message).
pub fn ended(outcome: Option<RunOutcome>, journal: &Journal, findings: &Findings) -> Ended {
    let findings = findings.all();
    journal.finish();
    Ended {
        outcome,
        findings,
        recent: journal.recent(RECENT_KEPT),
    }
}
