//! Why the web server under test (`--exec`) could not be started for a device's run: kept apart
//! from the run so that the `harness` command, which starts the same server for its matrix,
//! can name the error without depending on the engine crate.

use harness::lvmh::gitlab::GitLabError;
use harness::process::SutError;

/// Why `start_instance` gave no web server under test.
#[derive(Debug, thiserror::Error)]
pub enum InstanceStartError {
    /// No free port to tell it to listen on.
    #[error("cannot find a free port: {0}")]
    Port(#[source] std::io::Error),
    /// No directory for its `{tmp}`.
    #[error("cannot make a temporary directory: {0}")]
    Scratch(#[source] std::io::Error),
    /// An lvmh daemon's fake GitLab is not there.
    #[error(transparent)]
    GitLab(#[from] GitLabError),
    /// Its command is written wrong, or would not start.
    #[error(transparent)]
    Sut(#[from] SutError),
}
