//! The link's life as this side sees it: whether and how it ended, ending it (with a close
//! frame, without one, or half), and pacing what goes to the peer.

use std::sync::atomic::Ordering;

use serde_json::json;

use super::Peer;
use crate::journal::Direction;
use crate::transport::{CloseInfo, Outgoing};

impl Peer {
    /// Whether the link has ended.
    pub fn is_closed(&self) -> bool {
        self.closed_tx.borrow().is_some()
    }

    /// Waits until the link ends; gives the peer's close code (`None` if it vanished).
    pub async fn closed(&self) -> Option<CloseInfo> {
        let mut rx = self.closed_tx.subscribe();
        loop {
            if let Some(info) = rx.borrow_and_update().clone() {
                return info;
            }
            if rx.changed().await.is_err() {
                return None;
            }
        }
    }

    /// Whether this side closed the link (so its end is not the peer's doing).
    pub fn closed_by_us(&self) -> bool {
        self.we_closed.load(Ordering::Relaxed)
    }

    /// Closes the link with a code and reason.
    pub fn close(&self, code: u16, reason: &str) {
        self.we_closed.store(true, Ordering::Relaxed);
        self.journal.record(
            self.link,
            Direction::Event,
            json!({"event": "close_sent", "code": code, "reason": reason}),
        );
        let _ = self.out.send(Outgoing::Close(CloseInfo {
            code,
            reason: reason.into(),
        }));
    }

    /// Ends the link without a close frame, as a crashed process or a lost network does.
    pub fn drop_link(&self) {
        self.we_closed.store(true, Ordering::Relaxed);
        self.journal
            .record(self.link, Direction::Event, json!({"event": "dropped"}));
        let _ = self.out.send(Outgoing::Drop);
    }

    /// Ends the link without a close frame as a lost network does: unlike [`Peer::drop_link`],
    /// its end is not taken as this side's doing, so a device dials again (a load run's
    /// `drop_link`).
    pub fn lose_link(&self) {
        self.journal
            .record(self.link, Direction::Event, json!({"event": "dropped"}));
        let _ = self.out.send(Outgoing::Drop);
    }

    /// Ends only our sending direction, without a close frame, and goes on reading: the peer
    /// reads the end of the stream while what it sends still arrives.
    pub fn half_close(&self) {
        self.we_closed.store(true, Ordering::Relaxed);
        self.journal
            .record(self.link, Direction::Event, json!({"event": "half_closed"}));
        let _ = self.out.send(Outgoing::HalfClose);
    }

    /// Sends the peer nothing for `pause`: what is sent meanwhile waits, then goes in order.
    pub fn stall(&self, pause: std::time::Duration) {
        self.journal.record(
            self.link,
            Direction::Event,
            json!({"event": "stalled", "ms": pause.as_millis()}),
        );
        let _ = self.out.send(Outgoing::Stall(pause));
    }

    /// Returns once what is queued for the peer is down to a little (at once when it is): a
    /// producer of its own output (a terminal's reader) waits for this before it makes more, so
    /// a peer that stops reading holds it back instead of filling our memory.
    pub async fn writable(&self) {
        self.out.writable().await;
    }
}
