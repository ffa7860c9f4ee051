//! The `fake-device` command line: its flags, `serve`'s, and `--agent`'s values.

use clap::{Parser, Subcommand};
use harness::cli::{CliError, CommonArgs};

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
pub(super) struct Cli {
    #[command(subcommand)]
    pub(super) command: Option<Command>,
    /// The instance's base URL (http:// or https://).
    /// With --exec and no --instance: the one it starts, on `{port}`.
    #[arg(long, value_name = "URL", required_unless_present_any = ["list_scenarios", "exec"])]
    pub(super) instance: Option<String>,
    #[command(flatten)]
    pub(super) token: TokenArg,
    /// A remote root (repeatable).
    #[arg(long = "root", value_name = "DIR")]
    pub(super) roots: Vec<String>,
    /// What drives turns: echo (the prompt back) or model (the instance's model, with its tool
    /// calls and cards, as the CLI does).
    #[arg(long, value_enum, default_value = "echo")]
    pub(super) agent: AgentArg,
    /// The scripted agent's scripts: a YAML list like a scenario's `device.scripts` (a prompt
    /// that matches one runs it; others go to --agent).
    #[arg(long, value_name = "FILE")]
    pub(super) scripts: Option<std::path::PathBuf>,
    /// How long a card (approval, question, plan) waits for an answer before it is a denial
    /// or a dismissal (`remote.approval_timeout`; default 30s).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub(super) approval_timeout: Option<harness::scenario::Dur>,
    /// How long the echo and scripted agents pause between the steps of a turn (default 50ms):
    /// longer turns, as a real model's are, so that prompts meet a turn still running.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub(super) step_delay: Option<harness::scenario::Dur>,
    /// `remote.max_mode`: the most permissive mode a client may put a session in; a mode asked
    /// above it is lowered to it (default edit).
    #[arg(long, value_name = "MODE", value_parser = ["plan", "manual", "edit"])]
    pub(super) max_mode: Option<String>,
    /// `remote.terminal: true`: the instance may open terminals on this device (a real login
    /// shell in a PTY; capabilities `terminal` and `shell`).
    #[arg(long)]
    pub(super) terminal: bool,
    /// `remote.terminal_integration: false`: the terminals' shells start without the rc wrapper
    /// (no OSC 133/7 marks; `integration: false`).
    #[arg(long)]
    pub(super) no_terminal_integration: bool,
    /// `library: local`: the model searches a library of the device's own (empty), never the
    /// account's on the instance.
    #[arg(long)]
    pub(super) local_library: bool,
    /// A folder inside the roots the person has not trusted as a project (repeatable): with
    /// trust required, session/new refuses it.
    #[arg(long, value_name = "DIR")]
    pub(super) untrusted: Vec<String>,
    /// The protocol to say: auto (from discovery), 1 or 2.
    #[arg(
        long,
        value_name = "auto|1|2",
        value_enum,
        default_value = "auto",
        hide_possible_values = true
    )]
    pub(super) protocol: ProtocolArg,
    /// List only these capabilities in `initialize` and behave as a device without the others
    /// (comma-separated, e.g. turns,status,delete): a CLI that implements part of the spec.
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub(super) capabilities: Option<Vec<String>>,
    /// Without --scenario: read the actions of a person at this device's terminal from stdin, one
    /// JSON object a line ({"share_session": true}, {"terminal_prompt": "fix it"},
    /// {"change_limits": {"add_root": true}}): how a run that starts fake-device as a stand-in
    /// CLI gives it set-up, with `stdin` hooks.
    #[arg(long)]
    pub(super) console: bool,
    /// Run this many simulated devices in one process, each with its own token (`--token` with
    /// `{i}` for the device's number from 1, like `tok-{i}`; or `--tokens FILE`), state
    /// directory and link. Prints `{"fleet": {...}}` lines on stdout as devices link.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub(super) fleet: Option<u32>,
    /// The fleet's tokens, one a line (`#` comments and blank lines skipped); without --fleet,
    /// one device a token.
    #[arg(long, value_name = "FILE", requires = "fleet")]
    pub(super) tokens: Option<std::path::PathBuf>,
    /// Run only this slice of the fleet (2/4: the second quarter of its devices), so one token
    /// file spreads a larger fleet over several machines.
    #[arg(long, value_name = "K/N", requires = "fleet")]
    pub(super) shard: Option<crate::Shard>,
    /// Run one of N slices of the fleet, the one `JOB_COMPLETION_INDEX` names (from 0, as a
    /// Kubernetes Indexed Job gives each pod): every pod runs the same command line.
    #[arg(long, value_name = "N", requires = "fleet", conflicts_with = "shard", value_parser = clap::value_parser!(u32).range(1..))]
    pub(super) shards: Option<u32>,
    /// End the fleet's run after this long (`90s`, `10m`), as a signal would; without it the
    /// fleet runs until SIGINT or SIGTERM.
    #[arg(long = "for", value_name = "DURATION", value_parser = parse_duration, requires = "fleet")]
    pub(super) run_for: Option<harness::scenario::Dur>,
    /// What each device of the fleet does, and how many run when: a `*.workload.yaml` (stages,
    /// the devices' agent and pace, their activities); see the load testing page. `--seed`
    /// fixes its draws (default: the workload's `seed`, else 1).
    #[arg(long, value_name = "FILE", requires = "fleet")]
    pub(super) workload: Option<std::path::PathBuf>,
    /// Fail the fleet's run (exit 7) if this threshold is crossed at its end: FIGURE.STAT OP
    /// BOUND, such as `prompt.answer.p99<500ms`, `link.setup.max<=2s` or `findings.count==0`
    /// (repeatable; the load testing page lists the figures).
    #[arg(long = "threshold", value_name = "EXPR", requires = "fleet")]
    pub(super) thresholds: Vec<harness::load::Threshold>,
    /// Serve the fleet's figures while it runs as OpenMetrics at http://ADDR/metrics (devices
    /// linked, messages, latency histograms, findings), for Prometheus to scrape.
    #[arg(long, value_name = "ADDR", requires = "fleet")]
    pub(super) metrics: Option<std::net::SocketAddr>,
    #[command(flatten)]
    pub(super) common: CommonArgs,
}

/// `--protocol` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(super) enum ProtocolArg {
    /// What the instance's discovery allows.
    Auto,
    /// Protocol 1.
    #[value(name = "1")]
    One,
    /// Protocol 2.
    #[value(name = "2")]
    Two,
}

impl From<ProtocolArg> for crate::ProtocolChoice {
    fn from(arg: ProtocolArg) -> Self {
        match arg {
            ProtocolArg::Auto => Self::Auto,
            ProtocolArg::One => Self::Fixed(1),
            ProtocolArg::Two => Self::Fixed(2),
        }
    }
}

/// `--agent` values.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub(super) enum AgentArg {
    /// Echo each prompt back.
    Echo,
    /// Ask the instance's model.
    Model,
}

impl From<AgentArg> for crate::AgentKind {
    fn from(arg: AgentArg) -> Self {
        match arg {
            AgentArg::Echo => Self::Echo,
            AgentArg::Model => Self::Model,
        }
    }
}

#[derive(Debug, Subcommand)]
pub(super) enum Command {
    /// Plain ACP on stdin/stdout for editors (and ACP clients): no hello, `limits: null`, no
    /// `_lembas` notifications, no question or plan cards. Only JSON-RPC on stdout; logs go to
    /// stderr.
    Serve(ServeArgs),
}

/// `--token`, which the device and `serve` read alike.
#[derive(Debug, clap::Args)]
pub(super) struct TokenArg {
    /// The device token.
    #[arg(
        long = "token",
        value_name = "T",
        env = "LEMBAS_DEVICE_TOKEN",
        hide_env_values = true,
        default_value = "lembas-test-token"
    )]
    pub(super) value: String,
}

/// `fake-device serve`'s options.
#[derive(Debug, clap::Args)]
pub(super) struct ServeArgs {
    /// Speak on stdin/stdout, one message a line (the only transport `serve` has).
    #[arg(long)]
    pub(super) stdio: bool,
    /// What drives turns: echo, or model (the instance's model: needs --instance).
    #[arg(long, value_enum, default_value = "echo")]
    pub(super) agent: AgentArg,
    /// The instance whose model `--agent model` asks.
    #[arg(long, value_name = "URL")]
    pub(super) instance: Option<String>,
    #[command(flatten)]
    pub(super) token: TokenArg,
    /// The scripted agent's scripts (a YAML list like a scenario's `device.scripts`).
    #[arg(long, value_name = "FILE")]
    pub(super) scripts: Option<std::path::PathBuf>,
    /// How long an approval waits for the editor's answer (default 30s).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub(super) approval_timeout: Option<harness::scenario::Dur>,
    /// Where sessions are kept (default: a temporary directory of the run's own).
    #[arg(long, value_name = "DIR")]
    pub(super) state_dir: Option<std::path::PathBuf>,
    /// The harness spec to implement: 1.0.0 or 1.1.0.
    #[arg(long, default_value = "1.1.0")]
    pub(super) spec: harness::lembas::Spec,
    /// Break this rule of the catalogue on purpose (repeatable), to show an editor's or a
    /// harness's check catches it (`device.stdio.*`).
    #[arg(long, value_name = "RULE")]
    pub(super) misbehave: Vec<String>,
}

/// The scripts of `--scripts FILE`, or the usage error saying why they do not load.
pub(super) fn scripts_of(
    path: Option<&std::path::Path>,
) -> Result<Vec<crate::AgentScript>, CliError> {
    let Some(path) = path else {
        return Ok(Vec::new());
    };
    harness::scenario::load_yaml_file(path).map_err(|e| CliError::Usage(e.to_string()))
}

/// A duration flag's value (`500ms`, `5s`).
fn parse_duration(text: &str) -> Result<harness::scenario::Dur, String> {
    humantime::parse_duration(text.trim())
        .map(harness::scenario::Dur)
        .map_err(|e| format!("`{text}` is not a duration like 500ms or 5s ({e})"))
}
