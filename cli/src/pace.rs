//! How many runs go at once: as many as the runtime keeps time with, up to a ceiling.
//!
//! Most self-test and matrix runs spend their time waiting on a deadline, not computing, so a
//! fixed small number at once leaves the machine idle; a fixed large number overloads it when
//! many runs compute together, and then a double's timers fire late and a run fails on a
//! deadline. So a run is admitted when a slot under the ceiling is free *and* there is room:
//! - the runtime keeps time: a timer of ours that fires more than 15 ms late says
//!   the runs already admitted wait to be polled, and none more starts (starting a run costs
//!   more CPU than its waiting; a debug build's startup burst made timers 2 s late while the
//!   machine's CPU reading still showed room);
//! - the machine's CPU (all of it, read from `/proc/stat`: another build counts) says how many
//!   start at once: the idler, the more; a busy machine still gets one a reading while our
//!   runtime keeps time. Where `/proc/stat` cannot be read, one a reading.
//!
//! The reading, and what it allows, is one for the whole process: two paces at once in one
//! process (two `#[tokio::test]`s each running a self-test) would otherwise each admit a full
//! allowance from the same reading, and overload the machine twice over.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use tokio::sync::{Mutex, OwnedSemaphorePermit, Semaphore};

/// How often the machine's load is read.
const SAMPLE_EVERY: Duration = Duration::from_millis(40);
/// A timer this late says the runtime is behind: the runs it has wait to be polled, and one
/// more would make them later still (a debug build's runs can saturate the runtime while the
/// machine's CPU reading still shows room, as two cores' worth of work comes in bursts).
const LATE_CEILING: Duration = Duration::from_millis(15);
/// A run waits at most this long for room, so a machine busy with something else still gets
/// its runs done, one at a time.
const LONGEST_HOLD: Duration = Duration::from_secs(1);

/// Admits runs (see the module's documentation).
#[derive(Debug, Clone)]
pub struct Pace {
    slots: Arc<Semaphore>,
    ceiling: usize,
}

/// The process's one reading of the machine's load (see the module's documentation).
fn machine_load() -> &'static Mutex<Load> {
    static LOAD: OnceLock<Mutex<Load>> = OnceLock::new();
    LOAD.get_or_init(|| Mutex::new(Load::new()))
}

impl Pace {
    /// At most `ceiling` runs at once, fewer while the CPU is busy.
    pub fn new(ceiling: usize) -> Self {
        let ceiling = ceiling.max(1);
        Pace {
            slots: Arc::new(Semaphore::new(ceiling)),
            ceiling,
        }
    }

    /// Waits for a slot and for room on the CPU; the run holds the permit while it runs (none
    /// only were the slots closed, which nothing does).
    pub async fn admit(&self) -> Option<OwnedSemaphorePermit> {
        let permit = self.slots.clone().acquire_owned().await.ok();
        // With nothing else of ours running there is nothing to wait for.
        if self.slots.available_permits() + 1 < self.ceiling {
            machine_load().lock().await.wait_for_room().await;
        }
        permit
    }
}

/// The machine's CPU load, sampled, and how many runs the latest sample still allows.
#[derive(Debug)]
struct Load {
    last: Option<(CpuTimes, Instant)>,
    busy: Option<f64>,
    allowance: usize,
}

impl Load {
    fn new() -> Self {
        Load {
            last: CpuTimes::read().map(|t| (t, Instant::now())),
            busy: None,
            allowance: 1,
        }
    }

    /// Returns when one more run may start.
    async fn wait_for_room(&mut self) {
        if self.last.is_none() {
            return; // no /proc/stat: the ceiling alone paces
        }
        let started = Instant::now();
        loop {
            if self.allowance > 0 {
                self.allowance -= 1;
                return;
            }
            if started.elapsed() >= LONGEST_HOLD {
                return;
            }
            let asked = Instant::now();
            tokio::time::sleep(SAMPLE_EVERY).await;
            self.sample(asked.elapsed().saturating_sub(SAMPLE_EVERY));
        }
    }

    /// Reads the CPU times again and sets how many runs may start before the next reading: the
    /// more idle the machine, the more (a run's start costs more CPU than its wait); none while
    /// the runtime is behind (its timer came `late`), whatever the CPU says.
    fn sample(&mut self, late: Duration) {
        if late > LATE_CEILING {
            self.allowance = 0;
            return;
        }
        let Some(now) = CpuTimes::read() else {
            self.allowance = 1;
            return;
        };
        if let Some((before, _)) = &self.last {
            self.busy = now.busy_since(before);
        }
        self.last = Some((now, Instant::now()));
        // A machine busy with something else still gets one run a reading while our runtime
        // keeps time: its lateness, not the CPU's reading, says when we are too many.
        let by_cpu = match self.busy {
            Some(busy) if busy < 0.4 => 4,
            Some(busy) if busy < 0.65 => 2,
            _ => 1,
        };
        // A runtime falling behind gets one run at a time before it gets none.
        self.allowance = if late > LATE_CEILING / 3 {
            by_cpu.min(1)
        } else {
            by_cpu
        };
    }
}

/// The machine's cumulative CPU times, in clock ticks, from the first line of `/proc/stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct CpuTimes {
    idle: u64,
    total: u64,
}

impl CpuTimes {
    fn read() -> Option<CpuTimes> {
        let text = std::fs::read_to_string("/proc/stat").ok()?;
        CpuTimes::parse(text.lines().next()?)
    }

    /// `cpu  user nice system idle iowait irq softirq steal ...`: idle and iowait are idle.
    fn parse(line: &str) -> Option<CpuTimes> {
        let mut fields = line.split_whitespace();
        if fields.next()? != "cpu" {
            return None;
        }
        let ticks: Vec<u64> = fields
            .take(8)
            .map(|f| f.parse().ok())
            .collect::<Option<_>>()?;
        if ticks.len() < 5 {
            return None;
        }
        Some(CpuTimes {
            idle: ticks[3] + ticks[4],
            total: ticks.iter().sum(),
        })
    }

    /// The share of CPU time spent busy since `before`; none when no tick has passed.
    fn busy_since(&self, before: &CpuTimes) -> Option<f64> {
        let total = self.total.checked_sub(before.total)?;
        let idle = self.idle.checked_sub(before.idle)?;
        (total > 0).then(|| 1.0 - idle.min(total) as f64 / total as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_line_of_proc_stat_is_read_with_iowait_as_idle() {
        let times = CpuTimes::parse("cpu  100 5 50 800 40 0 5 0 0 0").expect("a cpu line");
        assert_eq!(
            times,
            CpuTimes {
                idle: 840,
                total: 1000
            }
        );
        assert_eq!(CpuTimes::parse("cpu0 1 2 3 4 5"), None, "one core's line");
        assert_eq!(CpuTimes::parse("cpu  1 2 x 4 5"), None);
    }

    #[test]
    fn busy_is_the_share_of_ticks_not_idle_since_the_last_reading() {
        let before = CpuTimes {
            idle: 800,
            total: 1000,
        };
        let after = CpuTimes {
            idle: 850,
            total: 1200,
        };
        assert_eq!(after.busy_since(&before), Some(0.75));
        assert_eq!(before.busy_since(&before), None, "no tick passed");
        assert_eq!(before.busy_since(&after), None, "times never go back");
    }

    #[tokio::test]
    async fn no_more_runs_than_the_ceiling_hold_a_slot_at_once() {
        let pace = Pace::new(2);
        let a = pace.admit().await;
        let _b = pace.admit().await;
        let third = tokio::time::timeout(Duration::from_millis(100), pace.admit()).await;
        assert!(third.is_err(), "a third run waits for a slot");
        drop(a);
        let third = tokio::time::timeout(Duration::from_secs(3), pace.admit()).await;
        assert!(third.is_ok(), "a freed slot is taken");
    }
}
