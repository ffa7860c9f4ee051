//! The peer as a process the run controls: the system under test the double started
//! (`--exec`), or, in the self-test, the other double running in this process. `expect_exit`,
//! `expect_output` and `restart_peer` steps use it; a run with none does not apply to them.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use crate::process::{Exited, OutputLog, ProcessReport, Sut};

/// A future a [`PeerProcess`] gives.
pub type ProcessFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The peer's process, as a step sees it.
pub trait PeerProcess: Send + Sync + std::fmt::Debug {
    /// What it prints, when the run sees it.
    fn output(&self) -> Option<Arc<OutputLog>>;
    /// Waits until it ends, or `deadline`; `None` when it still runs.
    fn wait_exit(&self, deadline: Instant) -> ProcessFuture<'_, Option<Exited>>;
    /// Stops it and starts it again on the same state.
    fn restart(&self) -> ProcessFuture<'_, Result<(), String>>;
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

    fn restart(&self) -> ProcessFuture<'_, Result<(), String>> {
        Box::pin(Sut::restart(self))
    }

    fn report(&self) -> Option<ProcessReport> {
        Some(Sut::report(self))
    }
}

/// Why a process step does not apply, when the run has no process of the peer.
pub const NO_PROCESS: &str =
    "needs the peer's process: start the system under test with --exec (or a scenario's `sut:`)";
