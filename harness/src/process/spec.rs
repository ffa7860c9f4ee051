//! How a user says to start the system under test: `--exec CMD`, or a scenario's `sut:` (a
//! command, or a map with its environment, directory and grace period).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Deserialize;

use crate::duration::Dur;

/// How long a stop waits after SIGTERM before SIGKILL, unless the `sut:` says.
pub const DEFAULT_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

/// The system under test's command and how to run it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SutSpec {
    /// The command, run by `sh -c`, with placeholders (`{url}`, `{ws_url}`, `{token}`, `{tmp}`,
    /// `{root}`, `{port}`, `{protocol}`, `{spec}`) shell-quoted into it.
    pub exec: String,
    /// More environment variables (placeholders expanded); every placeholder is also set as
    /// `LEMBAS_TEST_<NAME>`.
    pub env: BTreeMap<String, String>,
    /// Where it runs (placeholders expanded; default: the double's own directory).
    pub cwd: Option<String>,
    /// How long a stop waits after SIGTERM before SIGKILL (default 5s).
    pub grace: Option<Dur>,
    /// Its standard input and output are the link (`serve --stdio`: one message a line), not
    /// output to log: set by the double for a scenario that speaks to the peer that way, never
    /// read from a file.
    pub link_on_stdio: bool,
    /// The port it serves on (a web server under test), set by the double, never read from a
    /// file: a start counts as up once something accepts connections there, so a restart
    /// returns only then, as the run's first step waits for it.
    pub listens_on: Option<u16>,
}

impl SutSpec {
    /// Just a command.
    pub fn command(exec: impl Into<String>) -> Self {
        SutSpec {
            exec: exec.into(),
            env: BTreeMap::new(),
            cwd: None,
            grace: None,
            link_on_stdio: false,
            listens_on: None,
        }
    }
}

// The loader and the schema read this one shape, so they cannot disagree about a `sut:`.
/// The system under test: a command, or the command with its environment, directory and grace
/// period.
#[derive(Deserialize, JsonSchema)]
#[serde(untagged)]
enum Said {
    /// Just the command.
    Command(String),
    /// The command with its environment, directory and grace period.
    Full(SutMap),
}

/// A `sut:` written as a map.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SutMap {
    /// The command, run by `sh -c`, with placeholders (`{url}`, `{ws_url}`, `{token}`, `{tmp}`,
    /// `{root}`, `{port}`, `{protocol}`, `{protocols}`, `{spec}`) shell-quoted into it.
    exec: String,
    /// More environment variables (placeholders expanded); every placeholder is also set as
    /// `LEMBAS_TEST_<NAME>`.
    #[serde(default)]
    env: BTreeMap<String, String>,
    /// Where it runs (placeholders expanded; default: the double's own directory).
    #[serde(default)]
    cwd: Option<String>,
    /// How long a stop waits after SIGTERM before SIGKILL (default 5s).
    #[serde(default)]
    grace: Option<Dur>,
}

impl<'de> Deserialize<'de> for SutSpec {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match Said::deserialize(deserializer)? {
            Said::Command(exec) => Ok(SutSpec::command(exec)),
            Said::Full(full) => Ok(SutSpec {
                exec: full.exec,
                env: full.env,
                cwd: full.cwd,
                grace: full.grace,
                link_on_stdio: false,
                listens_on: None,
            }),
        }
    }
}

impl JsonSchema for SutSpec {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "SutSpec".into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        Said::json_schema(generator)
    }
}
