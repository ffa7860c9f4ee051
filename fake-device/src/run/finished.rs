//! How a run of fake-device ends: what it ended with (and why a simulated device stopped
//! dialling, with the words its command says for it). Why it may not start at all is
//! `start_error`'s.

use harness::engine::RunOutcome;
use harness::finding::Finding;
use harness::journal::Entry;
use harness::rules::Misbehaviours;

use crate::dial::Stopped;

/// The sentence a device says when the instance closed with 4400 (the CLI's own words).
pub const PROTOCOL_MISMATCH_SENTENCE: &str =
    "the instance and this CLI speak different link protocols — update one of them";

/// What the command tells the person running it (on stderr) when its run stopped by itself:
/// why, and what to do about it; `None`: nothing to tell.
pub fn last_words(
    stopped: Option<&crate::dial::Stopped>,
    misbehave: &Misbehaviours,
) -> Option<String> {
    match stopped? {
        // Misbehaving: it stops for good without a word on why.
        crate::dial::Stopped::ProtocolMismatch
            if misbehave.breaks(harness::rules::ids::DEVICE_LINK_4400_MESSAGE) =>
        {
            None
        }
        // Misbehaving: a word on it, but none on the protocols or an update.
        crate::dial::Stopped::ProtocolMismatch
            if misbehave.breaks_way(harness::rules::ids::DEVICE_LINK_4400_MESSAGE, "vague") =>
        {
            Some("fake-device: the instance closed the link (4400); not dialling again".into())
        }
        crate::dial::Stopped::ProtocolMismatch => {
            Some(format!("fake-device: {PROTOCOL_MISMATCH_SENTENCE}"))
        }
        crate::dial::Stopped::Unauthorized => {
            Some("fake-device: the instance refused this device's token (401); log in again".into())
        }
        crate::dial::Stopped::ByUs | crate::dial::Stopped::GaveUp => None,
    }
}
/// How a run ended.
#[derive(Debug)]
pub struct Finished {
    /// The scenario's verdict, when one ran.
    pub outcome: Option<RunOutcome>,
    /// What the monitors found.
    pub findings: Vec<Finding>,
    /// The last messages.
    pub recent: Vec<Entry>,
    /// Why a simulated device stopped dialling, when it did by itself.
    pub stopped: Option<Stopped>,
}

impl Finished {
    /// What a run `ended` with, and why its device stopped dialling, if it did by itself.
    pub(crate) fn of(ended: harness::embed::Ended, stopped: Option<Stopped>) -> Finished {
        Finished {
            outcome: ended.outcome,
            findings: ended.findings,
            recent: ended.recent,
            stopped,
        }
    }
}

impl From<Finished> for harness::embed::Ended {
    fn from(finished: Finished) -> Self {
        harness::embed::Ended {
            outcome: finished.outcome,
            findings: finished.findings,
            recent: finished.recent,
        }
    }
}
