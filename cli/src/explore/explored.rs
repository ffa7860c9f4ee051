//! What an exploration comes to: the tally, the finding shrunk to a scenario, and the rules the
//! reference model judges. A leaf room, so the reports can read it without importing the explorer.

use std::time::Duration;

use harness::engine::RunOutcome;
use harness::journal::Entry;

/// The rules the reference model of a device's turns judges ([`harness::lembas::turn_model`]).
pub const MODEL_RULES: [&str; 5] = [
    "device.turns.dedup",
    "device.prompt.queued",
    "device.prompt.answer",
    "device.status.queued",
    "device.turns.persist",
];

/// What an exploration came to.
#[derive(Debug)]
pub struct Explored {
    /// How many sequences ran (not counting shrinking), with how many moves in all.
    pub sequences: u64,
    #[allow(missing_docs)]
    pub moves: usize,
    /// How many sequences the system under test found not applicable.
    pub not_applicable: u64,
    /// How long it took, shrinking included.
    pub elapsed: Duration,
    /// The first finding, shrunk.
    pub found: Option<Found>,
}

/// A sequence that broke a rule, shrunk and written as a scenario.
#[derive(Debug)]
pub struct Found {
    /// The rule it broke.
    pub rule: String,
    /// How long exploring took until the failing sequence ended (shrinking comes after).
    pub found_after: Duration,
    /// The sequence's moves before shrinking and after.
    pub moves_before: usize,
    #[allow(missing_docs)]
    pub moves_after: usize,
    /// The runs shrinking took.
    pub shrinking_runs: usize,
    /// Whether shrinking stopped at the time budget with cuts still to try (what was written
    /// is the shortest failing cut found by then).
    pub shrinking_cut_short: bool,
    /// The scenario's name and text, which replays the finding.
    pub name: String,
    #[allow(missing_docs)]
    pub scenario: String,
    /// The shrunk sequence's last run: its outcome and last messages.
    pub outcome: RunOutcome,
    #[allow(missing_docs)]
    pub recent: Vec<Entry>,
}
