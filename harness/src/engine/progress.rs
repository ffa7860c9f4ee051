//! How a run is getting on, for whoever watches it from outside: the step running now, each
//! step's end, each finding as it is made, and the named signals a test program raises for
//! `wait_for_signal` steps. `--events` prints these as JSON lines; the control API reads them.

use std::collections::BTreeSet;
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

use serde::Serialize;
use tokio::sync::{Notify, broadcast};

use super::verdict::{StepStatus, StepVerdict};
use crate::finding::Finding;

/// How many events a watcher may fall behind before it misses the oldest.
const EVENTS_BUFFERED: usize = 1024;

/// How many distinct signals a run keeps (a program raising endless names gets an error).
pub const SIGNALS_KEPT: usize = 256;

/// The longest signal name.
pub const SIGNAL_NAME_BYTES: usize = 128;

/// Why a signal was not raised (the control API answers 400 with it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SignalError {
    /// Its name is empty or longer than [`SIGNAL_NAME_BYTES`].
    #[error("a signal's name has 1 to {} bytes", SIGNAL_NAME_BYTES)]
    Name,
    /// The signals' lock was poisoned by a panic elsewhere.
    #[error("signals are unavailable")]
    Unavailable,
    /// A new name, with [`SIGNALS_KEPT`] raised already.
    #[error("a run keeps at most {} signals", SIGNALS_KEPT)]
    TooMany,
}

/// Something that happened in a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum RunEvent {
    /// A step began.
    StepStarted {
        /// Its place (`3`, `5.2`).
        index: String,
        /// What it does.
        title: String,
        /// Its line in the scenario file.
        line: u64,
    },
    /// A step ended.
    StepEnded {
        /// Its place.
        index: String,
        /// What it did.
        title: String,
        /// Its line.
        line: u64,
        /// How it came out.
        status: StepStatus,
        /// The rule it found broken, when it failed on one.
        #[serde(skip_serializing_if = "Option::is_none")]
        rule: Option<String>,
        /// Why it failed, erred or did not apply.
        #[serde(skip_serializing_if = "Option::is_none")]
        summary: Option<String>,
    },
    /// A monitor found the peer breaking a rule.
    Finding {
        /// The rule.
        rule: String,
        /// What the peer did.
        summary: String,
        /// On which link.
        #[serde(skip_serializing_if = "Option::is_none")]
        link: Option<u32>,
    },
    /// A test program raised a signal.
    Signal {
        /// Its name.
        name: String,
    },
}

impl RunEvent {
    /// The event of a step's end.
    pub fn ended(step: &StepVerdict) -> Self {
        let failure = step.failure.as_ref();
        RunEvent::StepEnded {
            index: step.index.clone(),
            title: step.title.clone(),
            line: step.line,
            status: step.status,
            rule: failure.and_then(|f| f.rule.clone()),
            summary: failure
                .map(|f| f.summary.clone())
                .or_else(|| step.not_applicable.clone()),
        }
    }

    /// The event of a finding.
    pub fn found(finding: &Finding) -> Self {
        RunEvent::Finding {
            rule: finding.rule.clone(),
            summary: finding.summary.clone(),
            link: finding.link,
        }
    }
}

/// The step running now.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[allow(missing_docs)] // fields whose names say it all go undocumented
pub struct CurrentStep {
    /// Its place.
    pub index: String,
    /// What it does.
    pub title: String,
    pub line: u64,
}

/// A run's progress, shared by its runner, its monitors and its watchers.
#[derive(Debug)]
pub struct Progress {
    /// Made when the first watcher subscribes: its buffer of [`EVENTS_BUFFERED`] slots (about
    /// 130 kB) is most of an idle device's memory otherwise, and a fleet's devices have no
    /// watcher.
    events: OnceLock<broadcast::Sender<RunEvent>>,
    current: Mutex<Option<CurrentStep>>,
    ended: Mutex<usize>,
    signals: Mutex<BTreeSet<String>>,
    signalled: Notify,
}

impl Default for Progress {
    fn default() -> Self {
        Self {
            events: OnceLock::new(),
            current: Mutex::new(None),
            ended: Mutex::new(0),
            signals: Mutex::new(BTreeSet::new()),
            signalled: Notify::new(),
        }
    }
}

impl Progress {
    /// Every event from now on (a watcher that falls far behind misses the oldest).
    pub fn subscribe(&self) -> broadcast::Receiver<RunEvent> {
        self.events
            .get_or_init(|| broadcast::Sender::new(EVENTS_BUFFERED))
            .subscribe()
    }

    /// Tells the watchers.
    pub fn tell(&self, event: RunEvent) {
        // No watcher is no error; before the first there is no channel to tell.
        if let Some(events) = self.events.get() {
            let _ = events.send(event);
        }
    }

    /// A step began.
    pub fn step_started(&self, index: &str, title: &str, line: u64) {
        let step = CurrentStep {
            index: index.to_string(),
            title: title.to_string(),
            line,
        };
        if let Ok(mut current) = self.current.lock() {
            *current = Some(step.clone());
        }
        self.tell(RunEvent::StepStarted {
            index: step.index,
            title: step.title,
            line,
        });
    }

    /// A step ended.
    pub fn step_ended(&self, step: &StepVerdict) {
        if let Ok(mut current) = self.current.lock() {
            *current = None;
        }
        if let Ok(mut ended) = self.ended.lock() {
            *ended += 1;
        }
        self.tell(RunEvent::ended(step));
    }

    /// The step running now, if one is.
    pub fn current(&self) -> Option<CurrentStep> {
        self.current.lock().ok().and_then(|c| c.clone())
    }

    /// How many steps have ended.
    pub fn steps_ended(&self) -> usize {
        self.ended.lock().map(|e| *e).unwrap_or_default()
    }

    /// Raises the signal `name`: a `wait_for_signal` step waiting for it goes on, and one that
    /// comes later finds it raised.
    pub fn signal(&self, name: &str) -> Result<(), SignalError> {
        if name.is_empty() || name.len() > SIGNAL_NAME_BYTES {
            return Err(SignalError::Name);
        }
        {
            let mut signals = self.signals.lock().map_err(|_| SignalError::Unavailable)?;
            if !signals.contains(name) && signals.len() >= SIGNALS_KEPT {
                return Err(SignalError::TooMany);
            }
            signals.insert(name.to_string());
        }
        self.signalled.notify_waiters();
        self.tell(RunEvent::Signal {
            name: name.to_string(),
        });
        Ok(())
    }

    /// Waits until `name` is raised, or `deadline`; whether it was.
    pub async fn wait_signal(&self, name: &str, deadline: Instant) -> bool {
        loop {
            let notified = self.signalled.notified();
            tokio::pin!(notified);
            // Registered before looking, so a signal raised in between is not missed.
            notified.as_mut().enable();
            if self.signals.lock().is_ok_and(|s| s.contains(name)) {
                return true;
            }
            if tokio::time::timeout_at(deadline.into(), notified)
                .await
                .is_err()
            {
                return false;
            }
        }
    }

    /// The signals raised so far.
    pub fn signals(&self) -> Vec<String> {
        self.signals
            .lock()
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_signal_raised_before_or_while_waiting_is_seen_and_a_missing_one_times_out() {
        let progress = std::sync::Arc::new(Progress::default());
        progress.signal("early").expect("raised");
        let soon = Instant::now() + Duration::from_millis(50);
        assert!(progress.wait_signal("early", soon).await);
        let raiser = progress.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            raiser.signal("later").expect("raised");
        });
        assert!(
            progress
                .wait_signal("later", Instant::now() + Duration::from_secs(5))
                .await
        );
        assert!(
            !progress
                .wait_signal("never", Instant::now() + Duration::from_millis(30))
                .await
        );
    }

    #[test]
    fn signal_names_and_counts_are_bounded() {
        let progress = Progress::default();
        assert!(progress.signal("").is_err());
        assert!(progress.signal(&"x".repeat(SIGNAL_NAME_BYTES + 1)).is_err());
        for n in 0..SIGNALS_KEPT {
            progress.signal(&format!("s{n}")).expect("room");
        }
        assert!(progress.signal("one-too-many").is_err());
        assert!(
            progress.signal("s0").is_ok(),
            "raising a known one again is fine"
        );
    }

    #[test]
    fn watchers_hear_steps_in_order() {
        let progress = Progress::default();
        let mut events = progress.subscribe();
        progress.step_started("1", "expect hello", 7);
        assert_eq!(progress.current().map(|c| c.line), Some(7));
        progress.step_ended(&StepVerdict {
            index: "1".into(),
            line: 7,
            title: "expect hello".into(),
            status: StepStatus::Passed,
            elapsed_ms: 1.0,
            started_ms: 0.0,
            failure: None,
            not_applicable: None,
            rule: None,
        });
        assert_eq!(progress.current(), None);
        assert_eq!(progress.steps_ended(), 1);
        assert!(matches!(
            events.try_recv(),
            Ok(RunEvent::StepStarted { line: 7, .. })
        ));
        assert!(matches!(
            events.try_recv(),
            Ok(RunEvent::StepEnded {
                status: StepStatus::Passed,
                ..
            })
        ));
    }
}
