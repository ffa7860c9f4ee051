//! fake-instance started with `run()` as a task of the test's runtime, for the tests that set
//! its `Options` by hand: the wiring from "it listens" to an address the test can dial, kept in
//! one place. fake-device's tests include this file too (by path), as they start the same
//! instance to link a device to.

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use fake_instance::{Finished, Options, Scenario, StartError};
use tokio::task::JoinHandle;

/// The longest fake-instance may take to listen before the test fails rather than hangs.
const READY_WITHIN: Duration = Duration::from_secs(10);

/// Spawns fake-instance with `options` (and `scenario`) on the current runtime until it ends
/// or `shutdown` completes; its address once it listens, and the task that gives its end.
pub async fn spawn_instance(
    options: Options,
    scenario: Option<Scenario>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> (SocketAddr, JoinHandle<Result<Finished, StartError>>) {
    let (addr_tx, addr_rx) = tokio::sync::oneshot::channel::<SocketAddr>();
    let task = tokio::spawn(fake_instance::run(
        options,
        scenario,
        move |addr| {
            let _ = addr_tx.send(addr);
        },
        shutdown,
    ));
    let addr = tokio::time::timeout(READY_WITHIN, addr_rx)
        .await
        .expect("fake-instance is ready in time")
        .expect("fake-instance starts");
    (addr, task)
}
