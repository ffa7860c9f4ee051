//! The queue of what goes to the peer, with the bytes it holds counted, so a peer that stops
//! reading stops us too instead of making us keep everything we would have sent it.
//!
//! Sending never blocks (the layers above send from synchronous code), so the bound is kept by
//! those who make output: the JSON-RPC peer stops reading the link while the queue is over
//! [`HIGH_WATER`] (a peer that sends requests and never reads their answers is then held back by
//! TCP, not by our memory), and a producer of its own output (a terminal's reader) waits for
//! [`Outbox::writable`] before it reads more. The writer gives up on a peer that takes none of
//! a message for [`WRITE_STALL`], which ends the connection.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::{Notify, mpsc};

/// What an outbox carries: anything that can say how many bytes it holds (the transports'
/// `Outgoing`).
pub trait Weighed {
    /// The bytes it holds, as an [`Outbox`] counts them.
    fn bytes(&self) -> usize;
}

/// Over this many bytes queued, whoever makes output waits.
pub const HIGH_WATER: usize = 8 * 1024 * 1024;
/// A waiting producer goes on once the queue is down to this many bytes.
pub const LOW_WATER: usize = 1024 * 1024;
/// A writer that could not hand the peer one message in this long stops: the peer is not
/// reading, and the connection ends rather than hold what is queued for ever.
pub const WRITE_STALL: Duration = Duration::from_secs(30);

/// What the sending and the writing halves share.
#[derive(Debug, Default)]
struct Backlog {
    bytes: AtomicUsize,
    /// The writer has stopped: nothing queued will drain any more, and no one should wait.
    writer_gone: AtomicBool,
    drained: Notify,
}

impl Backlog {
    fn room(&self) -> bool {
        self.writer_gone.load(Ordering::Acquire) || self.bytes.load(Ordering::Acquire) <= LOW_WATER
    }
}

/// The sending half: a cheap clone, like the channel sender it wraps.
#[derive(Debug)]
pub struct Outbox<T> {
    tx: mpsc::UnboundedSender<T>,
    backlog: Arc<Backlog>,
}

impl<T> Clone for Outbox<T> {
    fn clone(&self) -> Self {
        Outbox {
            tx: self.tx.clone(),
            backlog: self.backlog.clone(),
        }
    }
}

/// The writing half, held by a transport's writer.
#[derive(Debug)]
pub struct OutboxReceiver<T> {
    rx: mpsc::UnboundedReceiver<T>,
    backlog: Arc<Backlog>,
}

/// A new outbox and the receiver its transport writes from.
pub fn outbox<T>() -> (Outbox<T>, OutboxReceiver<T>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let backlog = Arc::new(Backlog::default());
    (
        Outbox {
            tx,
            backlog: backlog.clone(),
        },
        OutboxReceiver { rx, backlog },
    )
}

impl<T: Weighed> Outbox<T> {
    /// Queues a message; an error (with the message) once the writer has gone.
    pub fn send(&self, message: T) -> Result<(), mpsc::error::SendError<T>> {
        let bytes = message.bytes();
        self.backlog.bytes.fetch_add(bytes, Ordering::AcqRel);
        self.tx.send(message).inspect_err(|_| {
            self.backlog.bytes.fetch_sub(bytes, Ordering::AcqRel);
        })
    }

    /// The bytes queued and not yet handed to the peer.
    pub fn queued_bytes(&self) -> usize {
        self.backlog.bytes.load(Ordering::Acquire)
    }

    /// Whether the queue is over [`HIGH_WATER`] (and the writer still there to drain it).
    pub fn is_full(&self) -> bool {
        !self.backlog.writer_gone.load(Ordering::Acquire) && self.queued_bytes() > HIGH_WATER
    }

    /// Returns once the queue is down to [`LOW_WATER`] or the writer has gone; at once when it
    /// is not full. Never waits past the writer's own [`WRITE_STALL`] for long: a writer that
    /// stalls ends, and that wakes this.
    pub async fn writable(&self) {
        if !self.is_full() {
            return;
        }
        loop {
            let drained = self.backlog.drained.notified();
            if self.backlog.room() {
                return;
            }
            drained.await;
        }
    }

    /// Whether the writer has gone (the connection is over).
    pub fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }
}

impl<T> OutboxReceiver<T> {
    /// The next message to write; `None` once every sender is gone.
    pub async fn recv(&mut self) -> Option<T> {
        self.rx.recv().await
    }

    /// The next message if one is queued (a test's way to read what was sent).
    pub fn try_recv(&mut self) -> Result<T, mpsc::error::TryRecvError> {
        self.rx.try_recv()
    }

    /// Says a message `recv` gave, of [`Weighed::bytes`] `bytes`, has left (written, or given
    /// up on).
    pub fn written(&self, bytes: usize) {
        let left = self
            .backlog
            .bytes
            .fetch_sub(bytes, Ordering::AcqRel)
            .saturating_sub(bytes);
        if left <= LOW_WATER {
            self.backlog.drained.notify_waiters();
        }
    }
}

impl<T> Drop for OutboxReceiver<T> {
    fn drop(&mut self) {
        self.backlog.writer_gone.store(true, Ordering::Release);
        self.backlog.drained.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    // Not `super::*`: a use of the parent module's path, which the one-way rooms test reads
    // as this module importing `transport`.
    use crate::transport::outbox::{HIGH_WATER, LOW_WATER, Weighed, outbox};
    use std::time::Duration;

    /// A message as the tests send it.
    #[derive(Debug)]
    struct Text(String);

    impl Weighed for Text {
        fn bytes(&self) -> usize {
            self.0.len()
        }
    }

    #[tokio::test]
    async fn a_full_outbox_holds_its_producer_until_the_writer_drains_it() {
        let (outbox, mut receiver) = outbox::<Text>();
        let big = "x".repeat(HIGH_WATER / 4);
        for _ in 0..5 {
            outbox.send(Text(big.clone())).expect("queued");
        }
        assert!(outbox.is_full(), "{} bytes queued", outbox.queued_bytes());
        let waiting = tokio::spawn({
            let outbox = outbox.clone();
            async move { outbox.writable().await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(
            !waiting.is_finished(),
            "over the high water, a producer waits"
        );
        for _ in 0..4 {
            let message = receiver.recv().await.expect("a message");
            receiver.written(message.bytes());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(
            !waiting.is_finished(),
            "under the high water but over the low, it still waits ({} bytes)",
            outbox.queued_bytes()
        );
        let last = receiver.recv().await.expect("a message");
        receiver.written(last.bytes());
        assert!(outbox.queued_bytes() <= LOW_WATER);
        tokio::time::timeout(Duration::from_secs(2), waiting)
            .await
            .expect("drained to the low water, the producer goes on")
            .expect("no panic");
    }

    #[tokio::test]
    async fn a_gone_writer_frees_whoever_waits() {
        let (outbox, receiver) = outbox::<Text>();
        outbox
            .send(Text("x".repeat(HIGH_WATER + 1)))
            .expect("queued");
        let waiting = tokio::spawn({
            let outbox = outbox.clone();
            async move { outbox.writable().await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        drop(receiver);
        tokio::time::timeout(Duration::from_secs(2), waiting)
            .await
            .expect("the writer's end frees the producer")
            .expect("no panic");
        assert!(!outbox.is_full(), "a queue no one drains is not full");
        assert!(outbox.send(Text("late".into())).is_err());
        assert_eq!(
            outbox.queued_bytes(),
            HIGH_WATER + 1,
            "a refused send adds nothing"
        );
    }
}
