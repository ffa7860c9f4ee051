//! The `fake-instance` command, for the binary to call: it reads the command line, runs the
//! instance until its scenario ends or a signal comes, and exits with the suite's codes.

use std::io::Write;
use std::net::SocketAddr;
use std::process::ExitCode;

use clap::Parser;
use harness::Exit;
use harness::cli::{CliError, CommonArgs};
use harness::engine::Cell;
use harness::rules::Binds;
use harness::scenario::Side;

const EXAMPLE: &str = "\
Example: check a CLI's hello and initialize against a protocol-1 instance

  fake-instance --scenario negotiate.yaml --protocol 1 --spec 1.1.0 --report junit:negotiate.xml &
  # read the line `listening http://127.0.0.1:PORT` it prints, then point the CLI at that URL
  # with the token `lembas-test-token`; fake-instance exits 0 when the CLI passed, 1 when it broke
  # a rule (the report names it), 2 for a usage or scenario error, 3 for an internal error.";

/// Plays LLeMbas (the web server) for a LLeMbas CLI under test: serves discovery and the link,
/// acts as the ACP client, and checks the device against the spec.
#[derive(Debug, Parser)]
#[command(name = "fake-instance", version = harness::cli::version(), after_help = EXAMPLE)]
struct Cli {
    /// Where to listen.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// A device token that may link (repeatable; default lembas-test-token). From the
    /// environment (LEMBAS_DEVICE_TOKENS, comma-separated) they stay out of `ps`.
    #[arg(
        long = "token",
        value_name = "T",
        env = "LEMBAS_DEVICE_TOKENS",
        value_delimiter = ',',
        hide_env_values = true
    )]
    tokens: Vec<String>,
    /// More device tokens that may link, one a line (`#` comments and blank lines skipped): a
    /// fleet's (`fake-device --fleet N --tokens FILE`).
    #[arg(long = "tokens", value_name = "FILE")]
    token_file: Option<std::path::PathBuf>,
    /// The protocols discovery lists: 1 or 1,2 (default: from --protocol).
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    protocols: Option<Vec<u8>>,
    /// The link protocol of this run (the scenario cell; default: 2, or the highest of --protocols).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u8).range(1..=2))]
    protocol: Option<u8>,
    /// Without --scenario: once a device links, open a chat in its first root and write this in
    /// it, as a person in the web UI would (repeatable: each message after the last is answered
    /// or steered in).
    #[arg(long, value_name = "TEXT")]
    say: Vec<String>,
    /// Without --scenario: read the web UI's actions from stdin, one JSON object a line
    /// ({"open_chat": {}}, {"send": {"chat": "ses_…", "text": "hi"}}); each result goes to
    /// stderr as `console: <action> -> <result>`. How a test in another language, or a run that
    /// starts fake-instance as a stand-in server, drives its web UI.
    #[arg(long)]
    console: bool,
    #[command(flatten)]
    common: CommonArgs,
}

/// The web UI's own steps for `--say`: open a chat, then write each message in it. Written as
/// a scenario and read by the scenario loader, so they are the very steps a scenario would hold.
fn say_steps(
    texts: &[String],
) -> Result<Vec<harness::scenario::Spanned<harness::scenario::Step>>, String> {
    if texts.is_empty() {
        return Ok(Vec::new());
    }
    let mut yaml = String::from(
        "name: say\nabout: --say\nsteps: []\npeer:\n  steps:\n    - act: { open_chat: {}, capture: { chat: sessionId } }\n",
    );
    for text in texts {
        // A JSON string is a YAML scalar: the text goes in whatever it holds.
        let quoted = serde_json::to_string(text).map_err(|e| e.to_string())?;
        yaml.push_str(&format!(
            "    - act: {{ send: {{ chat: \"${{chat}}\", text: {quoted} }} }}\n    - wait: 200ms\n"
        ));
    }
    harness::scenario::load_str(&yaml, "--say", None)
        .map(|s| s.peer_steps().to_vec())
        .map_err(|e| e.to_string())
}

/// Runs the `fake-instance` command with the process's arguments.
pub fn main() -> ExitCode {
    harness::cli::exit_with(run(Cli::parse()))
}

/// The command's run; every error says which exit code it ends with.
fn run(cli: Cli) -> Result<Exit, CliError> {
    cli.common.start_process();
    if cli.common.list_scenarios {
        harness::cli::list_scenarios_in(Side::Instance, cli.common.family.unwrap_or_default());
        return Ok(Exit::Passed);
    }
    let misbehave = harness::cli::misbehaviours(&cli.common.misbehave, Binds::Instance)?;
    let protocol = cli.protocol.unwrap_or_else(|| match &cli.protocols {
        Some(list) if !list.contains(&2) => 1,
        _ => 2,
    });
    if let Some(list) = &cli.protocols {
        let highest = list.iter().copied().max().unwrap_or(1);
        if !list.contains(&1)
            || list.iter().any(|p| !matches!(p, 1 | 2))
            || cli.protocol.is_some_and(|p| p != highest)
        {
            return Err(CliError::Usage(format!(
                "--protocols {list:?} must list 1 (and only 1 or 2), and --protocol must be the highest of them: a device says the highest protocol discovery allows"
            )));
        }
    }
    let cell = Cell::lembas(protocol, cli.common.spec);
    let scenario = match &cli.common.scenario {
        Some(arg) => Some(harness::cli::load_scenario_in(
            arg,
            Side::Instance,
            cli.common.family,
            &cell,
        )?),
        None => None,
    };
    let family = scenario
        .as_ref()
        .map_or(cli.common.family.unwrap_or_default(), |s| s.family);
    let cell = match family {
        harness::scenario::Family::Lvmh => Cell::Lvmh,
        harness::scenario::Family::Lembas => cell,
    };
    let report_cell = cell;
    let steps = say_steps(&cli.say).map_err(|e| CliError::Usage(format!("--say: {e}")))?;
    let hooks = harness::cli::hooks(cli.common.hooks.as_deref())?;
    let control = cli.common.control_config()?;
    let mut tokens = cli.tokens;
    if let Some(path) = &cli.token_file {
        tokens.extend(harness::cli::token_file(path)?);
    }
    if tokens.is_empty() {
        tokens.push(crate::DEFAULT_TOKEN.into());
    }
    let options = crate::Options {
        family,
        listen: cli.listen,
        tokens,
        protocols: cli.protocols,
        cell,
        journal: cli.common.journal.clone(),
        misbehave,
        limits: harness::transport::FrameLimits {
            max_message_bytes: cli.common.max_message_bytes,
            ..harness::transport::FrameLimits::default()
        },
        state_dir: cli.common.state_dir.clone(),
        steps,
        arranged: harness::engine::Arranged::from_names(&cli.common.arranged),
        sut: cli
            .common
            .exec
            .clone()
            .map(harness::process::SutSpec::command),
        hooks,
        console: cli.console,
        control: control.clone(),
        ..crate::Options::default()
    };
    let runtime = harness::cli::runtime(false)?;
    // The signal handlers are in place before the ready line is printed.
    let done = harness::cli::run_announced(
        runtime,
        control.as_ref(),
        cli.common.events,
        |ready| {
            if let Some(addr) = ready.addr {
                let mut stdout = std::io::stdout();
                let _ = writeln!(stdout, "listening http://{addr}");
                let _ = stdout.flush();
            }
        },
        |ready, shutdown| crate::run_with(options, scenario, ready, shutdown),
    )?;
    Ok(harness::cli::finish(
        "fake-instance",
        &cli.common,
        &report_cell,
        done.outcome.as_ref(),
        &done.findings,
        &done.recent,
    ))
}
