//! Where a running load puts its figures: one recorder every device of a process shares,
//! stamping each figure with the wall-clock second it happened in.

use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::load::figures::Figures;

/// A running load's figures, shared by its devices (and read by `--metrics` while it runs).
#[derive(Debug)]
pub struct Recorder {
    started: Instant,
    started_unix_ms: u64,
    figures: Mutex<Figures>,
}

impl Default for Recorder {
    fn default() -> Self {
        Self::new()
    }
}

impl Recorder {
    /// A recorder whose run starts now.
    pub fn new() -> Recorder {
        let started_unix_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        Recorder {
            started: Instant::now(),
            started_unix_ms,
            figures: Mutex::new(Figures::default()),
        }
    }

    /// When the run started, in milliseconds since the unix epoch.
    pub fn started_unix_ms(&self) -> u64 {
        self.started_unix_ms
    }

    /// How long it has run.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// The unix second `instant` falls in (measured from the run's start, so the timeline
    /// follows one clock however the system's is set meanwhile).
    fn second_of(&self, instant: Instant) -> u64 {
        let since = instant.saturating_duration_since(self.started);
        (self.started_unix_ms + since.as_millis() as u64) / 1000
    }

    /// Records how long one `name` took, ending now.
    pub fn latency(&self, name: &str, took: Duration, ok: bool) {
        let at = self.second_of(Instant::now());
        if let Ok(mut figures) = self.figures.lock() {
            figures.latency(name, took, ok, at);
        }
    }

    /// Adds `by` to the counter `name`.
    pub fn count(&self, name: &str, by: u64) {
        let at = self.second_of(Instant::now());
        if let Ok(mut figures) = self.figures.lock() {
            figures.count(name, by, at);
        }
    }

    /// Sets the gauge `name` to `level`.
    pub fn gauge(&self, name: &str, level: u64) {
        let at = self.second_of(Instant::now());
        if let Ok(mut figures) = self.figures.lock() {
            figures.gauge(name, level, at);
        }
    }

    /// The figures so far.
    pub fn snapshot(&self) -> Figures {
        self.figures
            .lock()
            .map(|figures| figures.clone())
            .unwrap_or_default()
    }
}
