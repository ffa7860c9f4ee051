//! The `fake-device` command: a thin shell around [`fake_device::run`].

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use fake_device::{ProtocolChoice, Stopped};
use harness::Exit;
use harness::cli::{CliError, CommonArgs};
use harness::engine::Cell;
use harness::rules::Binds;
use harness::scenario::Side;

/// mimalloc, not the system's allocator: why is in the workspace's Cargo.toml.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const EXAMPLE: &str = "\
Example: check a web server's initialize for a protocol-2 device

  fake-device --instance http://127.0.0.1:8000 --token \"$DEVICE_TOKEN\" \\
      --scenario negotiate.yaml --protocol 2 --report junit:negotiate.xml
  # exits 0 when the server passed, 1 when it broke a rule (the report names it),
  # 2 for a usage or scenario error, 3 for an internal error. Without --scenario it stays
  # linked as a simulated device; it exits 4 when the instance closes with 4400 and 5 when it
  # refuses the token.";

/// Plays LLeMbas CLI (the device) for a LLeMbas web server under test: reads discovery, dials
/// the link, acts as the ACP agent, and checks the instance against the spec.
#[derive(Debug, Parser)]
#[command(name = "fake-device", version = harness::cli::version(), after_help = EXAMPLE, args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// The instance's base URL (http:// or https://).
    /// With --exec and no --instance: the one it starts, on `{port}`.
    #[arg(long, value_name = "URL", required_unless_present_any = ["list_scenarios", "exec"])]
    instance: Option<String>,
    /// The device token.
    #[arg(
        long,
        value_name = "T",
        env = "LEMBAS_DEVICE_TOKEN",
        hide_env_values = true,
        default_value = "lembas-test-token"
    )]
    token: String,
    /// A remote root (repeatable).
    #[arg(long = "root", value_name = "DIR")]
    roots: Vec<String>,
    /// What drives turns: echo (the prompt back) or model (the instance's model, with its tool
    /// calls and cards, as the CLI does).
    #[arg(long, value_enum, default_value = "echo")]
    agent: AgentArg,
    /// The scripted agent's scripts: a YAML list like a scenario's `device.scripts` (a prompt
    /// that matches one runs it; others go to --agent).
    #[arg(long, value_name = "FILE")]
    scripts: Option<std::path::PathBuf>,
    /// How long a card (approval, question, plan) waits for an answer before it is a denial
    /// or a dismissal (`remote.approval_timeout`; default 30s).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    approval_timeout: Option<harness::scenario::Dur>,
    /// `remote.max_mode`: the most permissive mode a client may put a session in; a mode asked
    /// above it is lowered to it (default edit).
    #[arg(long, value_name = "MODE", value_parser = ["plan", "manual", "edit"])]
    max_mode: Option<String>,
    /// `remote.terminal: true`: the instance may open terminals on this device (a real login
    /// shell in a PTY; capabilities `terminal` and `shell`).
    #[arg(long)]
    terminal: bool,
    /// `remote.terminal_integration: false`: the terminals' shells start without the rc wrapper
    /// (no OSC 133/7 marks; `integration: false`).
    #[arg(long)]
    no_terminal_integration: bool,
    /// `library: local`: the model searches a library of the device's own (empty), never the
    /// account's on the instance.
    #[arg(long)]
    local_library: bool,
    /// A folder inside the roots the person has not trusted as a project (repeatable): with
    /// trust required, session/new refuses it.
    #[arg(long, value_name = "DIR")]
    untrusted: Vec<String>,
    /// The protocol to say: auto (from discovery), 1 or 2.
    #[arg(long, value_name = "auto|1|2", default_value = "auto")]
    protocol: String,
    /// List only these capabilities in `initialize` and behave as a device without the others
    /// (comma-separated, e.g. turns,status,delete): a CLI that implements part of the spec.
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    capabilities: Option<Vec<String>>,
    /// Without --scenario: read the actions of a person at this device's terminal from stdin, one
    /// JSON object a line ({"share_session": true}, {"terminal_prompt": "fix it"},
    /// {"change_limits": {"add_root": true}}): how a run that starts fake-device as a stand-in
    /// CLI gives it set-up, with `stdin` hooks.
    #[arg(long)]
    console: bool,
    /// Run this many simulated devices in one process, each with its own token (`--token` with
    /// `{i}` for the device's number from 1, like `tok-{i}`; or `--tokens FILE`), state
    /// directory and link. Prints `{"fleet": {...}}` lines on stdout as devices link.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    fleet: Option<u32>,
    /// The fleet's tokens, one a line (`#` comments and blank lines skipped); without --fleet,
    /// one device a token.
    #[arg(long, value_name = "FILE", requires = "fleet")]
    tokens: Option<std::path::PathBuf>,
    /// Run only this slice of the fleet (2/4: the second quarter of its devices), so one token
    /// file spreads a larger fleet over several machines.
    #[arg(long, value_name = "K/N", requires = "fleet")]
    shard: Option<fake_device::Shard>,
    #[command(flatten)]
    common: CommonArgs,
}

/// `--agent` values.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum AgentArg {
    /// Echo each prompt back.
    Echo,
    /// Ask the instance's model.
    Model,
}

impl From<AgentArg> for fake_device::AgentKind {
    fn from(arg: AgentArg) -> Self {
        match arg {
            AgentArg::Echo => Self::Echo,
            AgentArg::Model => Self::Model,
        }
    }
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Plain ACP on stdin/stdout for editors (and ACP clients): no hello, `limits: null`, no
    /// `_lembas` notifications, no question or plan cards. Only JSON-RPC on stdout; logs go to
    /// stderr.
    Serve(ServeArgs),
}

/// `fake-device serve`'s options.
#[derive(Debug, clap::Args)]
struct ServeArgs {
    /// Speak on stdin/stdout, one message a line (the only transport `serve` has).
    #[arg(long)]
    stdio: bool,
    /// What drives turns: echo, or model (the instance's model: needs --instance).
    #[arg(long, value_enum, default_value = "echo")]
    agent: AgentArg,
    /// The instance whose model `--agent model` asks.
    #[arg(long, value_name = "URL")]
    instance: Option<String>,
    /// The device token for the instance.
    #[arg(
        long,
        value_name = "T",
        env = "LEMBAS_DEVICE_TOKEN",
        hide_env_values = true,
        default_value = "lembas-test-token"
    )]
    token: String,
    /// The scripted agent's scripts (a YAML list like a scenario's `device.scripts`).
    #[arg(long, value_name = "FILE")]
    scripts: Option<std::path::PathBuf>,
    /// How long an approval waits for the editor's answer (default 30s).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    approval_timeout: Option<harness::scenario::Dur>,
    /// Where sessions are kept (default: a temporary directory of the run's own).
    #[arg(long, value_name = "DIR")]
    state_dir: Option<std::path::PathBuf>,
    /// The harness spec to implement: 1.0.0 or 1.1.0.
    #[arg(long, default_value = "1.1.0")]
    spec: harness::lembas::Spec,
    /// Break this rule of the catalogue on purpose (repeatable), to show an editor's or a
    /// harness's check catches it (`device.stdio.*`).
    #[arg(long, value_name = "RULE")]
    misbehave: Vec<String>,
}

/// `fake-device --fleet N`: the devices' tokens, then the fleet run until a signal, or until
/// every device stopped by itself.
fn fleet(
    cli: &Cli,
    count: usize,
    template: fake_device::Options,
    runtime: &tokio::runtime::Runtime,
) -> Result<Exit, CliError> {
    let tokens = fleet_tokens(cli, count)?;
    let devices = tokens.devices(cli.shard.unwrap_or(fake_device::Shard::WHOLE));
    let made_root = match &cli.common.state_dir {
        Some(_) => None,
        None => Some(
            harness::random::temp_dir()
                .map_err(|e| CliError::Internal(format!("cannot make a state directory: {e}")))?,
        ),
    };
    let state_root = cli
        .common
        .state_dir
        .clone()
        .or_else(|| made_root.as_ref().map(|d| d.path().to_path_buf()))
        .unwrap_or_default();
    let finished = runtime.block_on(async {
        // Inside the runtime: the signal handlers need its reactor.
        let shutdown = harness::cli::shutdown_signal();
        fake_device::run_fleet(
            template,
            devices,
            state_root,
            print_fleet_count(),
            FLEET_COUNT_EVERY,
            shutdown,
        )
        .await
    });
    drop(made_root);
    Ok(fleet_exit(&finished))
}

/// How often a fleet looks at how many of its devices are linked (a line is printed when the
/// count changed).
const FLEET_COUNT_EVERY: std::time::Duration = std::time::Duration::from_millis(100);

/// The fleet's tokens: `--tokens FILE` (as many as --fleet asks, from its first line), else
/// `--token` as a pattern holding `{i}`. The same token for every device would make them one
/// device to the instance: a usage error.
fn fleet_tokens(cli: &Cli, count: usize) -> Result<fake_device::FleetTokens, CliError> {
    match &cli.tokens {
        Some(path) => {
            let mut tokens = harness::cli::token_file(path)?;
            if tokens.len() < count {
                return Err(CliError::Usage(format!(
                    "--fleet {count}: {} holds only {} tokens",
                    path.display(),
                    tokens.len()
                )));
            }
            tokens.truncate(count);
            Ok(fake_device::FleetTokens::List(tokens))
        }
        None if cli.token.contains(fake_device::INDEX_PLACEHOLDER) => {
            Ok(fake_device::FleetTokens::Pattern {
                pattern: cli.token.clone(),
                count,
            })
        }
        None => Err(CliError::Usage(format!(
            "--fleet: each device needs a token of its own: give --token a pattern holding {} (tok-{}) or --tokens FILE",
            fake_device::INDEX_PLACEHOLDER,
            fake_device::INDEX_PLACEHOLDER
        ))),
    }
}

/// What a fleet refuses: what it has no single run for.
fn fleet_refusals(cli: &Cli) -> Result<(), CliError> {
    let refused = [
        (cli.common.scenario.is_some(), "--scenario"),
        (cli.common.exec.is_some(), "--exec"),
        (cli.common.control.is_some(), "--control"),
        (cli.console, "--console"),
        (!cli.common.reports.is_empty(), "--report"),
    ];
    if let Some((_, flag)) = refused.iter().find(|(given, _)| *given) {
        return Err(CliError::Usage(format!(
            "--fleet runs devices with the default behaviour: {flag} is for one device"
        )));
    }
    if let Some(journal) = &cli.common.journal
        && !journal
            .to_string_lossy()
            .contains(fake_device::INDEX_PLACEHOLDER)
    {
        return Err(CliError::Usage(format!(
            "--fleet: --journal needs {} in its path, for a journal a device",
            fake_device::INDEX_PLACEHOLDER
        )));
    }
    Ok(())
}

/// Prints the fleet's count as a JSON line on stdout whenever it changed.
fn print_fleet_count() -> impl Fn(fake_device::FleetCount) {
    let last = std::cell::Cell::new(None);
    move |count: fake_device::FleetCount| {
        let now = (count.linked, count.stopped);
        if last.replace(Some(now)) == Some(now) {
            return;
        }
        println!(
            "{}",
            serde_json::json!({"fleet": {
                "devices": count.devices,
                "linked": count.linked,
                "stopped": count.stopped,
                "seconds": (count.elapsed.as_secs_f64() * 1000.0).round() / 1000.0,
            }})
        );
    }
}

/// How a fleet exits: 5 when the instance refused every device, 4 when it closed every one with
/// 4400, 3 when none could start, 1 when its devices found the instance breaking rules (each
/// said on stderr), else 0.
fn fleet_exit(finished: &fake_device::FleetFinished) -> Exit {
    let all = finished.devices;
    for (device, finding) in &finished.examples {
        eprintln!("fake-device: device {device}: finding {finding}");
    }
    if finished.findings > finished.examples.len() {
        eprintln!(
            "fake-device: {} findings in all (the first {} shown)",
            finished.findings,
            finished.examples.len()
        );
    }
    if let Some(error) = &finished.first_error {
        eprintln!(
            "fake-device: {} devices could not start: {error}",
            finished.not_started
        );
    }
    match () {
        () if all > 0 && finished.unauthorized == all => {
            eprintln!("fake-device: the instance refused every device's token (401)");
            Exit::Unauthorized
        }
        () if all > 0 && finished.protocol_mismatch == all => {
            eprintln!("fake-device: {}", fake_device::PROTOCOL_MISMATCH_SENTENCE);
            Exit::ProtocolMismatch
        }
        () if all > 0 && finished.not_started == all => Exit::Internal,
        () if finished.findings > 0 => Exit::PeerFailed,
        () => Exit::Passed,
    }
}

/// `fake-device serve --stdio`.
fn serve(args: ServeArgs) -> Result<Exit, CliError> {
    if !args.stdio {
        return Err(CliError::Usage(
            "say `serve --stdio` (stdin/stdout is the only transport serve has)".into(),
        ));
    }
    if matches!(args.agent, AgentArg::Model) && args.instance.is_none() {
        return Err(CliError::Usage(
            "--agent model asks an instance's model: give --instance URL".into(),
        ));
    }
    let scripts = scripts_of(args.scripts.as_deref())?;
    let mut options = fake_device::Options::for_instance(args.instance.unwrap_or_default());
    options.token = args.token;
    options.agent = args.agent.into();
    options.scripts = scripts;
    options.approval_timeout = args.approval_timeout.map(|d| d.0);
    options.state_dir = args.state_dir;
    options.cell.spec = args.spec;
    options.misbehave = harness::cli::misbehaviours(&args.misbehave, Binds::Device)?;
    let runtime = harness::cli::runtime(false)?;
    let finished = runtime.block_on(async {
        let connection = harness::transport::stdio::stdio(options.limits);
        fake_device::serve_stdio(options, connection, harness::cli::shutdown_signal()).await
    });
    // A task still blocked on stdin (the console) or a slow peer must not hold the exit.
    runtime.shutdown_background();
    finished?;
    Ok(Exit::Passed)
}

/// The scripts of `--scripts FILE`, or the usage error saying why they do not load.
fn scripts_of(path: Option<&std::path::Path>) -> Result<Vec<fake_device::AgentScript>, CliError> {
    let Some(path) = path else {
        return Ok(Vec::new());
    };
    harness::scenario::load_yaml_file(path).map_err(|e| CliError::Usage(e.to_string()))
}

fn parse_duration(text: &str) -> Result<harness::scenario::Dur, String> {
    humantime::parse_duration(text.trim())
        .map(harness::scenario::Dur)
        .map_err(|e| format!("`{text}` is not a duration like 500ms or 5s ({e})"))
}

fn main() -> ExitCode {
    harness::cli::exit_with(run(Cli::parse()))
}

/// The command's run; every error says which exit code it ends with.
fn run(cli: Cli) -> Result<Exit, CliError> {
    harness::cli::init_logs(if cli.common.verbose { "debug" } else { "warn" });
    if let Some(seed) = cli.common.seed {
        harness::random::seed(seed);
    }
    harness::cli::init_tls();
    harness::cli::return_freed_memory();
    if let Some(Command::Serve(args)) = cli.command {
        return serve(args);
    }
    if cli.common.list_scenarios {
        harness::cli::list_scenarios_in(Side::Device, cli.common.family.unwrap_or_default());
        return Ok(Exit::Passed);
    }
    // lvmh has one version and no discovery: its cell is known without asking the daemon.
    let lvmh = cli.common.family == Some(harness::scenario::Family::Lvmh)
        || cli.common.scenario.as_deref().is_some_and(|arg| {
            harness::scenario::catalogue::resolve_in(
                arg,
                Side::Device,
                cli.common.family.unwrap_or_default(),
            )
            .is_ok_and(|s| s.family == harness::scenario::Family::Lvmh)
        });
    if lvmh && cli.fleet.is_some() {
        return Err(CliError::Usage(
            "--fleet is not there for --family lvmh yet: run one plugin a process".into(),
        ));
    }
    if cli.fleet.is_some() {
        fleet_refusals(&cli)?;
    }
    let runtime = harness::cli::runtime(false)?;
    // The instance under test, when this run starts it: before discovery is read, since it
    // serves it. The device's root is `{root}`: its first --root, else one made here.
    let mut roots = cli.roots.clone();
    let made_root = match (&cli.common.exec, roots.is_empty()) {
        (Some(_), true) => {
            let dir = harness::random::temp_dir()
                .map_err(|e| CliError::Internal(format!("cannot make a root: {e}")))?;
            roots.push(dir.path().display().to_string());
            Some(dir)
        }
        _ => None,
    };
    let started = match &cli.common.exec {
        Some(exec) => {
            let cell = Cell {
                protocol: cli.protocol.parse().unwrap_or(2),
                spec: cli.common.spec,
            };
            let root = std::path::PathBuf::from(&roots[0]);
            let started = runtime
                .block_on(fake_device::start_instance(
                    harness::process::SutSpec::command(exec.clone()),
                    cli.instance.as_deref(),
                    &cli.token,
                    &cell,
                    &root,
                    match lvmh {
                        true => harness::family::Family::Lvmh,
                        false => harness::family::Family::Lembas,
                    },
                ))
                .map_err(|e| CliError::Usage(format!("--exec: {e}")))?;
            Some(started)
        }
        None => None,
    };
    let Some(instance) = cli
        .instance
        .clone()
        .or_else(|| started.as_ref().map(|(_, url)| url.clone()))
    else {
        return Err(CliError::Usage("--instance URL is required".into()));
    };
    let protocol = match cli.protocol.as_str() {
        "auto" => ProtocolChoice::Auto,
        "1" => ProtocolChoice::Fixed(1),
        "2" => ProtocolChoice::Fixed(2),
        other => {
            return Err(CliError::Usage(format!(
                "--protocol {other}: say auto, 1 or 2"
            )));
        }
    };
    let scripts = scripts_of(cli.scripts.as_deref())?;
    let misbehave = harness::cli::misbehaviours(&cli.common.misbehave, Binds::Device)?;
    let hooks = harness::cli::hooks(cli.common.hooks.as_deref())?;
    // A scenario's `${protocol}` and `when: {protocol}` follow the link's protocol, which under
    // `auto` is what the instance's discovery allows.
    let cell_protocol = match (protocol, &cli.common.scenario) {
        _ if lvmh => 1,
        (ProtocolChoice::Fixed(p), _) => p,
        (ProtocolChoice::Auto, None) => 2,
        (ProtocolChoice::Auto, Some(_)) => {
            // An instance this run started may end before it serves: say so at once, with
            // what it printed, rather than after the probe's 30 s.
            let sut = started.as_ref().map(|(sut, _)| sut.clone());
            let probed = runtime.block_on(async {
                let probe = fake_device::probe_protocol(
                    &instance,
                    std::time::Duration::from_secs(30),
                );
                match &sut {
                    Some(sut) => tokio::select! {
                        probed = probe => probed,
                        Some(exit) = sut.wait_exit(std::time::Instant::now() + std::time::Duration::from_secs(30)) => {
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
                    },
                    None => probe.await,
                }
            });
            probed
                .map_err(|e| CliError::Peer(format!("cannot read the instance's discovery: {e}")))?
        }
    };
    let cell = match lvmh {
        true => harness::cli::lvmh_cell(),
        false => Cell {
            protocol: cell_protocol,
            spec: cli.common.spec,
        },
    };
    let report_cell = cell.clone();
    if let Some(list) = &cli.capabilities {
        let spec = cell.spec;
        if let Some(unknown) = list.iter().find(|c| !spec.defines(c)) {
            return Err(CliError::Usage(format!(
                "--capabilities: `{unknown}` is not a capability of harness spec {spec} ({})",
                spec.capabilities().join(", ")
            )));
        }
    }
    let scenario = match &cli.common.scenario {
        Some(arg) => Some(harness::cli::load_scenario_in(
            arg,
            Side::Device,
            cli.common.family,
            &cell,
        )?),
        None => None,
    };
    let control = cli.common.control_config()?;
    let options = fake_device::Options {
        family: match lvmh {
            true => harness::scenario::Family::Lvmh,
            false => harness::scenario::Family::Lembas,
        },
        plugin: None,
        instance,
        token: cli.token.clone(),
        roots,
        protocol,
        cell,
        journal: cli.common.journal.clone(),
        misbehave: misbehave.clone(),
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
        max_mode: cli.max_mode.clone(),
        local_personalization: None,
        library_local: cli.local_library,
        untrusted: cli.untrusted.clone(),
        scripts,
        remote_terminal: cli.terminal,
        terminal_home: None,
        terminal_integration: !cli.no_terminal_integration,
        steps: Vec::new(),
        capabilities: cli.capabilities.clone(),
        arranged: harness::engine::Arranged::from_names(&cli.common.arranged),
        sut: started.map(|(sut, _)| sut),
        process: None,
        hooks,
        console: cli.console,
        control: control.clone(),
        end_at_finding: None,
        lean: cli.fleet.is_some(),
    };
    if let Some(count) = cli.fleet {
        return fleet(&cli, count as usize, options, &runtime);
    }
    let events = cli.common.events;
    // Filled by the ready line's callback, drained once the run ends.
    let tail = std::cell::RefCell::new(None);
    let ready = |ready: harness::embed::Ready| {
        *tail.borrow_mut() = harness::cli::announce(&ready, control.as_ref(), events);
    };
    let finished = runtime.block_on(async {
        let shutdown = harness::cli::shutdown_signal();
        let finished = fake_device::run_with(options, scenario, ready, shutdown).await;
        let printer = tail.borrow_mut().take();
        if let Some(printer) = printer {
            printer.finish().await;
        }
        finished
    });
    // A task still blocked on stdin (the console) or a slow peer must not hold the exit.
    runtime.shutdown_background();
    drop(made_root);
    let done = finished?;
    if let Some(words) = fake_device::last_words(done.stopped.as_ref(), &misbehave) {
        eprintln!("{words}");
    }
    Ok(match done.stopped {
        Some(Stopped::ProtocolMismatch) => Exit::ProtocolMismatch,
        Some(Stopped::Unauthorized) => Exit::Unauthorized,
        _ => harness::cli::finish(
            "fake-device",
            &cli.common,
            &report_cell,
            done.outcome.as_ref(),
            &done.findings,
            &done.recent,
        ),
    })
}
