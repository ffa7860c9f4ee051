//! The seqs of a plugin's events: each link's must go up, and the first after a welcome must
//! follow the daemon's `lastSeq`; a gap left there waits for its `buffer_overflow` notice.

use std::sync::Arc;

use harness::engine::Hub;
use harness::finding::Finding;
use harness::jsonrpc::Peer;
use harness::lvmh::{Envelope, rules};

use super::Daemon;

impl Daemon {
    /// Reports the session's gap on `peer` unless a `buffer_overflow` excuses it within the
    /// patience (the link's end leaves it to the session's next link).
    pub(super) fn watch_gap(&self, hub: &Arc<Hub>, peer: &Arc<Peer>, session: &str, why: String) {
        let (gaps, session) = (self.gaps.clone(), session.to_string());
        hub.watchdog(
            peer,
            self.patience,
            Finding::new(rules::REPLAY_AFTER_LAST_SEQ, why),
            None,
            move || gaps.lock().map_or(true, |g| !g.contains_key(&session)),
        );
    }

    pub(super) fn check_order(&self, peer: &Arc<Peer>, envelope: &Envelope) -> Option<Order> {
        if let Ok(mut seen) = self.seen.lock() {
            let session = seen.entry(envelope.session_id.clone()).or_default();
            session.max_seq = session.max_seq.max(envelope.seq);
        }
        let mut agents = self.agents.lock().ok()?;
        let link = agents.get_mut(&peer.link())?;
        let from = link.replay_from?;
        // Seqs the daemon saw live but did not keep (deltas) need not come again.
        let allowed = link.seen_at_welcome.max(from - 1).saturating_add(1);
        let order = match link.last_seq {
            None if envelope.seq < from => Order::Broken(
                rules::REPLAY_AFTER_LAST_SEQ,
                format!(
                    "after welcome said lastSeq {}, the first event had seq {}, which the daemon has already",
                    from - 1,
                    envelope.seq
                ),
            ),
            None if envelope.seq > allowed => Order::Gap(allowed, envelope.seq),
            None => Order::Fine,
            Some(last) if envelope.seq <= last => Order::Broken(
                rules::SEQ_MONOTONIC,
                format!(
                    "seq {} came after seq {last}: a session's seq only goes up",
                    envelope.seq
                ),
            ),
            Some(_) => Order::Fine,
        };
        link.last_seq = Some(envelope.seq);
        Some(order)
    }
}

pub(super) enum Order {
    Fine,
    Broken(&'static str, String),
    Gap(u64, u64),
}
