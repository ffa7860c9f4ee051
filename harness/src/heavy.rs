//! Work on one big message (parsing, copying, serializing tens of megabytes) done so that the
//! runtime's other tasks go on meanwhile.
//!
//! A peer's 37 MB prompt costs a worker hundreds of milliseconds of parsing and page faults.
//! Done in an ordinary task it holds that worker's whole queue, timers included: on a 2-core
//! machine two such messages at once stopped every other link and step for more than half a
//! second (the self-test's stall watch saw it), and a turn timed by a deadline failed for it.
//! Handed to [`tokio::task::block_in_place`], the worker's queue moves to another thread and the
//! operating system shares the cores between them.

/// From this size a message's work is heavy: well above any ordinary message, well below the
/// tens of megabytes that stall a worker.
pub const HEAVY_BYTES: usize = 1024 * 1024;

/// Runs `work` on a message of about `bytes`: in place when it is small or the runtime has a
/// single thread (where there is nowhere to move the queue), else with the worker's other tasks
/// handed to another thread first.
pub fn run<T>(bytes: usize, work: impl FnOnce() -> T) -> T {
    let many_threads = tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
    if bytes >= HEAVY_BYTES && many_threads {
        tokio::task::block_in_place(work)
    } else {
        work()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// While the only worker does heavy work, another task of the runtime still runs: the
    /// heavy work waits for it, and without the hand-off would wait in vain.
    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn heavy_work_leaves_the_runtime_to_its_other_tasks() {
        let heard = tokio::spawn(async {
            let (tx, rx) = std::sync::mpsc::channel();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(1)).await;
                let _ = tx.send(());
            });
            run(HEAVY_BYTES, || {
                rx.recv_timeout(Duration::from_secs(10)).is_ok()
            })
        })
        .await
        .expect("the heavy task");
        assert!(heard, "the other task ran while the heavy work went on");
    }

    /// `block_in_place` panics on a current-thread runtime: heavy work there must run in place
    /// (this test panics, and fails, if `run` hands it off anyway).
    #[tokio::test(flavor = "current_thread")]
    async fn a_single_threaded_runtime_runs_it_in_place_without_a_hand_off() {
        let caller = std::thread::current().id();
        assert_eq!(run(HEAVY_BYTES, || std::thread::current().id()), caller);
    }
}
