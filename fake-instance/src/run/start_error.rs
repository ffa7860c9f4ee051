//! Why a run could not even start, one variant per cause, each carrying the engine's or the
//! double's own error for it and saying what the command always said; and the command's exit
//! code for each. A leaf room: the LLeMbas run, the lvmh daemon's run and the builder all give
//! it, and none of them is imported back.

use std::net::SocketAddr;

/// Why a run could not even start: each cause as the engine or the double names it, so a test
/// can tell them apart; each says what it always said.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The journal or the run's own directory could not be made.
    #[error(transparent)]
    Open(#[from] harness::double::OpenError),
    /// It did not come up (embedded in a test: see the builder).
    #[error(transparent)]
    NotUp(#[from] harness::embed::NotUp),
    /// The scenario, or a section of it this double reads, does not load; or the double's own
    /// steps are not its actions.
    #[error(transparent)]
    Scenario(#[from] harness::scenario::LoadError),
    /// A `--misbehave` id the double does not know.
    #[error(transparent)]
    Misbehaviour(#[from] harness::rules::UnknownMisbehaviour),
    /// The scenario's variables or handlers do not compile.
    #[error(transparent)]
    Hub(#[from] harness::engine::HubError),
    /// The steps that hooks do for the device under test could not be made.
    #[error(transparent)]
    Steps(#[from] harness::hooks::StepsError),
    /// The device's root could not be laid out as its set-up says.
    #[error(transparent)]
    LayOut(#[from] harness::lembas::setup::LayOutError),
    /// The device under test (or what its project does before it starts) could not start.
    #[error(transparent)]
    Sut(#[from] harness::process::SutError),
    /// A directory the device under test is told of could not be made.
    #[error("cannot make {}: {source}", path.display())]
    Directory {
        /// Which.
        path: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The directory a restarted instance keeps its chats in could not be made.
    #[error("cannot make a state directory: {0}")]
    StateDir(#[source] std::io::Error),
    /// The lvmh daemon's store could not be opened.
    #[error("cannot keep the daemon's state: {0}")]
    DaemonState(#[source] std::io::Error),
    /// The builder was given both a restarting peer and a scenario.
    #[error(transparent)]
    Refused(#[from] harness::embed::RestartedWithScenario),
}

/// The exit code of a run that could not start: one place for the command's mapping. The
/// machine's failures (a port, the journal, a run that never came up) are internal; what the
/// command line or the scenario asked for that cannot be done is a usage error.
#[cfg(feature = "cli")]
impl From<StartError> for harness::cli::CliError {
    fn from(e: StartError) -> Self {
        use harness::double::OpenError;
        match e {
            StartError::Listen { .. }
            | StartError::Open(OpenError::Journal(_))
            | StartError::NotUp(_) => harness::cli::CliError::Internal(e.to_string()),
            StartError::Open(OpenError::Scratch(_))
            | StartError::Scenario(_)
            | StartError::Misbehaviour(_)
            | StartError::Hub(_)
            | StartError::Steps(_)
            | StartError::LayOut(_)
            | StartError::Sut(_)
            | StartError::Directory { .. }
            | StartError::StateDir(_)
            | StartError::DaemonState(_)
            | StartError::Refused(_) => harness::cli::CliError::Usage(e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::StartError;

    /// The instance's own causes read and exit as the strings they replaced did (those it shares
    /// with the device, such as a journal or a scratch directory, are fake-device's to check): a
    /// port or a run that never came up is internal, a directory the run was asked for usage.
    #[cfg(feature = "cli")]
    #[test]
    fn its_own_causes_read_and_exit_as_they_did_when_they_were_strings() {
        use harness::cli::CliError::{Internal, Usage};
        let io = || std::io::Error::other("denied");
        let listen = StartError::Listen {
            addr: ([127, 0, 0, 1], 9).into(),
            source: io(),
        };
        let late = StartError::from(harness::embed::NotUp::Late {
            double: "fake-instance",
            within: std::time::Duration::from_secs(1),
        });
        let root = StartError::Directory {
            path: "/r".into(),
            source: io(),
        };
        let said = [
            listen,
            late,
            root,
            StartError::StateDir(io()),
            StartError::DaemonState(io()),
        ]
        .map(|e| match e.into() {
            Internal(text) => format!("internal: {text}"),
            Usage(text) => format!("usage: {text}"),
            other => format!("other: {other}"),
        });
        assert_eq!(
            said,
            [
                "internal: cannot listen on 127.0.0.1:9: denied",
                "internal: fake-instance was not up within 1s",
                "usage: cannot make /r: denied",
                "usage: cannot make a state directory: denied",
                "usage: cannot keep the daemon's state: denied",
            ]
        );
    }
}
