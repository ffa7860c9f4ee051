//! What the end-to-end tests share: their data files, and fake-instance running a scenario of
//! its own (in-process) against a fake-device the test starts as a process.

// fake-instance's tests start it, and run their command, the same way: one copy of that wiring
// for both crates' tests.
#[allow(dead_code)] // each test file uses what it needs of this module
#[path = "../../../fake-instance/tests/common/process.rs"]
pub mod process;
#[path = "../../../fake-instance/tests/common/spawned.rs"]
mod spawned;
#[allow(unused_imports)] // each test file uses what it needs of this module
pub use spawned::spawn_instance;

use std::path::{Path, PathBuf};
use std::time::Duration;

use harness::engine::Cell;
use harness::scenario::Side;

/// The fake-device binary.
#[allow(dead_code)] // each test file uses what it needs of this module
pub const BIN: &str = env!("CARGO_BIN_EXE_fake-device");

/// A file of `tests/data`.
#[allow(dead_code)] // each test file uses what it needs of this module
pub fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

/// Runs fake-instance with the instance-side scenario `scenario` (a file of `tests/data`), calls
/// `device` with its URL once it listens, and gives the scenario's verdict as a report, or
/// `None` when it passed.
#[allow(dead_code)] // each test file uses what it needs of this module
pub fn instance_checks(scenario: &str, device: impl FnOnce(String)) -> Option<String> {
    let scenario = harness::scenario::load_file(&data(scenario), Some(Side::Instance))
        .expect("the instance scenario loads");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let options = fake_instance::Options {
        protocols: Some(vec![1, 2]),
        cell: Cell::lembas(2, harness::lembas::Spec::V1_1_0),
        patience: Duration::from_secs(5),
        ..fake_instance::Options::default()
    };
    let (addr, instance) = runtime.block_on(spawn_instance(
        options,
        Some(scenario),
        std::future::pending(),
    ));
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
