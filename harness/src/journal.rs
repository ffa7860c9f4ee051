//! The journal: every message in and out, with its time, link and direction.
//!
//! Written as JSON lines to `--journal PATH` as it happens (so a crashed or killed run still
//! leaves its trail), and kept in memory for the report's "last messages". The file has every
//! message whole; what is kept in memory has strings over 64 KiB cut
//! ([`crate::size::cut_clone`]): reports show the start of a message, and keeping a peer's
//! 37 MB prompt whole would cost a copy of it.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::Mutex;
use std::time::Instant;

use serde::Serialize;
use serde_json::Value;

/// How many entries the report's "last messages" can show.
const RECENT: usize = 200;
/// How many bytes of messages those entries may hold (about): a peer's frames may each be tens
/// of megabytes. The newest entry is kept whatever its size.
const RECENT_BYTES: usize = 32 * 1024 * 1024;

/// Which way a message went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// From the peer.
    In,
    /// To the peer.
    Out,
    /// Something that happened to the link (opened, closed), not a message.
    Event,
}

/// One journal line.
#[derive(Debug, Clone, Serialize)]
pub struct Entry {
    /// Its place in the journal, counting from 1: a reader that has seen up to `n` asks for
    /// what came after `n`.
    pub seq: u64,
    /// Milliseconds since the run started.
    pub t_ms: f64,
    /// The link, counting from 1.
    pub link: u32,
    /// Which way.
    pub dir: Direction,
    /// The message as JSON when it parsed, else the raw text as a string; in memory, its strings
    /// over 64 KiB cut ([`crate::size::cut_clone`]).
    pub msg: Value,
}

/// A message to record: the caller's to give, or only to lend.
enum Given<'a> {
    Owned(Value),
    Borrowed(&'a Value),
}

/// An entry as the file has it: the message whole, borrowed. Its fields are [`Entry`]'s.
#[derive(Serialize)]
struct Line<'a> {
    seq: u64,
    t_ms: f64,
    link: u32,
    dir: Direction,
    msg: &'a Value,
}

/// Something shown every message and event as the journal records it, at that moment (a load
/// run's figures are taken so): it sees them even when the journal keeps nothing.
pub trait Tap: Send + Sync + std::fmt::Debug {
    /// One message or event on `link`, going `dir`.
    fn seen(&self, link: u32, dir: Direction, msg: &Value);
}

/// Records every message of a run.
#[derive(Debug)]
pub struct Journal {
    start: Instant,
    file: Option<Mutex<BufWriter<File>>>,
    recent: Mutex<VecDeque<Entry>>,
    /// About how many bytes `recent` holds (changed under its lock).
    recent_bytes: std::sync::atomic::AtomicUsize,
    /// Woken at each entry, for readers waiting for the next.
    grown: tokio::sync::Notify,
    /// The file leaves out times and the peer's address: a seeded run's journal repeats byte
    /// for byte, and no seed fixes how long things took or which port the system picked.
    timeless: bool,
    /// A seeded run's lines, held for [`Journal::finish`]: written grouped by link and
    /// direction, since two messages that cross on the wire (a notification the peer sends
    /// while we send our next request) are seen in either order, while each side's own
    /// messages on a link keep theirs.
    held: Mutex<Vec<(u32, u8, String)>>,
    /// Whether recent entries are kept in memory ([`Journal::keeping_nothing`] says not).
    keeps: bool,
    /// The last entry's number (counted even when entries are not kept).
    seq: std::sync::atomic::AtomicU64,
    /// Shown every entry ([`Journal::with_tap`]).
    tap: Option<std::sync::Arc<dyn Tap>>,
}

impl Journal {
    /// A journal kept in memory only.
    pub fn in_memory() -> Self {
        Self {
            start: Instant::now(),
            file: None,
            recent: Mutex::new(VecDeque::new()),
            recent_bytes: std::sync::atomic::AtomicUsize::new(0),
            grown: tokio::sync::Notify::new(),
            timeless: false,
            held: Mutex::new(Vec::new()),
            keeps: true,
            seq: std::sync::atomic::AtomicU64::new(0),
            tap: None,
        }
    }

    /// The same journal, showing every entry to `tap` as it is recorded.
    #[must_use]
    pub fn with_tap(mut self, tap: std::sync::Arc<dyn Tap>) -> Self {
        self.tap = Some(tap);
        self
    }

    /// The same journal keeping no recent entries in memory: for a fleet's devices, which no
    /// report, control API or expect step reads, so an idle device holds no messages. A file
    /// is still written.
    #[must_use]
    pub fn keeping_nothing(mut self) -> Self {
        self.keeps = false;
        self
    }

    /// Whether recording does nothing at all (no file, nothing kept): the caller may then skip
    /// parsing what it would record.
    pub fn keeps_nothing(&self) -> bool {
        !self.keeps && self.file.is_none() && self.tap.is_none()
    }

    /// A journal that also writes JSON lines to `path` (without times in a seeded run: see
    /// [`crate::random`]).
    pub fn to_file(path: &Path) -> std::io::Result<Self> {
        let file = File::create(path)?;
        let mut journal = Self::in_memory();
        journal.file = Some(Mutex::new(BufWriter::new(file)));
        journal.timeless = crate::random::seeded();
        Ok(journal)
    }

    /// The journal a run asked for: written to `path` when given, else kept in memory only.
    pub fn open(path: Option<&Path>) -> std::io::Result<Self> {
        match path {
            Some(path) => Self::to_file(path),
            None => Ok(Self::in_memory()),
        }
    }

    /// Milliseconds since the run started.
    pub fn elapsed_ms(&self) -> f64 {
        self.start.elapsed().as_secs_f64() * 1000.0
    }

    /// Records one message or event.
    pub fn record(&self, link: u32, dir: Direction, msg: Value) {
        if let Some(tap) = &self.tap {
            tap.seen(link, dir, &msg);
        }
        if !self.keeps && self.file.is_none() {
            return;
        }
        self.write_and_keep(link, dir, Given::Owned(msg));
    }

    /// Records one message the caller keeps: written whole, and only its cut copy kept.
    pub fn record_ref(&self, link: u32, dir: Direction, msg: &Value) {
        if let Some(tap) = &self.tap {
            tap.seen(link, dir, msg);
        }
        if !self.keeps && self.file.is_none() {
            return;
        }
        self.write_and_keep(link, dir, Given::Borrowed(msg));
    }

    /// Writes the message whole to the file, and keeps it cut (without copying it whole).
    fn write_and_keep(&self, link: u32, dir: Direction, given: Given<'_>) {
        let Ok(mut recent) = self.recent.lock() else {
            return;
        };
        // Numbered under the lock, so entries are numbered in the order they are kept.
        let seq = self.seq.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        let t_ms = (self.elapsed_ms() * 1000.0).round() / 1000.0;
        let whole = Line {
            seq,
            t_ms,
            link,
            dir,
            msg: match &given {
                Given::Owned(msg) => msg,
                Given::Borrowed(msg) => msg,
            },
        };
        if self.timeless
            && let Ok(line) = self.line(&whole)
            && let Ok(mut held) = self.held.lock()
        {
            let rank = match dir {
                Direction::In => 0,
                Direction::Out => 1,
                Direction::Event => 2,
            };
            held.push((link, rank, line));
        } else if let Some(file) = &self.file
            && let Ok(mut file) = file.lock()
            && let Ok(line) = self.line(&whole)
        {
            // A journal that cannot be written is not a reason to stop checking the peer.
            let _ = writeln!(file, "{line}").and_then(|_| file.flush());
        }
        use std::sync::atomic::Ordering::Relaxed;
        if !self.keeps {
            return;
        }
        let msg = match given {
            Given::Owned(mut msg) => {
                crate::size::cut_in_place(&mut msg);
                msg
            }
            Given::Borrowed(msg) => crate::size::cut_clone(msg),
        };
        let entry = Entry {
            seq,
            t_ms,
            link,
            dir,
            msg,
        };
        let mut bytes = self.recent_bytes.load(Relaxed) + crate::size::approx_bytes(&entry.msg);
        recent.push_back(entry);
        while recent.len() > RECENT || (bytes > RECENT_BYTES && recent.len() > 1) {
            if let Some(gone) = recent.pop_front() {
                bytes = bytes.saturating_sub(crate::size::approx_bytes(&gone.msg));
            }
        }
        self.recent_bytes.store(bytes, Relaxed);
        drop(recent);
        self.grown.notify_waiters();
    }

    /// Writes a seeded run's held lines (see `held`): each link's, in link order, its messages
    /// from the peer, then to it, then its events, each in the order they came. Once; nothing
    /// for an unseeded journal, whose lines are written as they come. Dropping the journal
    /// does it too.
    pub fn finish(&self) {
        let Ok(mut held) = self.held.lock() else {
            return;
        };
        let mut lines = std::mem::take(&mut *held);
        lines.sort_by_key(|(link, rank, _)| (*link, *rank));
        if let Some(file) = &self.file
            && let Ok(mut file) = file.lock()
        {
            for (_, _, line) in &lines {
                let _ = writeln!(file, "{line}");
            }
            let _ = file.flush();
        }
    }

    /// One entry as a line of the file.
    fn line(&self, entry: &Line<'_>) -> serde_json::Result<String> {
        if !self.timeless {
            return serde_json::to_string(entry);
        }
        let mut value = serde_json::to_value(entry)?;
        if let Some(fields) = value.as_object_mut() {
            fields.remove("t_ms");
            // Its place among all entries is the order of crossing messages too.
            fields.remove("seq");
        }
        // A link's opening names the peer's address: a port the system picked.
        if value.pointer("/msg/event").and_then(Value::as_str) == Some("open")
            && let Some(msg) = value.get_mut("msg").and_then(Value::as_object_mut)
        {
            msg.remove("peer");
        }
        // An HTTP event says when it came, too.
        if let Some(params) = value
            .pointer_mut("/msg/params")
            .and_then(Value::as_object_mut)
        {
            params.remove("at_ms");
        }
        serde_json::to_string(&value)
    }

    /// Records a raw text: as JSON when it parses, else as the string itself.
    pub fn record_text(&self, link: u32, dir: Direction, text: &str) {
        if self.keeps_nothing() {
            return;
        }
        let msg = serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_string()));
        self.record(link, dir, msg);
    }

    /// The number of the newest entry (0: none yet).
    pub fn last_seq(&self) -> u64 {
        self.recent
            .lock()
            .ok()
            .and_then(|r| r.back().map(|e| e.seq))
            .unwrap_or(0)
    }

    /// The kept entries after `seq`, oldest first (only the last 200 are kept: a reader that
    /// fell further behind sees a gap in `seq`).
    pub fn after(&self, seq: u64) -> Vec<Entry> {
        let Ok(recent) = self.recent.lock() else {
            return Vec::new();
        };
        recent.iter().filter(|e| e.seq > seq).cloned().collect()
    }

    /// The entries after `seq`, waiting until at least one comes or `deadline` passes.
    pub async fn wait_after(&self, seq: u64, deadline: std::time::Instant) -> Vec<Entry> {
        loop {
            let grown = self.grown.notified();
            tokio::pin!(grown);
            // Registered before looking, so an entry recorded in between is not missed.
            grown.as_mut().enable();
            let entries = self.after(seq);
            if !entries.is_empty() {
                return entries;
            }
            if tokio::time::timeout_at(deadline.into(), grown)
                .await
                .is_err()
            {
                return Vec::new();
            }
        }
    }

    /// The last `n` entries, oldest first.
    pub fn recent(&self, n: usize) -> Vec<Entry> {
        let Ok(recent) = self.recent.lock() else {
            return Vec::new();
        };
        let skip = recent.len().saturating_sub(n);
        recent.iter().skip(skip).cloned().collect()
    }
}

impl Drop for Journal {
    fn drop(&mut self) {
        self.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn recent_entries_are_bounded_by_bytes_keeping_the_newest() {
        let journal = Journal::in_memory();
        // Twelve MiB each, in strings short enough to be kept whole.
        let big = |n: u8| json!({"n": n, "data": vec!["x".repeat(1024); 12 * 1024]});
        for n in 0..4 {
            journal.record(1, Direction::In, big(n));
        }
        // 48 MiB offered, 32 kept: the two newest.
        let kept: Vec<Value> = journal
            .recent(10)
            .iter()
            .map(|e| e.msg["n"].clone())
            .collect();
        assert_eq!(kept, [json!(2), json!(3)]);
        assert_eq!(journal.last_seq(), 4);
        // One entry larger than the whole budget is still kept: it is the newest.
        journal.record(
            1,
            Direction::In,
            json!({"data": vec!["y".repeat(1024); 40 * 1024]}),
        );
        assert_eq!(journal.recent(10).len(), 1);
        journal.record(1, Direction::In, json!({"small": true}));
        assert_eq!(
            journal.recent(10).len(),
            1,
            "the big one goes once a newer one comes"
        );
    }

    #[test]
    fn a_long_string_is_written_whole_and_kept_cut() {
        let dir = tempfile::tempdir().expect("a directory");
        let path = dir.path().join("journal.jsonl");
        let journal = Journal::to_file(&path).expect("a journal file");
        let long = "z".repeat(crate::size::KEPT_STRING_MAX + 1);
        let message = json!({"params": {"data": long}});
        journal.record_ref(1, Direction::In, &message);
        journal.record(1, Direction::Out, message.clone());
        journal.finish();
        let written = std::fs::read_to_string(&path).expect("the file");
        assert_eq!(
            written.matches(long.as_str()).count(),
            2,
            "the file has both whole"
        );
        for entry in journal.recent(10) {
            let kept = entry.msg["params"]["data"].as_str().expect("a string");
            assert!(kept.len() < 2048 && kept.contains("cut"), "{}", kept.len());
        }
    }

    #[test]
    fn a_journal_keeping_nothing_keeps_no_entry_but_still_writes_its_file() {
        let forgetful = Journal::in_memory().keeping_nothing();
        assert!(forgetful.keeps_nothing());
        forgetful.record_text(1, Direction::In, r#"{"jsonrpc":"2.0","method":"a"}"#);
        forgetful.record(1, Direction::Out, json!({"b": 1}));
        assert!(forgetful.recent(10).is_empty());
        assert_eq!(forgetful.last_seq(), 0);

        let dir = tempfile::tempdir().expect("a directory");
        let path = dir.path().join("journal.jsonl");
        let written = Journal::to_file(&path).expect("a file").keeping_nothing();
        assert!(!written.keeps_nothing(), "a file is still written");
        written.record(1, Direction::In, json!({"c": 1}));
        written.record(1, Direction::Out, json!({"d": 1}));
        written.finish();
        assert!(written.recent(10).is_empty());
        let text = std::fs::read_to_string(&path).expect("written");
        assert!(text.contains(r#""c":1"#), "{text}");
        assert!(
            text.contains(r#""seq":2"#),
            "numbered though not kept: {text}"
        );
    }
}
