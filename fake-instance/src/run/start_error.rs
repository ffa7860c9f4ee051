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

    /// The typed causes read and exit as the strings they replaced did: the machine's failures
    /// internal, the rest usage errors.
    #[cfg(feature = "cli")]
    #[test]
    fn each_cause_reads_and_exits_as_it_did_when_it_was_a_string() {
        use harness::cli::CliError;
        use harness::double::OpenError;
        let io = || std::io::Error::other("denied");
        let cases: Vec<(StartError, &str, bool)> = vec![
            (
                StartError::Listen {
                    addr: ([127, 0, 0, 1], 9).into(),
                    source: io(),
                },
                "cannot listen on 127.0.0.1:9: denied",
                true,
            ),
            (
                OpenError::Journal(io()).into(),
                "cannot write the journal: denied",
                true,
            ),
            (
                OpenError::Scratch(io()).into(),
                "cannot make a temporary directory: denied",
                false,
            ),
            (
                harness::embed::NotUp::Late {
                    double: "fake-instance",
                    within: std::time::Duration::from_secs(1),
                }
                .into(),
                "fake-instance was not up within 1s",
                true,
            ),
            (
                StartError::Directory {
                    path: "/r".into(),
                    source: io(),
                },
                "cannot make /r: denied",
                false,
            ),
            (
                StartError::StateDir(io()),
                "cannot make a state directory: denied",
                false,
            ),
            (
                StartError::DaemonState(io()),
                "cannot keep the daemon's state: denied",
                false,
            ),
        ];
        for (error, said, internal) in cases {
            assert_eq!(error.to_string(), said);
            match CliError::from(error) {
                CliError::Internal(text) => assert!(internal, "{text}"),
                CliError::Usage(text) => assert!(!internal, "{text}"),
                CliError::Peer(text) => panic!("not a peer's failure: {text}"),
            }
        }
    }

    /// A builder told an unknown misbehaviour says which, typed, not as a sentence only.
    #[test]
    fn an_unknown_misbehaviour_is_its_own_kind_of_start_error() {
        let Err(refused) = crate::FakeInstance::builder().misbehave("no.such") else {
            panic!("an unknown misbehaviour is an error");
        };
        let StartError::Misbehaviour(unknown) = refused else {
            panic!("not typed: {refused}");
        };
        assert_eq!(unknown.id, "no.such");
    }
}
