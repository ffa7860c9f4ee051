//! What the fuzz targets (`fuzz_*.rs`) share: their case count and a watchdog.

use std::sync::mpsc;
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::{FileFailurePersistence, TestCaseError};

/// How long one case may take before it counts as a hang. Generous: a debug build on a busy
/// two-core machine is slow, and a real hang never ends anyway.
const DEADLINE: Duration = Duration::from_secs(20);

/// The stack each case runs on: what a test thread and a tokio worker get by default, so an
/// input that recurses too deep for the doubles overflows here too.
const STACK: usize = 2 * 1024 * 1024;

/// A config running `default_cases` cases, unless `PROPTEST_CASES` says otherwise (a long run).
/// `ProptestConfig::with_cases` would ignore the variable, so only its absence sets the count.
pub fn config(default_cases: u32) -> ProptestConfig {
    let mut config = ProptestConfig::default();
    if std::env::var_os("PROPTEST_CASES").is_none() {
        config.cases = default_cases;
    }
    // A hang costs DEADLINE per shrinking step: stop shrinking after a few rather than for ever.
    config.max_shrink_time = 60_000;
    // Beside the test file (`fuzz_decoder.proptest-regressions`): proptest's default looks for
    // a `src/lib.rs`, which an integration test has not, and warns on every failure.
    config.failure_persistence = Some(Box::new(FileFailurePersistence::WithSource(
        "proptest-regressions",
    )));
    config
}

/// Runs `f` on a thread of its own and fails the case if it panics or does not end within
/// the deadline: proptest alone would catch the panic but wait for a hang forever.
pub fn within<T: Send + 'static>(
    what: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, TestCaseError> {
    let (tx, rx) = mpsc::channel();
    std::thread::Builder::new()
        .name(format!("fuzz: {what}"))
        .stack_size(STACK)
        .spawn(move || {
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
            let _ = tx.send(outcome);
        })
        .map_err(|e| TestCaseError::fail(format!("cannot start a thread: {e}")))?;
    match rx.recv_timeout(DEADLINE) {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(panic)) => {
            let why = panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("(not a string)");
            Err(TestCaseError::fail(format!("{what} panicked: {why}")))
        }
        // The thread is left running: there is no way to stop it, and the test fails anyway.
        Err(_) => Err(TestCaseError::fail(format!(
            "{what} did not end within {DEADLINE:?}"
        ))),
    }
}
