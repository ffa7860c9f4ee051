//! The inbox: requests and notifications from the peer, kept until an expect step consumes
//! them, so a message that arrives before its step is not lost.

use std::time::Duration;

use serde_json::Value;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::pattern::{MatchOutcome, Pattern};

/// How many messages the inbox keeps; older unconsumed ones are dropped first. A real peer in a
/// long simulated run must not grow memory without bound.
const CAPACITY: usize = 10_000;

/// One message in the inbox.
#[derive(Debug, Clone)]
pub struct Entry {
    /// Arrival order, from 1.
    pub seq: u64,
    /// The link it came on.
    pub link: u32,
    /// The whole message.
    pub message: Value,
    /// Whether an expect step consumed it.
    pub consumed: bool,
}

/// The inbox itself.
#[derive(Debug, Default)]
pub struct Inbox {
    entries: std::sync::Mutex<Vec<Entry>>,
    next_seq: std::sync::atomic::AtomicU64,
    arrived: Notify,
}

impl Inbox {
    /// Adds a message and wakes whoever waits.
    pub fn push(&self, link: u32, message: Value) {
        let seq = self
            .next_seq
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            + 1;
        if let Ok(mut entries) = self.entries.lock() {
            if entries.len() >= CAPACITY {
                entries.remove(0);
            }
            entries.push(Entry {
                seq,
                link,
                message,
                consumed: false,
            });
        }
        self.arrived.notify_waiters();
    }

    /// Consumes the oldest unconsumed message matching `pattern` that arrived after `after`.
    pub fn take(&self, pattern: &Pattern, after: u64) -> Option<(Entry, MatchOutcome)> {
        let mut entries = self.entries.lock().ok()?;
        for entry in entries.iter_mut().filter(|e| !e.consumed && e.seq > after) {
            let outcome = pattern.matches(&entry.message);
            if outcome.is_match() {
                entry.consumed = true;
                return Some((entry.clone(), outcome));
            }
        }
        None
    }

    /// The newest arrival's number (0 before any).
    pub fn last_seq(&self) -> u64 {
        self.next_seq.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Waits until `pattern` is in the inbox (consuming it) or the deadline passes.
    pub async fn wait_take(
        &self,
        pattern: &Pattern,
        after: u64,
        deadline: Instant,
    ) -> Option<(Entry, MatchOutcome)> {
        loop {
            // Register interest before looking, so an arrival between the look and the wait
            // still wakes us.
            let arrived = self.arrived.notified();
            tokio::pin!(arrived);
            arrived.as_mut().enable();
            if let Some(found) = self.take(pattern, after) {
                return Some(found);
            }
            if tokio::time::timeout_at(deadline, arrived).await.is_err() {
                return None;
            }
        }
    }

    /// Watches for `duration`: the first message matching `pattern` that arrives after `after`,
    /// if any (not consumed: expecting nothing takes nothing).
    pub async fn watch(&self, pattern: &Pattern, after: u64, duration: Duration) -> Option<Entry> {
        let deadline = Instant::now() + duration;
        loop {
            let arrived = self.arrived.notified();
            tokio::pin!(arrived);
            arrived.as_mut().enable();
            if let Ok(entries) = self.entries.lock()
                && let Some(hit) = entries
                    .iter()
                    .find(|e| e.seq > after && pattern.matches(&e.message).is_match())
            {
                return Some(hit.clone());
            }
            if tokio::time::timeout_at(deadline, arrived).await.is_err() {
                return None;
            }
        }
    }

    /// The unconsumed messages, newest last (for "nearest message" in reports).
    pub fn unconsumed(&self) -> Vec<Entry> {
        self.entries
            .lock()
            .map(|e| e.iter().filter(|e| !e.consumed).cloned().collect())
            .unwrap_or_default()
    }

    /// Every message kept, newest last.
    pub fn all(&self) -> Vec<Entry> {
        self.entries.lock().map(|e| e.clone()).unwrap_or_default()
    }
}
