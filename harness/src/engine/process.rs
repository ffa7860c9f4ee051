//! The peer as a process the run controls: the system under test the double started
//! (`--exec`), or, in the self-test, the other double running in this process. `expect_exit`,
//! `expect_output` and `restart_peer` steps use it; a run with none does not apply to them.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use crate::process::{Exited, OutputLog, ProcessReport, Sut, SutError};

/// Why the peer did not start again: a `restart_peer` step says so as a set-up error.
#[derive(Debug, thiserror::Error)]
pub enum RestartError {
    /// The system under test's command would not start again.
    #[error(transparent)]
    Sut(#[from] SutError),
    /// The other double, run in this process, did not say it was back in time.
    #[error("the other double did not start again")]
    InProcess {
        /// How long it was given.
        within: std::time::Duration,
    },
}

/// A future a [`PeerProcess`] gives.
pub type ProcessFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The peer's process, as a step sees it.
pub trait PeerProcess: Send + Sync + std::fmt::Debug {
    /// What it prints, when the run sees it.
    fn output(&self) -> Option<Arc<OutputLog>>;
    /// Waits until it ends, or `deadline`; `None` when it still runs.
    fn wait_exit(&self, deadline: Instant) -> ProcessFuture<'_, Option<Exited>>;
    /// Stops it and starts it again on the same state.
    fn restart(&self) -> ProcessFuture<'_, Result<(), RestartError>>;
    /// What the report says of it.
    fn report(&self) -> Option<ProcessReport>;
}

impl PeerProcess for Sut {
    fn output(&self) -> Option<Arc<OutputLog>> {
        Some(Sut::output(self).clone())
    }

    fn wait_exit(&self, deadline: Instant) -> ProcessFuture<'_, Option<Exited>> {
        Box::pin(Sut::wait_exit(self, deadline))
    }

    fn restart(&self) -> ProcessFuture<'_, Result<(), RestartError>> {
        Box::pin(async move { Ok(Sut::restart(self).await?) })
    }

    fn report(&self) -> Option<ProcessReport> {
        Some(Sut::report(self))
    }
}

/// Why a process step does not apply, when the run has no process of the peer.
pub const NO_PROCESS: &str =
    "needs the peer's process: start the system under test with --exec (or a scenario's `sut:`)";
