//! The exit codes every binary of the suite uses.

/// How a run ended, as a process exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Exit {
    /// The peer passed every check.
    Passed = 0,
    /// The peer broke a check.
    PeerFailed = 1,
    /// The command line or the scenario is wrong.
    Usage = 2,
    /// The double itself failed.
    Internal = 3,
    /// fake-device only: the instance closed the link with 4400 (different link protocols).
    ProtocolMismatch = 4,
    /// fake-device only: the instance refused the device's token (401).
    Unauthorized = 5,
    /// A scenario run was stopped (SIGINT, SIGTERM) before it reached a verdict: never a pass.
    Interrupted = 6,
    /// fake-device, a fleet: a `--threshold` was crossed (and its devices found no rule broken).
    ThresholdCrossed = 7,
}

impl From<Exit> for std::process::ExitCode {
    fn from(exit: Exit) -> Self {
        std::process::ExitCode::from(exit as u8)
    }
}
