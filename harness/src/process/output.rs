//! What the system under test prints, kept line by line and bounded in bytes, so a chatty or
//! hostile process cannot grow the double's memory: the oldest lines go first, and a line longer
//! than [`MAX_LINE_BYTES`] is cut.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Instant;

use serde::Serialize;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::Notify;

/// The longest line kept; the rest of a longer one is dropped (and said to be).
pub const MAX_LINE_BYTES: usize = 4096;

/// How many bytes of output are kept in all, by default.
pub const DEFAULT_KEPT_BYTES: usize = 256 * 1024;

/// What a kept line costs beside its text: a process printing empty lines forever must reach
/// the bound too.
const LINE_OVERHEAD: usize = std::mem::size_of::<OutputLine>();

/// Which of the process's streams a line came on.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Stream {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

impl std::fmt::Display for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        })
    }
}

/// One line the process printed.
#[derive(Debug, Clone, Serialize)]
#[allow(missing_docs)] // fields whose names say it all go undocumented
pub struct OutputLine {
    /// Its number, from 1, across restarts: an `expect_output` step looks only past the last
    /// line an earlier one matched.
    pub seq: u64,
    /// Which start of the process printed it (1 for the first, 2 after a restart, …).
    pub run: u32,
    pub stream: Stream,
    /// Its text, without the newline (cut at [`MAX_LINE_BYTES`]).
    pub text: String,
    /// When, in milliseconds since the log began.
    pub at_ms: f64,
}

/// The bounded log of a process's output, shared by its readers and the steps that look at it.
#[derive(Debug)]
pub struct OutputLog {
    inner: Mutex<Inner>,
    changed: Notify,
    started: Instant,
    kept_bytes: usize,
}

#[derive(Debug, Default)]
struct Inner {
    lines: VecDeque<OutputLine>,
    bytes: usize,
    next_seq: u64,
    dropped: u64,
}

impl Default for OutputLog {
    fn default() -> Self {
        Self::new(DEFAULT_KEPT_BYTES)
    }
}

impl OutputLog {
    /// A log that keeps at most `kept_bytes` of text.
    pub fn new(kept_bytes: usize) -> Self {
        Self {
            inner: Mutex::new(Inner {
                next_seq: 1,
                ..Inner::default()
            }),
            changed: Notify::new(),
            started: Instant::now(),
            kept_bytes,
        }
    }

    /// Adds a line (cut to [`MAX_LINE_BYTES`]), dropping the oldest to stay in bounds.
    pub fn push(&self, run: u32, stream: Stream, text: &str) {
        let text = cut(text);
        let Ok(mut inner) = self.inner.lock() else {
            return;
        };
        let seq = inner.next_seq;
        inner.next_seq += 1;
        inner.bytes += text.len() + LINE_OVERHEAD;
        inner.lines.push_back(OutputLine {
            seq,
            run,
            stream,
            text,
            at_ms: self.started.elapsed().as_secs_f64() * 1000.0,
        });
        while inner.bytes > self.kept_bytes {
            let Some(old) = inner.lines.pop_front() else {
                break;
            };
            inner.bytes -= old.text.len() + LINE_OVERHEAD;
            inner.dropped += 1;
        }
        drop(inner);
        self.changed.notify_waiters();
    }

    /// Every line kept, oldest first.
    pub fn lines(&self) -> Vec<OutputLine> {
        self.inner
            .lock()
            .map(|i| i.lines.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// The last `n` lines kept.
    pub fn tail(&self, n: usize) -> Vec<OutputLine> {
        let lines = self.lines();
        lines[lines.len().saturating_sub(n)..].to_vec()
    }

    /// How many lines were dropped to stay in bounds.
    pub fn dropped(&self) -> u64 {
        self.inner.lock().map(|i| i.dropped).unwrap_or(0)
    }

    /// The first kept line after `after` that `matches`, if one came.
    pub fn find(&self, after: u64, matches: impl Fn(&OutputLine) -> bool) -> Option<OutputLine> {
        let inner = self.inner.lock().ok()?;
        inner
            .lines
            .iter()
            .find(|l| l.seq > after && matches(l))
            .cloned()
    }

    /// Resolves at the next line pushed (register before looking, so none is missed).
    pub fn changed(&self) -> tokio::sync::futures::Notified<'_> {
        self.changed.notified()
    }

    /// Reads `source` to its end into the log as lines of `stream`; a line with no end yet is
    /// kept whole once it reaches [`MAX_LINE_BYTES`], so a process that never prints a newline
    /// holds no more than that.
    pub async fn read_from(&self, run: u32, stream: Stream, mut source: impl AsyncRead + Unpin) {
        let mut pending: Vec<u8> = Vec::new();
        let mut chunk = [0u8; 8192];
        loop {
            let n = match source.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            for &byte in &chunk[..n] {
                if byte == b'\n' {
                    self.push_bytes(run, stream, &pending);
                    pending.clear();
                } else if pending.len() < MAX_LINE_BYTES + 1 {
                    pending.push(byte);
                }
            }
        }
        if !pending.is_empty() {
            self.push_bytes(run, stream, &pending);
        }
    }

    fn push_bytes(&self, run: u32, stream: Stream, bytes: &[u8]) {
        let text = String::from_utf8_lossy(bytes);
        self.push(run, stream, text.trim_end_matches('\r'));
    }
}

/// A line cut to [`MAX_LINE_BYTES`] on a character boundary, saying it was.
fn cut(text: &str) -> String {
    if text.len() <= MAX_LINE_BYTES {
        return text.to_string();
    }
    let mut end = MAX_LINE_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… (line cut at {MAX_LINE_BYTES} bytes)", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_keeps_its_bound_in_bytes_dropping_the_oldest() {
        let log = OutputLog::new(2000);
        for i in 0..50 {
            log.push(1, Stream::Stdout, &format!("line number {i:02}"));
        }
        let lines = log.lines();
        let cost: usize = lines.iter().map(|l| l.text.len() + LINE_OVERHEAD).sum();
        assert!(cost <= 2000, "{cost}");
        assert_eq!(
            lines.last().map(|l| l.text.as_str()),
            Some("line number 49")
        );
        assert_eq!(lines.last().map(|l| l.seq), Some(50));
        assert!(log.dropped() > 10, "{}", log.dropped());
    }

    #[test]
    fn empty_lines_count_against_the_bound_too() {
        let log = OutputLog::new(10_000);
        for _ in 0..100_000 {
            log.push(1, Stream::Stdout, "");
        }
        assert!(
            log.lines().len() <= 10_000 / LINE_OVERHEAD,
            "{}",
            log.lines().len()
        );
    }

    #[test]
    fn a_long_line_is_cut_and_says_so() {
        let log = OutputLog::default();
        log.push(1, Stream::Stderr, &"é".repeat(MAX_LINE_BYTES));
        let line = &log.lines()[0];
        assert!(line.text.len() < MAX_LINE_BYTES + 40);
        assert!(line.text.ends_with("(line cut at 4096 bytes)"));
    }

    #[tokio::test]
    async fn a_stream_with_no_newline_holds_one_line_of_bytes() {
        let log = OutputLog::default();
        let endless = vec![b'x'; 1 << 20];
        log.read_from(1, Stream::Stdout, &endless[..]).await;
        let lines = log.lines();
        assert_eq!(lines.len(), 1);
        assert!(lines[0].text.starts_with("xxxx"));
        assert!(lines[0].text.len() < MAX_LINE_BYTES + 40);
    }

    #[tokio::test]
    async fn lines_are_read_split_and_found_past_a_mark() {
        let log = OutputLog::default();
        log.read_from(2, Stream::Stderr, &b"one\r\ntwo\nthree"[..])
            .await;
        let texts: Vec<_> = log.lines().into_iter().map(|l| l.text).collect();
        assert_eq!(texts, ["one", "two", "three"]);
        assert_eq!(
            log.find(0, |l| l.text.starts_with('t')).map(|l| l.seq),
            Some(2)
        );
        assert_eq!(
            log.find(2, |l| l.text.starts_with('t')).map(|l| l.seq),
            Some(3)
        );
        assert!(log.find(3, |_| true).is_none());
    }
}
