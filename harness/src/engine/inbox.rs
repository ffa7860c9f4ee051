//! The inbox: requests and notifications from the peer, kept until an expect step consumes
//! them, so a message that arrives before its step is not lost.

use std::time::Duration;

use serde_json::Value;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::pattern::{MatchOutcome, Pattern};
use crate::size::approx_bytes;

/// How many messages the inbox keeps; older consumed ones are dropped first. A real peer in a
/// long simulated run must not grow memory without bound.
const CAPACITY: usize = 10_000;
/// How many bytes of messages it keeps (about: [`approx_bytes`]): a peer's frames may each be
/// tens of megabytes, so a count alone bounds nothing. Room for a few prompts carrying the
/// spec's largest attachments.
const CAPACITY_BYTES: usize = 128 * 1024 * 1024;

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
    /// About how many bytes it holds.
    bytes: usize,
}

/// The messages kept, and about how many bytes they hold.
#[derive(Debug, Default)]
struct Kept {
    // A deque, and a count of the consumed: a full inbox drops one entry per arrival, and with a
    // Vec, or a scan for a consumed one that is not there, that was O(10,000) a message.
    list: std::collections::VecDeque<Entry>,
    bytes: usize,
    consumed: usize,
}

/// The inbox itself.
#[derive(Debug, Default)]
pub struct Inbox {
    entries: std::sync::Mutex<Kept>,
    /// Set when nothing reads the inbox (a fleet's device, with no expect step): messages are
    /// then counted but not kept.
    keeps_nothing: std::sync::atomic::AtomicBool,
    next_seq: std::sync::atomic::AtomicU64,
    arrived: Notify,
}

impl Inbox {
    /// Adds a message and wakes whoever waits.
    pub fn push(&self, link: u32, message: Value) {
        if !self.keeps() {
            self.next_seq
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            return;
        }
        if let Ok(mut entries) = self.entries.lock() {
            // Numbered under the lock, so the entries stay in arrival order.
            let seq = self
                .next_seq
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
                + 1;
            let bytes = approx_bytes(&message);
            while !entries.list.is_empty()
                && (entries.list.len() >= CAPACITY || entries.bytes + bytes > CAPACITY_BYTES)
            {
                // Consumed messages go first: they only serve "nearest message" in reports.
                let oldest = match entries.consumed {
                    0 => 0,
                    _ => entries.list.iter().position(|e| e.consumed).unwrap_or(0),
                };
                let Some(gone) = entries.list.remove(oldest) else {
                    break;
                };
                entries.bytes -= gone.bytes;
                entries.consumed -= usize::from(gone.consumed);
            }
            entries.bytes += bytes;
            entries.list.push_back(Entry {
                seq,
                link,
                message,
                consumed: false,
                bytes,
            });
        }
        self.arrived.notify_waiters();
    }

    /// From now on, keeps no message (those kept are let go): for a run no expect step reads.
    pub fn keep_nothing(&self) {
        self.keeps_nothing
            .store(true, std::sync::atomic::Ordering::Relaxed);
        if let Ok(mut entries) = self.entries.lock() {
            *entries = Kept::default();
        }
    }

    /// Whether messages pushed now are kept (see [`Inbox::keep_nothing`]).
    pub fn keeps(&self) -> bool {
        !self
            .keeps_nothing
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Consumes the oldest unconsumed message matching `pattern` that arrived after `after`.
    pub fn take(&self, pattern: &Pattern, after: u64) -> Option<(Entry, MatchOutcome)> {
        self.take_after(pattern, after).ok()
    }

    /// [`Inbox::take`], or the number of the newest message it looked at: a wait looks only
    /// past it next time (a message that did not match will not), so a wait over a flood of
    /// other messages costs one match a message, not one a message a wake.
    fn take_after(&self, pattern: &Pattern, after: u64) -> Result<(Entry, MatchOutcome), u64> {
        let Ok(mut entries) = self.entries.lock() else {
            return Err(after);
        };
        let Kept { list, consumed, .. } = &mut *entries;
        let mut looked = after;
        // Entries are in arrival order: those at or before `after` are skipped from the back.
        let start = list.partition_point(|e| e.seq <= after);
        for entry in list.range_mut(start..).filter(|e| !e.consumed) {
            looked = entry.seq;
            let outcome = pattern.matches(&entry.message);
            if outcome.is_match() {
                entry.consumed = true;
                *consumed += 1;
                return Ok((entry.clone(), outcome));
            }
        }
        Err(list.back().map_or(looked, |e| e.seq.max(looked)))
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
        let mut looked = after;
        loop {
            // Register interest before looking, so an arrival between the look and the wait
            // still wakes us.
            let arrived = self.arrived.notified();
            tokio::pin!(arrived);
            arrived.as_mut().enable();
            match self.take_after(pattern, looked) {
                Ok(found) => return Some(found),
                Err(newest) => looked = newest,
            }
            if tokio::time::timeout_at(deadline, arrived).await.is_err() {
                return None;
            }
        }
    }

    /// Watches for `duration`: the first message matching `pattern` that no step consumed and
    /// that arrived after `after`, if any (not consumed: expecting nothing takes nothing).
    pub async fn watch(&self, pattern: &Pattern, after: u64, duration: Duration) -> Option<Entry> {
        let deadline = Instant::now() + duration;
        // As in `wait_take`: what was looked at once is not looked at again.
        let mut looked = after;
        loop {
            let arrived = self.arrived.notified();
            tokio::pin!(arrived);
            arrived.as_mut().enable();
            if let Ok(entries) = self.entries.lock() {
                let start = entries.list.partition_point(|e| e.seq <= looked);
                let hit = entries
                    .list
                    .range(start..)
                    .find(|e| !e.consumed && pattern.matches(&e.message).is_match());
                if let Some(hit) = hit {
                    return Some(hit.clone());
                }
                looked = entries.list.back().map_or(looked, |e| e.seq.max(looked));
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
            .map(|e| e.list.iter().filter(|e| !e.consumed).cloned().collect())
            .unwrap_or_default()
    }

    /// Every message kept, newest last.
    pub fn all(&self) -> Vec<Entry> {
        self.entries
            .lock()
            .map(|e| e.list.iter().cloned().collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pattern(source: Value) -> Pattern {
        Pattern::compile(&source).expect("a valid pattern")
    }

    fn seqs(entries: &[Entry]) -> Vec<u64> {
        entries.iter().map(|e| e.seq).collect()
    }

    #[test]
    fn an_inbox_keeping_nothing_counts_messages_but_keeps_none() {
        let inbox = Inbox::default();
        inbox.push(1, json!({"method": "a"}));
        inbox.keep_nothing();
        assert!(inbox.all().is_empty(), "what was kept is let go");
        inbox.push(1, json!({"method": "a"}));
        assert!(inbox.all().is_empty());
        assert!(inbox.take(&pattern(json!({"method": "a"})), 0).is_none());
        assert_eq!(inbox.last_seq(), 2, "still counted");
    }

    #[test]
    fn take_consumes_the_oldest_match_once() {
        let inbox = Inbox::default();
        assert_eq!(inbox.last_seq(), 0);
        inbox.push(1, json!({"method": "a", "n": 1}));
        inbox.push(1, json!({"method": "b"}));
        inbox.push(2, json!({"method": "a", "n": 2}));
        assert_eq!(inbox.last_seq(), 3);

        let a = pattern(json!({"method": "a"}));
        let (first, outcome) = inbox.take(&a, 0).expect("the first a");
        assert!(outcome.is_match());
        assert_eq!((first.seq, first.link), (1, 1));
        assert!(first.consumed);
        let (second, _) = inbox.take(&a, 0).expect("the second a");
        assert_eq!((second.seq, second.link), (3, 2));
        assert!(inbox.take(&a, 0).is_none(), "each message is taken once");

        assert_eq!(seqs(&inbox.unconsumed()), [2]);
        // Consumed messages are kept, marked.
        let all = inbox.all();
        assert_eq!(seqs(&all), [1, 2, 3]);
        assert_eq!(
            all.iter().map(|e| e.consumed).collect::<Vec<_>>(),
            [true, false, true]
        );
    }

    #[test]
    fn take_gives_the_captures_of_the_match() {
        let inbox = Inbox::default();
        inbox.push(1, json!({"method": "a", "params": {"id": "s1"}}));
        let p = pattern(json!({"params": {"id": {"$capture": "sid"}}}));
        let (_, outcome) = inbox.take(&p, 0).expect("a match");
        assert_eq!(outcome.captures.get("sid"), Some(&json!("s1")));
    }

    #[test]
    fn take_only_looks_after_the_given_seq() {
        let inbox = Inbox::default();
        inbox.push(1, json!({"method": "a"}));
        inbox.push(1, json!({"method": "a"}));
        let a = pattern(json!({"method": "a"}));
        assert_eq!(inbox.take(&a, 1).map(|(e, _)| e.seq), Some(2));
        assert!(inbox.take(&a, 1).is_none(), "seq 1 is not after 1");
        assert!(inbox.take(&a, 2).is_none());
        assert_eq!(inbox.take(&a, 0).map(|(e, _)| e.seq), Some(1));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_wait_through_a_flood_takes_the_first_match_that_came() {
        let inbox = std::sync::Arc::new(Inbox::default());
        let wanted = pattern(json!({"method": "wanted"}));
        let waiting = {
            let inbox = inbox.clone();
            tokio::spawn(async move {
                let deadline = Instant::now() + Duration::from_secs(10);
                inbox.wait_take(&wanted, 0, deadline).await
            })
        };
        // Thousands of others, a wake each, then two that match: the first is taken.
        for n in 0..5_000 {
            inbox.push(1, json!({"method": "other", "n": n}));
            if n % 500 == 0 {
                tokio::task::yield_now().await;
            }
        }
        inbox.push(1, json!({"method": "wanted", "n": 1}));
        inbox.push(1, json!({"method": "wanted", "n": 2}));
        let (taken, _) = waiting.await.expect("the wait ends").expect("a match");
        assert_eq!(taken.message["n"], 1);
        assert_eq!(taken.seq, 5_001);
        let again = pattern(json!({"method": "wanted"}));
        assert_eq!(inbox.take(&again, 0).map(|(e, _)| e.seq), Some(5_002));
    }

    #[tokio::test(start_paused = true)]
    async fn watch_does_not_consume() {
        let inbox = Inbox::default();
        inbox.push(1, json!({"method": "a"}));
        let a = pattern(json!({"method": "a"}));

        let started = Instant::now();
        let seen = inbox.watch(&a, 0, Duration::from_secs(1)).await;
        assert_eq!(seen.map(|e| e.seq), Some(1));
        assert_eq!(
            started.elapsed(),
            Duration::ZERO,
            "an earlier match is seen at once"
        );
        assert_eq!(seqs(&inbox.unconsumed()), [1]);
        assert!(inbox.take(&a, 0).is_some(), "still there to take");
    }

    #[tokio::test(start_paused = true)]
    async fn watch_ignores_what_came_before_and_waits_its_whole_duration() {
        let inbox = Inbox::default();
        inbox.push(1, json!({"method": "a"}));
        inbox.push(1, json!({"method": "b"}));
        let a = pattern(json!({"method": "a"}));
        let started = Instant::now();
        let seen = inbox
            .watch(&a, inbox.last_seq(), Duration::from_millis(750))
            .await;
        assert!(seen.is_none());
        assert_eq!(started.elapsed(), Duration::from_millis(750));
    }

    #[tokio::test(start_paused = true)]
    async fn wait_take_wakes_on_an_arrival_and_gives_up_at_the_deadline() {
        let inbox = std::sync::Arc::new(Inbox::default());
        let a = pattern(json!({"method": "a"}));
        let pusher = inbox.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            pusher.push(1, json!({"method": "b"}));
            tokio::time::sleep(Duration::from_millis(100)).await;
            pusher.push(1, json!({"method": "a"}));
        });
        let started = Instant::now();
        let found = inbox
            .wait_take(&a, 0, started + Duration::from_secs(1))
            .await;
        assert_eq!(found.map(|(e, _)| e.seq), Some(2));
        assert_eq!(started.elapsed(), Duration::from_millis(300));

        let started = Instant::now();
        let found = inbox
            .wait_take(&a, 0, started + Duration::from_millis(400))
            .await;
        assert!(found.is_none());
        assert_eq!(started.elapsed(), Duration::from_millis(400));
    }

    #[test]
    fn bytes_are_bounded_too_and_consumed_messages_go_first() {
        let inbox = Inbox::default();
        let megabytes = |n: usize| json!({"method": "big", "data": "x".repeat(n * 1024 * 1024)});
        inbox.push(1, megabytes(40));
        inbox.push(1, megabytes(40));
        assert!(inbox.take(&pattern(json!({"method": "big"})), 0).is_some());
        inbox.push(1, megabytes(40));
        inbox.push(1, megabytes(40));
        // 160 MiB offered, 128 kept: the consumed first message went, the unconsumed stayed.
        assert_eq!(seqs(&inbox.all()), [2, 3, 4]);
        inbox.push(1, megabytes(40));
        assert_eq!(seqs(&inbox.all()), [3, 4, 5]);
        let kept: usize = inbox.all().iter().map(|e| e.bytes).sum();
        assert!(kept <= CAPACITY_BYTES, "{kept}");
    }

    #[test]
    fn capacity_is_bounded_and_the_oldest_go_first() {
        let inbox = Inbox::default();
        let extra = 5;
        let total = u64::try_from(CAPACITY + extra).expect("fits");
        for n in 0..total {
            inbox.push(1, json!({"n": n}));
        }
        let all = inbox.all();
        assert_eq!(all.len(), CAPACITY);
        assert_eq!(all.first().map(|e| e.seq), Some(6));
        assert_eq!(all.last().map(|e| e.seq), Some(total));
        assert_eq!(inbox.last_seq(), total);
        // The dropped ones cannot be taken; the oldest kept one can.
        for n in 0..5 {
            assert!(inbox.take(&pattern(json!({"n": n})), 0).is_none(), "{n}");
        }
        assert_eq!(
            inbox.take(&pattern(json!({"n": 5})), 0).map(|(e, _)| e.seq),
            Some(6)
        );
    }
}
