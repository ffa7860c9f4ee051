//! Notices when timers ran late: a timer of the runtime that fired long after it was due (a
//! task held a worker, or the machine was busy), or this process's own thread that woke long
//! after its sleep (the machine did not run it). Many runs share one runtime and a busy 2-core
//! machine; a step that failed its deadline inside such a stall may have failed for it, not for
//! the double it judged, and the report says so instead of leaving it a mystery. (It is how the
//! self-test's rare failures were traced to big messages held on a worker:
//! docs/book/src/performance.md.)

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How often each watcher looks.
const TICK: Duration = Duration::from_millis(50);
/// Lateness worth reporting: well past scheduling noise, a tenth of the shortest deadline.
const NOTABLE: Duration = Duration::from_millis(500);

/// What was late: the runtime's timers (its workers were busy or blocked), or a thread of its
/// own (the whole process was not scheduled).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stalled {
    /// A tokio timer fired late.
    Runtime,
    /// A plain thread woke late.
    Process,
}

/// One stall: when it began (since the watch started), how late the wake-up was, and what was
/// running when it ended.
#[derive(Debug, Clone)]
pub struct Stall {
    /// Which watcher saw it.
    pub kind: Stalled,
    /// When the late sleep began, since the watch started.
    pub at: Duration,
    /// How much later than due it woke.
    pub late: Duration,
    /// What the watch's owner said was running when the stall was seen.
    pub during: String,
}

/// Both watchers, running until [`StallWatch::stop`].
#[derive(Debug)]
pub struct StallWatch {
    seen: Arc<Mutex<Vec<Stall>>>,
    stop: Arc<std::sync::atomic::AtomicBool>,
    runtime_task: tokio::task::JoinHandle<()>,
}

impl StallWatch {
    /// Starts watching (on the current tokio runtime, and on a thread of its own); `running`
    /// says what was running, when a stall is seen.
    pub fn start(running: impl Fn() -> String + Send + Sync + 'static) -> Self {
        let running = Arc::new(running);
        let began = Instant::now();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let record = {
            let seen = seen.clone();
            move |kind, slept_from: Instant| {
                let late = slept_from.elapsed().saturating_sub(TICK);
                if late >= NOTABLE
                    && let Ok(mut seen) = seen.lock()
                {
                    seen.push(Stall {
                        kind,
                        at: slept_from - began,
                        late,
                        during: running(),
                    });
                }
            }
        };
        let runtime_task = {
            let record = record.clone();
            tokio::spawn(async move {
                loop {
                    let from = Instant::now();
                    tokio::time::sleep(TICK).await;
                    record(Stalled::Runtime, from);
                }
            })
        };
        {
            let stop = stop.clone();
            // A thread, so it sees the process stall even when the runtime's workers are busy.
            let _ = std::thread::Builder::new()
                .name("stall-watch".into())
                .spawn(move || {
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        let from = Instant::now();
                        std::thread::sleep(TICK);
                        record(Stalled::Process, from);
                    }
                });
        }
        Self {
            seen,
            stop,
            runtime_task,
        }
    }

    /// Stops both watchers; the stalls they saw, in the order seen.
    pub fn stop(self) -> Vec<Stall> {
        // Dropping stops them.
        self.seen
            .lock()
            .map(|seen| seen.clone())
            .unwrap_or_default()
    }
}

impl Drop for StallWatch {
    fn drop(&mut self) {
        self.runtime_task.abort();
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// One line on what the watch saw, or none when nothing was late.
pub fn summary(stalls: &[Stall]) -> Option<String> {
    let longest = stalls.iter().max_by_key(|s| s.late)?;
    let what = match longest.kind {
        Stalled::Runtime => {
            "a timer of the runtime fired late (a task held a worker, or the machine was busy)"
        }
        Stalled::Process => "a thread of the process woke late (the machine did not run it)",
    };
    Some(format!(
        "timers ran late {} time(s) by {} ms or more; the longest: {what}, by {} ms at {:.1}s, \
         while running {}. A deadline that failed in such a window may have failed for it.",
        stalls.len(),
        NOTABLE.as_millis(),
        longest.late.as_millis(),
        longest.at.as_secs_f64(),
        longest.during,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_blocked_runtime_is_seen() {
        let watch = StallWatch::start(|| "a test".into());
        tokio::time::sleep(Duration::from_millis(200)).await;
        // The runtime's only thread blocked: its timer cannot fire until the thread is free.
        std::thread::sleep(Duration::from_millis(900));
        tokio::time::sleep(Duration::from_millis(100)).await;
        let stalls = watch.stop();
        assert!(
            stalls
                .iter()
                .any(|s| s.kind == Stalled::Runtime && s.late >= NOTABLE),
            "the blocked worker is seen: {stalls:?}"
        );
        assert!(
            summary(&stalls)
                .is_some_and(|s| s.contains("a timer of the runtime") && s.contains("a test"))
        );
    }

    #[test]
    fn nothing_late_says_nothing() {
        assert_eq!(summary(&[]), None);
    }
}
