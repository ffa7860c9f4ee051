//! The end of every double's run: its links closed with a reason, and what it found gathered
//! for the report once the journal is finished.

use std::time::Duration;

use crate::embed::Ended;
use crate::engine::{Hub, RunOutcome};
use crate::finding::Findings;
use crate::journal::Journal;

/// How many of the last messages an ended run keeps for its report.
pub const RECENT_KEPT: usize = 200;

/// Closes every link still open, saying `reason`; with a `grace`, waits that long at most for
/// the peers to answer the close (so a peer sees a clean close before it is stopped, and a
/// seeded run's journal ends the same way each time).
pub async fn close_links(hub: &Hub, reason: &str, grace: Option<Duration>) {
    let closing: Vec<_> = hub
        .links()
        .into_iter()
        .filter(|link| !link.peer.is_closed())
        .map(|link| {
            link.peer.close(crate::transport::CLOSE_NORMAL, reason);
            link.peer
        })
        .collect();
    if let Some(grace) = grace {
        let _ = tokio::time::timeout(
            grace,
            futures_util::future::join_all(closing.iter().map(|peer| peer.closed())),
        )
        .await;
    }
}

/// What a run ended with: its outcome, what the monitors found and the last messages (the
/// journal is finished first, so a file journal holds every message).
pub fn ended(outcome: Option<RunOutcome>, journal: &Journal, findings: &Findings) -> Ended {
    let findings = findings.all();
    journal.finish();
    Ended {
        outcome,
        findings,
        recent: journal.recent(RECENT_KEPT),
    }
}
