//! Why a run could not start, one variant per cause, each carrying the engine's or the device's
//! own error for it and saying what the command always said; and the command's exit code for
//! each. A leaf room: the LLeMbas run, the lvmh plugin's run and the builder all give it, and
//! none of them is imported back.

/// Why a run could not start: each cause as the engine or the device names it, so a test can
/// tell them apart; each says what it always said.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The journal or the run's own directory could not be made.
    #[error(transparent)]
    Open(#[from] harness::double::OpenError),
    /// It did not come up (embedded in a test: see the builder).
    #[error(transparent)]
    NotUp(#[from] harness::embed::NotUp),
    /// A restart's run had no thread to run on.
    #[error("its thread could not start")]
    NoThread,
    /// The scenario, or a section of it this double reads, does not load; or the device's own
    /// steps are not its actions.
    #[error(transparent)]
    Scenario(#[from] harness::scenario::LoadError),
    /// A `--misbehave` id the double does not know.
    #[error(transparent)]
    Misbehaviour(#[from] harness::rules::UnknownMisbehaviour),
    /// The scenario's variables or handlers do not compile.
    #[error(transparent)]
    Hub(#[from] harness::engine::HubError),
    /// The steps that hooks do for the instance under test could not be made.
    #[error(transparent)]
    Steps(#[from] harness::hooks::StepsError),
    /// The store could not be opened in its directory.
    #[error("cannot open the state directory {}: {source}", path.display())]
    State {
        /// The directory.
        path: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The control API could not listen.
    #[error("cannot serve the control API on {addr}: {source}")]
    Control {
        /// Where it was to listen.
        addr: std::net::SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The lvmh plugin's fake GitLab is not there.
    #[error(transparent)]
    GitLab(#[from] harness::lvmh::gitlab::GitLabError),
    /// The instance's discovery never said which protocol to speak (free text: the
    /// discovery probe's own words).
    #[error("{0}")]
    Discovery(String),
    /// What the builder was told to play (its peer's set-up) could not be laid out (free
    /// text: the play's own words).
    #[error("{0}")]
    Play(String),
    /// The builder was given both a restarting peer and a scenario.
    #[error(transparent)]
    Refused(#[from] harness::embed::RestartedWithScenario),
}

/// The exit code of a run that could not start: one place for the command's mapping. The
/// machine's failures (the journal, a run that never came up) are internal; what the command
/// line or the scenario asked for that cannot be done is a usage error.
#[cfg(feature = "cli")]
impl From<StartError> for harness::cli::CliError {
    fn from(e: StartError) -> Self {
        use harness::double::OpenError;
        match e {
            StartError::Open(OpenError::Journal(_))
            | StartError::NotUp(_)
            | StartError::NoThread => harness::cli::CliError::Internal(e.to_string()),
            StartError::Open(OpenError::Scratch(_))
            | StartError::Scenario(_)
            | StartError::Misbehaviour(_)
            | StartError::Hub(_)
            | StartError::Steps(_)
            | StartError::State { .. }
            | StartError::Control { .. }
            | StartError::GitLab(_)
            | StartError::Discovery(_)
            | StartError::Play(_)
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
                OpenError::Journal(io()).into(),
                "cannot write the journal: denied",
                true,
            ),
            (
                OpenError::Scratch(io()).into(),
                "cannot make a temporary directory: denied",
                false,
            ),
            (StartError::NoThread, "its thread could not start", true),
            (
                StartError::State {
                    path: "/s".into(),
                    source: io(),
                },
                "cannot open the state directory /s: denied",
                false,
            ),
            (
                StartError::Control {
                    addr: ([127, 0, 0, 1], 9).into(),
                    source: io(),
                },
                "cannot serve the control API on 127.0.0.1:9: denied",
                false,
            ),
            (
                harness::embed::RestartedWithScenario.into(),
                "a double restarted by its peer runs no scenario of its own",
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
        let Err(refused) = crate::FakeDevice::builder("http://127.0.0.1:9").misbehave("no.such")
        else {
            panic!("an unknown misbehaviour is an error");
        };
        let StartError::Misbehaviour(unknown) = refused else {
            panic!("not typed: {refused}");
        };
        assert_eq!(unknown.id, "no.such");
    }
}
