//! The `fake-device` command, for the binary to call: it reads the command line, runs the device
//! (or a fleet, or `serve --stdio`), and exits with the suite's codes.

mod args;
mod fleet;
mod serve;

use std::process::ExitCode;

use clap::Parser;
use harness::Exit;
use harness::cli::CliError;
use harness::engine::Cell;
use harness::rules::Binds;
use harness::scenario::Side;

use crate::{ProtocolChoice, Stopped};
use args::{Cli, Command, scripts_of};

/// Runs the `fake-device` command with the process's arguments.
pub fn main() -> ExitCode {
    harness::cli::exit_with(run(Cli::parse()))
}

/// The command's run; every error says which exit code it ends with.
fn run(cli: Cli) -> Result<Exit, CliError> {
    cli.common.start_process();
    if let Some(Command::Serve(args)) = cli.command {
        return serve::serve(args);
    }
    if cli.common.list_scenarios {
        harness::cli::list_scenarios_in(Side::Device, cli.common.family.unwrap_or_default());
        return Ok(Exit::Passed);
    }
    let lvmh = plays_lvmh(&cli);
    if lvmh && cli.fleet.is_some() {
        return Err(CliError::Usage(
            "--fleet is not there for --family lvmh yet: run one plugin a process".into(),
        ));
    }
    if cli.fleet.is_some() {
        fleet::fleet_refusals(&cli)?;
    }
    let runtime = harness::cli::runtime(false)?;
    let under_test = InstanceUnderTest::start(&cli, &runtime, lvmh)?;
    let Some(instance) = cli
        .instance
        .clone()
        .or_else(|| under_test.started.as_ref().map(|(_, url)| url.clone()))
    else {
        return Err(CliError::Usage("--instance URL is required".into()));
    };
    let protocol = ProtocolChoice::from(cli.protocol);
    let read = ReadFiles::of(&cli)?;
    let cell = match lvmh {
        true => Cell::Lvmh,
        false => Cell::lembas(
            cell_protocol(&cli, protocol, &instance, &under_test, &runtime)?,
            cli.common.spec,
        ),
    };
    check_capabilities(&cli, &cell)?;
    let scenario = match &cli.common.scenario {
        Some(arg) => Some(harness::cli::load_scenario_in(
            arg,
            Side::Device,
            cli.common.family,
            &cell,
        )?),
        None => None,
    };
    let InstanceUnderTest {
        roots,
        started,
        made_root,
    } = under_test;
    let control = cli.common.control_config()?;
    let mut options = options(&cli, instance, roots, protocol, cell, lvmh, read);
    options.control = control;
    options.sut = started.map(|(sut, _)| sut);
    if let Some(count) = cli.fleet {
        return fleet::fleet(&cli, count as usize, options, &runtime);
    }
    let exit = run_device(&cli, options, scenario, &cell, runtime);
    drop(made_root);
    exit
}

/// What one fleet process runs, as its command line says: for recipes' tests, which check a
/// manifest's command lines with the command's own reading of them.
#[derive(Debug, Clone)]
pub struct FleetSlice {
    /// How many devices the whole fleet has (`--fleet`).
    pub devices: usize,
    /// Which slice of them this process runs.
    pub shard: crate::Shard,
    /// Its reports.
    pub reports: Vec<harness::report::ReportTarget>,
    /// Its workload file.
    pub workload: Option<std::path::PathBuf>,
}

/// Reads `argv` (with the program's name first) as `fake-device` does, with `job_index` as
/// the value of `JOB_COMPLETION_INDEX`: the fleet it runs, or why the command would refuse it.
pub fn fleet_slice(argv: &[String], job_index: Option<&str>) -> Result<FleetSlice, String> {
    let cli = Cli::try_parse_from(argv).map_err(|e| e.to_string())?;
    let devices = cli.fleet.ok_or("no --fleet")? as usize;
    let shard = fleet::shard_of(&cli, job_index).map_err(|e| e.to_string())?;
    Ok(FleetSlice {
        devices,
        shard,
        reports: cli.common.reports.clone(),
        workload: cli.workload.clone(),
    })
}

/// Whether the device plays lvmh's plugin: said with `--family lvmh`, or by the scenario's
/// family. lvmh has one version and no discovery: its cell is known without asking the daemon.
fn plays_lvmh(cli: &Cli) -> bool {
    let lvmh = harness::scenario::Family::Lvmh;
    cli.common.family == Some(lvmh)
        || cli.common.scenario.as_deref().is_some_and(|arg| {
            harness::scenario::catalogue::resolve_in(
                arg,
                Side::Device,
                cli.common.family.unwrap_or_default(),
            )
            .is_ok_and(|s| s.family == lvmh)
        })
}

/// The instance under test when this run starts it (`--exec`), before discovery is read since
/// it serves it; and the device's roots, the first being `{root}` (one made here when none was
/// given, kept for the run's life).
struct InstanceUnderTest {
    roots: Vec<String>,
    started: Option<(std::sync::Arc<harness::process::Sut>, String)>,
    made_root: Option<tempfile::TempDir>,
}

impl InstanceUnderTest {
    fn start(
        cli: &Cli,
        runtime: &tokio::runtime::Runtime,
        lvmh: bool,
    ) -> Result<InstanceUnderTest, CliError> {
        let mut roots = cli.roots.clone();
        let Some(exec) = &cli.common.exec else {
            return Ok(InstanceUnderTest {
                roots,
                started: None,
                made_root: None,
            });
        };
        let made_root = match roots.is_empty() {
            true => {
                let dir = harness::random::temp_dir()
                    .map_err(|e| CliError::Internal(format!("cannot make a root: {e}")))?;
                roots.push(dir.path().display().to_string());
                Some(dir)
            }
            false => None,
        };
        let protocol = match cli.protocol {
            args::ProtocolArg::One => 1,
            _ => 2,
        };
        let cell = Cell::lembas(protocol, cli.common.spec);
        let root = std::path::PathBuf::from(&roots[0]);
        let started = runtime
            .block_on(crate::start_instance(
                harness::process::SutSpec::command(exec.clone()),
                cli.instance.as_deref(),
                &cli.token.value,
                &cell,
                &root,
                match lvmh {
                    true => harness::family::Family::Lvmh,
                    false => harness::family::Family::Lembas,
                },
            ))
            .map_err(|e| CliError::Usage(format!("--exec: {e}")))?;
        Ok(InstanceUnderTest {
            roots,
            started: Some(started),
            made_root,
        })
    }
}

/// The protocol of the cell: a scenario's `${protocol}` and `when: {protocol}` follow the
/// link's, which under `auto` is what the instance's discovery allows.
fn cell_protocol(
    cli: &Cli,
    protocol: ProtocolChoice,
    instance: &str,
    under_test: &InstanceUnderTest,
    runtime: &tokio::runtime::Runtime,
) -> Result<u8, CliError> {
    match (protocol, &cli.common.scenario) {
        (ProtocolChoice::Fixed(p), _) => Ok(p),
        (ProtocolChoice::Auto, None) => Ok(2),
        (ProtocolChoice::Auto, Some(_)) => {
            let sut = under_test.started.as_ref().map(|(sut, _)| sut.clone());
            runtime
                .block_on(probe_discovery(instance, sut))
                .map_err(|e| CliError::Peer(format!("cannot read the instance's discovery: {e}")))
        }
    }
}

/// The protocol the instance's discovery allows. An instance this run started may end before
/// it serves: that is said at once, with what it printed, rather than after the probe's 30 s.
async fn probe_discovery(
    instance: &str,
    sut: Option<std::sync::Arc<harness::process::Sut>>,
) -> Result<u8, String> {
    let within = std::time::Duration::from_secs(30);
    let probe = crate::probe_protocol(instance, within);
    let Some(sut) = sut else {
        return probe.await;
    };
    tokio::select! {
        probed = probe => probed,
        Some(exit) = sut.wait_exit(std::time::Instant::now() + within) => {
            let said: Vec<String> = sut
                .output()
                .tail(20)
                .iter()
                .map(|l| format!("  {}: {}", l.stream, l.text))
                .collect();
            Err(format!(
                "the instance --exec started ended ({exit}) before it served discovery; its output:\n{}",
                said.join("\n")
            ))
        }
    }
}

/// `--capabilities` names only capabilities of the cell's spec.
fn check_capabilities(cli: &Cli, cell: &Cell) -> Result<(), CliError> {
    let (Some(list), Some(spec)) = (&cli.capabilities, cell.spec()) else {
        return Ok(());
    };
    match list.iter().find(|c| !spec.defines(c)) {
        Some(unknown) => Err(CliError::Usage(format!(
            "--capabilities: `{unknown}` is not a capability of harness spec {spec} ({})",
            spec.capabilities().join(", ")
        ))),
        None => Ok(()),
    }
}

/// What the command line names by file or id, read (and refused) before the instance is asked
/// anything.
struct ReadFiles {
    scripts: Vec<crate::AgentScript>,
    misbehave: harness::rules::Misbehaviours,
    hooks: Option<std::sync::Arc<harness::hooks::Hooks>>,
}

impl ReadFiles {
    fn of(cli: &Cli) -> Result<ReadFiles, CliError> {
        Ok(ReadFiles {
            scripts: scripts_of(cli.scripts.as_deref())?,
            misbehave: harness::cli::misbehaviours(&cli.common.misbehave, Binds::Device)?,
            hooks: harness::cli::hooks(cli.common.hooks.as_deref())?,
        })
    }
}

/// The device's options from the command line.
fn options(
    cli: &Cli,
    instance: String,
    roots: Vec<String>,
    protocol: ProtocolChoice,
    cell: Cell,
    lvmh: bool,
    read: ReadFiles,
) -> crate::Options {
    crate::Options {
        family: match lvmh {
            true => harness::scenario::Family::Lvmh,
            false => harness::scenario::Family::Lembas,
        },
        plugin: None,
        instance,
        token: cli.token.value.clone(),
        roots,
        protocol,
        cell,
        journal: cli.common.journal.clone(),
        misbehave: read.misbehave,
        patience: std::time::Duration::from_secs(5),
        limits: harness::transport::FrameLimits {
            max_message_bytes: cli.common.max_message_bytes,
            ..harness::transport::FrameLimits::default()
        },
        state_dir: cli.common.state_dir.clone(),
        agent: cli.agent.into(),
        change_limits_after: None,
        initialize_after: None,
        terminal: Default::default(),
        approval_timeout: cli.approval_timeout.map(|d| d.0),
        step_delay: cli.step_delay.map(|d| d.0),
        max_mode: cli.max_mode.clone(),
        local_personalization: None,
        library_local: cli.local_library,
        untrusted: cli.untrusted.clone(),
        scripts: read.scripts,
        remote_terminal: cli.terminal,
        terminal_home: None,
        terminal_integration: !cli.no_terminal_integration,
        steps: Vec::new(),
        capabilities: cli.capabilities.clone(),
        arranged: harness::engine::Arranged::from_names(&cli.common.arranged),
        sut: None,
        process: None,
        hooks: read.hooks,
        console: cli.console,
        control: None,
        end_at_finding: None,
        lean: cli.fleet.is_some(),
        recorder: None,
    }
}

/// Runs one device until its scenario ends or a signal comes; its exit says how the instance
/// did, or that it stopped the device (4400, 401).
fn run_device(
    cli: &Cli,
    options: crate::Options,
    scenario: Option<harness::scenario::Scenario>,
    cell: &Cell,
    runtime: tokio::runtime::Runtime,
) -> Result<Exit, CliError> {
    let control = options.control.clone();
    let misbehave = options.misbehave.clone();
    let done = harness::cli::run_announced(
        runtime,
        control.as_ref(),
        cli.common.events,
        |_| {},
        |ready, shutdown| crate::run_with(options, scenario, ready, shutdown),
    )?;
    if let Some(words) = crate::last_words(done.stopped.as_ref(), &misbehave) {
        eprintln!("{words}");
    }
    Ok(match done.stopped {
        Some(Stopped::ProtocolMismatch) => Exit::ProtocolMismatch,
        Some(Stopped::Unauthorized) => Exit::Unauthorized,
        _ => harness::cli::finish(
            "fake-device",
            &cli.common,
            cell,
            done.outcome.as_ref(),
            &done.findings,
            &done.recent,
        ),
    })
}
