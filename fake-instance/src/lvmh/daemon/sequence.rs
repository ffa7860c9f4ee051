//! The seqs of a plugin's events: each link's must go up, and the first after a welcome must
//! follow the daemon's `lastSeq`; a gap left there waits for its `buffer_overflow` notice.

use std::sync::Arc;

use harness::engine::Hub;
use harness::finding::Finding;
use harness::jsonrpc::Peer;
use harness::lvmh::{Envelope, rules};

use serde_json::Value;

use super::{Daemon, find};

impl Daemon {
    /// Judges the event's seq against the link's; false when the link has said no hello yet
    /// (reported: the event is not taken). A gap after a welcome waits for its notice.
    pub(super) fn judge_order(
        &self,
        hub: &Arc<Hub>,
        peer: &Arc<Peer>,
        kind: &str,
        envelope: &Envelope,
        frame: &Value,
    ) -> bool {
        let Some(check) = self.check_order(peer, envelope) else {
            find(
                hub,
                peer,
                rules::HELLO_FIRST,
                format!("`{kind}` came before hello"),
                frame,
            );
            return false;
        };
        match check {
            Order::Fine => {}
            Order::Broken(rule, why) => find(hub, peer, rule, why, frame),
            Order::Gap(from, to) => {
                self.not_whole(&envelope.session_id);
                let why = format!(
                    "after welcome said lastSeq {}, the first event had seq {to}: {from}..{} were lost, and no buffer_overflow said so",
                    from - 1,
                    to - 1
                );
                let session = envelope.session_id.clone();
                if let Ok(mut gaps) = self.gaps.lock() {
                    gaps.insert(session.clone(), why.clone());
                }
                self.watch_gap(hub, peer, &session, why);
            }
        }
        true
    }

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

    /// The event's seq against the link's last one and the welcome's `lastSeq`; none
    /// before the link's hello.
    fn check_order(&self, peer: &Arc<Peer>, envelope: &Envelope) -> Option<Order> {
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

/// How an event's seq stands.
enum Order {
    /// As it should.
    Fine,
    /// A rule broken, and why.
    Broken(&'static str, String),
    /// The first event after a welcome skipped seqs: the first one the daemon lacks, and
    /// the one that came.
    Gap(u64, u64),
}
