//! What the end-to-end tests share: their data files, and fake-instance running a scenario of
//! its own (in-process) against a fake-device the test starts as a process.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use harness::engine::Cell;
use harness::scenario::Side;

/// The fake-device binary.
pub const BIN: &str = env!("CARGO_BIN_EXE_fake-device");

/// A file of `tests/data`.
pub fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

/// Runs fake-instance with the instance-side scenario `scenario` (a file of `tests/data`), calls
/// `device` with its URL once it listens, and gives the scenario's verdict as a report, or
/// `None` when it passed.
pub fn instance_checks(scenario: &str, device: impl FnOnce(String)) -> Option<String> {
    let scenario = harness::scenario::load_file(&data(scenario), Some(Side::Instance))
        .expect("the instance scenario loads");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let (addr_tx, addr_rx) = std::sync::mpsc::channel::<SocketAddr>();
    let options = fake_instance::Options {
        protocols: Some(vec![1, 2]),
        cell: Cell {
            protocol: 2,
            spec: harness::lembas::Spec::V1_1_0,
        },
        patience: Duration::from_secs(5),
        ..fake_instance::Options::default()
    };
    let instance = runtime.spawn(fake_instance::run(
        options,
        Some(scenario),
        move |addr| {
            let _ = addr_tx.send(addr);
        },
        std::future::pending(),
    ));
    let addr = addr_rx
        .recv_timeout(Duration::from_secs(5))
        .expect("fake-instance starts");
    device(format!("http://{addr}"));
    let finished = runtime
        .block_on(async { tokio::time::timeout(Duration::from_secs(30), instance).await })
        .expect("the scenario ends")
        .expect("the instance task ends")
        .expect("fake-instance ran");
    let outcome = finished.outcome.expect("a verdict");
    (!outcome.passed())
        .then(|| harness::report::human::render("fake-instance", &outcome, &finished.recent))
}
