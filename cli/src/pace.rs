//! How many runs go at once: as many as the machine has idle CPU for, up to a ceiling.
//!
//! Most self-test and matrix runs spend their time waiting on a deadline, not computing, so a
//! fixed small number at once leaves the machine idle; a fixed large number overloads it when
//! many runs compute together, and a loaded machine makes a double late and a run fail. So a
//! run is admitted when a slot under the ceiling is free *and* the machine's CPU (all of it,
//! read from `/proc/stat`: another build or a second self-test counts) has room. Where
//! `/proc/stat` cannot be read, the ceiling alone decides.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{Mutex, OwnedSemaphorePermit, Semaphore};

/// How often the machine's load is read.
const SAMPLE_EVERY: Duration = Duration::from_millis(40);
/// Above this share of all cores busy, no run is admitted.
const BUSY_CEILING: f64 = 0.85;
/// A run waits at most this long for room, so a machine busy with something else still gets
/// its runs done, one at a time.
const LONGEST_HOLD: Duration = Duration::from_secs(1);

/// Admits runs (see the module's documentation).
#[derive(Debug, Clone)]
pub struct Pace {
    slots: Arc<Semaphore>,
    ceiling: usize,
    load: Arc<Mutex<Load>>,
}

impl Pace {
    /// At most `ceiling` runs at once, fewer while the CPU is busy.
    pub fn new(ceiling: usize) -> Self {
        let ceiling = ceiling.max(1);
        Pace {
            slots: Arc::new(Semaphore::new(ceiling)),
            ceiling,
            load: Arc::new(Mutex::new(Load::new())),
        }
    }

    /// Waits for a slot and for room on the CPU; the run holds the permit while it runs (none
    /// only were the slots closed, which nothing does).
    pub async fn admit(&self) -> Option<OwnedSemaphorePermit> {
        let permit = self.slots.clone().acquire_owned().await.ok();
        // With nothing else of ours running there is nothing to wait for.
        if self.slots.available_permits() + 1 < self.ceiling {
            self.load.lock().await.wait_for_room().await;
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
            tokio::time::sleep(SAMPLE_EVERY).await;
            self.sample();
        }
    }

    /// Reads the CPU times again and sets how many runs may start before the next reading: the
    /// more idle the machine, the more (a run's start costs more CPU than its wait).
    fn sample(&mut self) {
        let Some(now) = CpuTimes::read() else {
            self.allowance = 1;
            return;
        };
        if let Some((before, _)) = &self.last {
            self.busy = now.busy_since(before);
        }
        self.last = Some((now, Instant::now()));
        self.allowance = match self.busy {
            Some(busy) if busy < 0.4 => 6,
            Some(busy) if busy < 0.65 => 3,
            Some(busy) if busy < BUSY_CEILING => 1,
            Some(_) => 0,
            None => 1,
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
