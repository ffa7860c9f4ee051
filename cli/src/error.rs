//! What stops the `harness` command short of a verdict, or one run of the matrix or the
//! self-test short of an outcome: one error type for the whole command layer, each kind with its
//! typed cause, and the one place that says which exit code each kind ends the process with.
//! Each kind's message is the one the command has always printed after `error: `; the tests and
//! the guide quote them.

use std::net::SocketAddr;
use std::path::PathBuf;

use harness::Exit;
use harness::scenario::LoadError;

/// Why a command (or one of its runs) stopped without a verdict.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A flag's value the command cannot take (`--report pdf:x`).
    #[error("{flag}{}: {want}", quoted(said))]
    Argument {
        /// The flag (`--report`).
        flag: &'static str,
        /// What was typed, when the message quotes it.
        said: Option<String>,
        /// What the flag takes, as the message says it.
        want: &'static str,
    },
    /// A link protocol in `--protocols` the suite does not have.
    #[error("--protocols: {0} is not 1 or 2")]
    Protocol(u8),
    /// `harness rules --section` named no catalogue file.
    #[error("--section: no catalogue file is named `{name}`; the sections: {}", sections.join(", "))]
    Section {
        /// The name typed.
        name: String,
        /// The catalogue's sections, in its order.
        sections: Vec<String>,
    },
    /// The `--expected-failures` baseline could not be read.
    #[error("--expected-failures: {0}")]
    Baseline(Box<LoadError>),
    /// A scenario that does not load (its message names the file).
    #[error("{0}")]
    Scenario(Box<LoadError>),
    /// An embedded scenario that does not load, named by its folder and file (`instance/x.yaml`)
    /// because its own message may not say which folder.
    #[error("{label}: {source}")]
    Embedded {
        /// `folder/file`.
        label: String,
        /// Why it does not load.
        source: Box<LoadError>,
    },
    /// A folder of scenarios that could not be read.
    #[error("{folder}: {source}")]
    Folder {
        /// The folder, as typed.
        folder: String,
        /// Why.
        source: std::io::Error,
    },
    /// A folder with no scenario in it.
    #[error("{0}: no .yaml scenario in it")]
    EmptyFolder(String),
    /// A scenario file whose folder does not say which double runs it, and no `--side`.
    #[error(
        "{}: which double runs it? Keep it in an instance/ or device/ folder, or say --side",
        .0.display()
    )]
    NoSide(PathBuf),
    /// An argument of `harness run` that is no file, no folder, and no embedded scenario's name.
    #[error(
        "`{0}` is neither a file nor a folder; name an embedded scenario as instance/NAME or device/NAME (lvmh/instance/NAME for lvmh), or say --side"
    )]
    NotAScenario(String),
    /// `harness run` given scenarios of both doubles.
    #[error(
        "the scenarios are for both doubles; one run tests one project (a CLI with instance/ scenarios, a web server with device/ ones)"
    )]
    BothSides,
    /// Scenarios with no system under test to run against: every run would fail the same way.
    #[error(
        "{first} (and {more} more) has no system under test: say --exec CMD (a CLI with {{url}} and {{token}} in it, a web server with {{port}}), or --instance URL for a web server already running"
    )]
    NoSystemUnderTest {
        /// The first such scenario's label.
        first: String,
        /// How many more.
        more: usize,
    },
    /// No cell of `--protocols` × `--specs` is in any selected scenario's matrix.
    #[error("no scenario applies to these protocols and specs")]
    NothingApplies,
    /// An instance scenario's run with nothing to start its CLI under test.
    #[error(
        "a CLI under test must be started by the run: say --exec CMD (with {{url}} and {{token}} in it)"
    )]
    NoExec,
    /// A device scenario's run with no web server under test to start or to dial.
    #[error(
        "a web server under test is started by the run (--exec CMD, with {{port}} in it) or already running (--instance URL)"
    )]
    NoInstance,
    /// The web server under test could not be started; fake-device says why in its own words.
    #[error("{0}")]
    SystemUnderTest(#[source] fake_device::InstanceStartError),
    /// The peer settings fake-device reads from an lvmh scenario's `peer:` section are wrong;
    /// fake-device says why in its own words.
    #[error("{0}")]
    PeerSettings(#[source] fake_device::lvmh::PeerSettingsError),
    /// fake-instance could not start (or be set up as asked).
    #[error("{0}")]
    Instance(Box<fake_instance::StartError>),
    /// fake-device could not start (or be set up as asked).
    #[error("{0}")]
    Device(Box<fake_device::StartError>),
    /// A double's run ended with no verdict.
    #[error("{0} ended without a verdict")]
    NoVerdict(&'static str),
    /// The scratch folder (a trusted root) of a run could not be made.
    #[error("cannot make a root: {0}")]
    Root(std::io::Error),
    /// A run's task panicked: a bug of ours.
    #[error("the run panicked: {0}")]
    Panicked(tokio::task::JoinError),
    /// `harness merge`: a report that could not be read or merged (the message names the file).
    #[error("{0}")]
    Merge(String),
    /// A generated text or a report of `harness run` could not be written.
    #[error("cannot write {}: {source}", path.display())]
    Write {
        /// Where.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// `harness run`'s JUnit reports could not be written.
    #[error("cannot write the JUnit reports: {0}")]
    Junit(std::io::Error),
    /// The self-test's HTML report could not be written. Its own kind, apart from [`Error::Write`],
    /// because the self-test has always ended it as a usage error.
    #[error("cannot write {}: {source}", path.display())]
    SelftestReport {
        /// Where.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// `harness coverage --write` could not write its report.
    #[error("{}: {source}", path.display())]
    CoverageWrite {
        /// Where.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// `harness coverage` could not print its report.
    #[error("{0}")]
    Stdout(std::io::Error),
    /// The harness's command-line helpers failed (the runtime, `--hooks`); they chose the exit.
    #[error(transparent)]
    Harness(#[from] harness::cli::CliError),
    /// `harness explore` drew a sequence the engine could not run as a scenario: a bug of
    /// ours, shown with the scenario it wrote.
    #[error("harness explore wrote a scenario it cannot run (a bug of ours): {0}")]
    Explored(String),
    /// `harness record` failed.
    #[error(transparent)]
    Record(#[from] RecordError),
}

/// Why `harness record` stopped.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// The folder for the journal and the drafts could not be made.
    #[error("cannot make {}: {source}", path.display())]
    MakeDir {
        /// The folder.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The journal or a draft could not be written.
    #[error("cannot write {}: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The HTTP client that passes requests on could not be made.
    #[error("cannot make an HTTP client: {0}")]
    HttpClient(reqwest::Error),
    /// The proxy could not listen where asked.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// A draft could not be written as YAML.
    #[error("cannot write the draft as YAML: {0}")]
    Yaml(serde_saphyr::SerializeError),
}

// Boxed: a `LoadError` is over a hundred bytes, and every `Result` of the command layer would
// carry that much.
impl From<LoadError> for Error {
    fn from(e: LoadError) -> Error {
        Error::Scenario(Box::new(e))
    }
}

// Boxed too: a double's start error carries its typed cause (a `LoadError` among them).
impl From<fake_instance::StartError> for Error {
    fn from(e: fake_instance::StartError) -> Error {
        Error::Instance(Box::new(e))
    }
}

impl From<fake_device::StartError> for Error {
    fn from(e: fake_device::StartError) -> Error {
        Error::Device(Box::new(e))
    }
}

impl Error {
    /// The exit code the process ends with for it.
    pub fn exit(&self) -> Exit {
        match self {
            Error::Harness(e) => e.exit(),
            // The machine failed, not the command line: what the command made cannot be kept.
            Error::Write { .. } | Error::Junit(_) | Error::Explored(_) => Exit::Internal,
            // A run that could not run ends the matrix as a usage or scenario error (see
            // `run::Summary::only_set_up_broke`); the same kind of error says the same.
            Error::NoExec
            | Error::NoInstance
            | Error::SystemUnderTest(_)
            | Error::PeerSettings(_)
            | Error::Instance(_)
            | Error::Device(_)
            | Error::NoVerdict(_)
            | Error::Root(_)
            | Error::Panicked(_) => Exit::Usage,
            Error::Argument { .. }
            | Error::Protocol(_)
            | Error::Section { .. }
            | Error::Baseline(_)
            | Error::Scenario(_)
            | Error::Embedded { .. }
            | Error::Folder { .. }
            | Error::EmptyFolder(_)
            | Error::NoSide(_)
            | Error::NotAScenario(_)
            | Error::BothSides
            | Error::NoSystemUnderTest { .. }
            | Error::NothingApplies
            | Error::SelftestReport { .. }
            | Error::CoverageWrite { .. }
            | Error::Stdout(_)
            | Error::Record(_)
            | Error::Merge(_) => Exit::Usage,
        }
    }
}

/// ` VALUE` when the message quotes what was typed, else nothing.
fn quoted(said: &Option<String>) -> String {
    said.as_ref().map(|s| format!(" {s}")).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The words each kind says are the ones the command said before it had kinds (the guide
    /// and the tests quote them), and each ends the process as it did.
    #[test]
    fn each_kind_says_what_the_command_always_said_and_exits_as_it_did() {
        let io = || std::io::Error::from(std::io::ErrorKind::NotFound);
        let cases: Vec<(Error, &str, Exit)> = vec![
            (
                Error::Argument {
                    flag: "--report",
                    said: Some("pdf:x".into()),
                    want: "say junit:DIR, json:PATH or html:PATH",
                },
                "--report pdf:x: say junit:DIR, json:PATH or html:PATH",
                Exit::Usage,
            ),
            (
                Error::Argument {
                    flag: "--report",
                    said: None,
                    want: "say html:PATH",
                },
                "--report: say html:PATH",
                Exit::Usage,
            ),
            (
                Error::Protocol(3),
                "--protocols: 3 is not 1 or 2",
                Exit::Usage,
            ),
            (
                Error::Section {
                    name: "bogus".into(),
                    sections: vec!["commands".into(), "initialize".into()],
                },
                "--section: no catalogue file is named `bogus`; the sections: commands, initialize",
                Exit::Usage,
            ),
            (
                Error::NoSystemUnderTest {
                    first: "scenarios/instance/x.yaml".into(),
                    more: 2,
                },
                "scenarios/instance/x.yaml (and 2 more) has no system under test: say --exec CMD (a CLI with {url} and {token} in it, a web server with {port}), or --instance URL for a web server already running",
                Exit::Usage,
            ),
            (
                Error::NoExec,
                "a CLI under test must be started by the run: say --exec CMD (with {url} and {token} in it)",
                Exit::Usage,
            ),
            (
                Error::NoInstance,
                "a web server under test is started by the run (--exec CMD, with {port} in it) or already running (--instance URL)",
                Exit::Usage,
            ),
            (
                Error::NoVerdict("fake-device"),
                "fake-device ended without a verdict",
                Exit::Usage,
            ),
            (
                Error::Root(io()),
                "cannot make a root: entity not found",
                Exit::Usage,
            ),
            (
                Error::Write {
                    path: "out/x.json".into(),
                    source: io(),
                },
                "cannot write out/x.json: entity not found",
                Exit::Internal,
            ),
            (
                Error::Junit(io()),
                "cannot write the JUnit reports: entity not found",
                Exit::Internal,
            ),
            (
                Error::SelftestReport {
                    path: "x.html".into(),
                    source: io(),
                },
                "cannot write x.html: entity not found",
                Exit::Usage,
            ),
            (
                Error::CoverageWrite {
                    path: "x.md".into(),
                    source: io(),
                },
                "x.md: entity not found",
                Exit::Usage,
            ),
            (
                RecordError::Write {
                    path: "out/journal.jsonl".into(),
                    source: io(),
                }
                .into(),
                "cannot write out/journal.jsonl: entity not found",
                Exit::Usage,
            ),
            (
                harness::cli::CliError::Internal("cannot start the runtime: no".into()).into(),
                "cannot start the runtime: no",
                Exit::Internal,
            ),
        ];
        for (error, says, exit) in cases {
            assert_eq!(error.to_string(), says);
            assert_eq!(error.exit(), exit, "{says}");
        }
    }
}
