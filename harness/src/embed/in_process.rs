//! A double as the scenario's peer, run in this process (the self-test): a
//! [`PeerProcess`] whose restart ends the double's run and starts it again on the same state, as
//! `restart_peer` does to a real peer's process, and whose exit is the code the double's command
//! would have ended with, and whose output is what that command would have said to the person
//! running it when it stopped (its own log goes to the self-test's, where no step can tell them
//! apart).

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::engine::PeerProcess;
use crate::engine::process::ProcessFuture;
use crate::process::{Exited, OutputLog, ProcessReport, Stream};
use tokio::sync::{Notify, oneshot, watch};

/// How long a restart may take before the step says the peer did not come back.
const RESTART_WITHIN: Duration = Duration::from_secs(30);

/// The other double's runs, as one process.
#[derive(Debug)]
pub struct InProcessPeer {
    restart: Notify,
    ack: Mutex<Option<oneshot::Sender<()>>>,
    exited: watch::Sender<Option<Exited>>,
    /// What the double's command would have printed for the person running it.
    said: Arc<OutputLog>,
    /// Its run, counted from 1: one more at each restart.
    run: AtomicU32,
}

impl InProcessPeer {
    /// A peer that has not started yet.
    pub fn new() -> Arc<Self> {
        Arc::new(InProcessPeer {
            restart: Notify::new(),
            ack: Mutex::new(None),
            exited: watch::Sender::new(None),
            said: Arc::new(OutputLog::default()),
            run: AtomicU32::new(1),
        })
    }

    /// Resolves when a restart is asked of the current run: part of its shutdown.
    pub async fn restart_asked(&self) {
        self.restart.notified().await;
    }

    /// After a run ended: the restart that ended it, if one did (answer it once the next run is
    /// up).
    pub fn take_restart(&self) -> Option<oneshot::Sender<()>> {
        let ack = self.ack.lock().ok().and_then(|mut ack| ack.take());
        if ack.is_some() {
            self.run.fetch_add(1, Ordering::Relaxed);
        }
        ack
    }

    /// A line the double's command prints for the person running it (its last words when it
    /// stops, say), as its process's output on `stream`.
    pub fn say(&self, stream: Stream, text: &str) {
        self.said
            .push(self.run.load(Ordering::Relaxed), stream, text);
    }

    /// The double's runs are over, with the code its command would have exited with.
    pub fn ended(&self, code: i32) {
        self.exited.send_replace(Some(Exited {
            code: Some(code),
            signal: None,
        }));
    }
}

impl PeerProcess for InProcessPeer {
    fn output(&self) -> Option<Arc<OutputLog>> {
        // Only what its command would print for a person: its log is the self-test's own.
        Some(self.said.clone())
    }

    fn wait_exit(&self, deadline: Instant) -> ProcessFuture<'_, Option<Exited>> {
        let mut exited = self.exited.subscribe();
        Box::pin(async move {
            match tokio::time::timeout_at(deadline.into(), exited.wait_for(|e| e.is_some())).await {
                Ok(Ok(seen)) => *seen,
                _ => None,
            }
        })
    }

    fn restart(&self) -> ProcessFuture<'_, Result<(), crate::engine::process::RestartError>> {
        Box::pin(async move {
            let (tx, rx) = oneshot::channel();
            if let Ok(mut ack) = self.ack.lock() {
                *ack = Some(tx);
            }
            self.restart.notify_one();
            match tokio::time::timeout(RESTART_WITHIN, rx).await {
                Ok(Ok(())) => Ok(()),
                _ => Err(crate::engine::process::RestartError::InProcess {
                    within: RESTART_WITHIN,
                }),
            }
        })
    }

    fn report(&self) -> Option<ProcessReport> {
        None
    }
}

/// Runs the future `make` gives on a runtime and a thread of its own, and drops that runtime
/// when the future ends: every task the run spawned (a turn still streaming, a timer) ends with
/// it, as a killed process's would, so nothing of one run writes into the state the next starts
/// on. `None` when the thread could not run it.
pub async fn isolated<F, Fut, T>(make: F) -> Option<T>
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = T>,
    T: Send + 'static,
{
    let (done_tx, done_rx) = oneshot::channel();
    let spawned = std::thread::Builder::new()
        .name("in-process peer".into())
        .spawn(move || {
            let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            let result = runtime.block_on(make());
            // Tasks are dropped here; a blocking one is not waited for.
            runtime.shutdown_background();
            let _ = done_tx.send(result);
        });
    if spawned.is_err() {
        return None;
    }
    done_rx.await.ok()
}
