//! What both doubles' command lines share: running a scenario, reports, journal, misbehaviours,
//! and the process set-up (logs on stderr, the TLS provider).

use std::path::PathBuf;

use clap::Args;

use crate::report::ReportTarget;

/// Options common to fake-instance and fake-device.
#[derive(Debug, Clone, Args)]
pub struct CommonArgs {
    /// Run this scenario: a file, or the name of an embedded one (see --list-scenarios).
    #[arg(long, value_name = "FILE")]
    pub scenario: Option<String>,
    /// List the embedded scenarios with what each proves, and exit.
    #[arg(long)]
    pub list_scenarios: bool,
    /// The harness spec to behave as: 1.0.0 or 1.1.0.
    #[arg(long, value_name = "V", default_value = "1.1.0", value_parser = ["1.0.0", "1.1.0"])]
    pub spec: String,
    /// Keep state here across runs (default: a temporary directory).
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// Write every message in and out as JSON lines to this file.
    #[arg(long, value_name = "PATH")]
    pub journal: Option<PathBuf>,
    /// Write a report: junit:PATH or json:PATH (repeatable).
    #[arg(long = "report", value_name = "KIND:PATH")]
    pub reports: Vec<ReportTarget>,
    /// Break the rule with this id on purpose, to prove a check fails (repeatable).
    #[arg(long = "misbehave", value_name = "RULE")]
    pub misbehave: Vec<String>,
}

/// Sets up a process: `RUST_LOG`-driven logs on stderr (stdout is for the ready line and
/// reports), and the rustls crypto provider, without which the first `wss://` dial would panic.
pub fn init_process() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
    let _ = rustls::crypto::ring::default_provider().install_default();
}
