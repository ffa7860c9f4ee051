//! What both doubles' command lines share: running a scenario, reports, journal, misbehaviours,
//! and the process set-up (logs on stderr, the TLS provider).

use std::io::Write as _;
use std::path::PathBuf;

use clap::Args;

use crate::report::ReportTarget;

/// Why a double's command could not do its run; each kind ends the process with its own code.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The command line, or a file it names, is wrong (exit 2).
    #[error("{0}")]
    Usage(String),
    /// The peer could not even be asked (its discovery unreadable; exit 1).
    #[error("{0}")]
    Peer(String),
    /// The machine failed the run: a runtime, a directory, a report file (exit 3).
    #[error("{0}")]
    Internal(String),
}

impl CliError {
    /// The exit code it ends the process with.
    pub fn exit(&self) -> crate::Exit {
        match self {
            CliError::Usage(_) => crate::Exit::Usage,
            CliError::Peer(_) => crate::Exit::PeerFailed,
            CliError::Internal(_) => crate::Exit::Internal,
        }
    }
}

/// The process's exit: the run's own, or the error's, said on stderr.
pub fn exit_with(ran: Result<crate::Exit, CliError>) -> std::process::ExitCode {
    match ran {
        Ok(exit) => exit.into(),
        Err(e) => {
            eprintln!("error: {e}");
            e.exit().into()
        }
    }
}

/// Options common to fake-instance and fake-device.
#[derive(Debug, Clone, Args)]
pub struct CommonArgs {
    /// The protocol family to play: `lembas` (the default) or `lvmh` (fake-instance plays the
    /// daemon, fake-device the pi plugin). A scenario file says its own.
    #[arg(long, value_name = "NAME")]
    pub family: Option<crate::scenario::Family>,
    /// Run this scenario: a file, or the name of an embedded one (see --list-scenarios).
    #[arg(long, value_name = "FILE")]
    pub scenario: Option<String>,
    /// List the embedded scenarios with what each proves, and exit.
    #[arg(long)]
    pub list_scenarios: bool,
    /// The harness spec to behave as: 1.0.0 or 1.1.0.
    #[arg(long, value_name = "V", default_value = "1.1.0")]
    pub spec: crate::lembas::Spec,
    /// Keep state here across runs (fake-device: its sessions, turn logs and pending deletes;
    /// default: a temporary directory of the run's own).
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// The largest message accepted from the peer, in bytes; a larger one ends the link.
    #[arg(long, value_name = "BYTES", default_value_t = crate::transport::FrameLimits::default().max_message_bytes)]
    pub max_message_bytes: usize,
    /// Write every message in and out as JSON lines to this file.
    #[arg(long, value_name = "PATH")]
    pub journal: Option<PathBuf>,
    /// Draw every random value of the run (ids, names, a redial's jitter, its temporary
    /// folders' names) from this seed, so the same scenario and seed repeat; the --journal file
    /// then leaves out times, which no seed fixes.
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// Write a report: junit:PATH, json:PATH or html:PATH (repeatable).
    #[arg(long = "report", value_name = "KIND:PATH")]
    pub reports: Vec<ReportTarget>,
    /// Break the rule with this id on purpose, to prove a check fails: `RULE` in its first way,
    /// `RULE/WAY` in another of its ways (`harness rules` lists them; repeatable).
    #[arg(long = "misbehave", value_name = "RULE[/WAY]")]
    pub misbehave: Vec<String>,
    /// A run that does not apply to the peer (a capability it did not list, set-up nothing
    /// arranged) fails (exit 1) instead of passing as not applicable (exit 0): for a peer that
    /// means to do everything.
    #[arg(long)]
    pub strict: bool,
    /// Start the system under test with this command (run by `sh -c`) once the double is up, and
    /// end it, with every process it started, when the run ends. Placeholders, shell-quoted:
    /// {url}, {ws_url}, {token}, {tmp}, {root}, {port}, {protocol}, {spec}, {protocols} (and,
    /// for an lvmh daemon, {gitlab_url}: the fake GitLab to ask); each is also in its
    /// environment as `LEMBAS_TEST_<NAME>`. Overrides a scenario's `sut:`.
    #[arg(long, value_name = "CMD")]
    pub exec: Option<String>,
    /// Print one line for a run that passed or did not apply (the whole report only for a
    /// failure).
    #[arg(long, conflicts_with = "verbose")]
    pub quiet: bool,
    /// Print the last messages even for a run that passed, and log what the double does
    /// (unless RUST_LOG says otherwise).
    #[arg(long)]
    pub verbose: bool,
    /// A hooks file (YAML): each set-up action of a scenario's `peer:` and each action of its
    /// `peer.steps`, by name, mapped to a command (`run`), an HTTP request (`http`) or a line to
    /// the system under test's stdin (`stdin`), with the same placeholders as --exec plus the
    /// action's fields. A scenario needing an action with no hook is not applicable.
    #[arg(long, value_name = "FILE")]
    pub hooks: Option<PathBuf>,
    /// Set-up of the scenario's `peer:` that the peer's own test arranges, by name (repeatable
    /// or comma-separated; `all` for every one): the names a not-applicable verdict gives.
    #[arg(long = "arranged", value_name = "NAME", value_delimiter = ',')]
    pub arranged: Vec<String>,
    /// Serve the control API on this address (default 127.0.0.1 on a free port): read the run's
    /// state and journal, act, inject messages, raise signals, over HTTP (docs/control-api.yaml).
    /// Its URL and token are printed as `control URL token=TOKEN`.
    #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = "127.0.0.1:0")]
    pub control: Option<std::net::SocketAddr>,
    /// The control API's token (default: a fresh random one, printed with its URL); without
    /// --control it is not used.
    #[arg(long, value_name = "TOKEN", env = "LEMBAS_CONTROL_TOKEN")]
    pub control_token: Option<String>,
    /// Print the run's progress on stdout as JSON lines: each step's start and end, each finding,
    /// each signal (`{"event": "step_ended", ...}`).
    #[arg(long)]
    pub events: bool,
}

impl CommonArgs {
    /// Sets a double's command going: its logs (debug with `--verbose`), the `--seed`, the
    /// rustls provider, and freed memory handed back to the system.
    pub fn start_process(&self) {
        init_logs(if self.verbose { "debug" } else { "warn" });
        if let Some(seed) = self.seed {
            crate::random::seed(seed);
        }
        init_tls();
        return_freed_memory();
    }

    /// The control API this run serves, if asked for; an empty token is a usage error (no
    /// request could ever bear it).
    pub fn control_config(&self) -> Result<Option<crate::control::ControlConfig>, CliError> {
        let Some(listen) = self.control else {
            return Ok(None);
        };
        let token = match &self.control_token {
            Some(token) if token.trim().is_empty() => {
                return Err(CliError::Usage(
                    "--control-token (or LEMBAS_CONTROL_TOKEN) is empty".into(),
                ));
            }
            Some(token) => token.clone(),
            None => crate::control::fresh_token(),
        };
        Ok(Some(crate::control::ControlConfig { listen, token }))
    }
}

/// Runs a double's command on `runtime` until its run ends or a signal comes. `run` is given
/// what the double calls once it is up (which calls `first` with it, then [`announce`]s it) and
/// the shutdown signal, made inside the runtime before anything is announced. The events said
/// meanwhile are drained before it returns; a task still blocked on stdin (the console) or on a
/// slow peer does not hold the exit.
pub fn run_announced<'a, T, Fut>(
    runtime: tokio::runtime::Runtime,
    control: Option<&'a crate::control::ControlConfig>,
    events: bool,
    first: impl FnOnce(&crate::embed::Ready) + 'a,
    run: impl FnOnce(Box<dyn FnOnce(crate::embed::Ready) + 'a>, ShutdownSignal) -> Fut,
) -> T
where
    Fut: std::future::Future<Output = T>,
{
    // Filled once the double is up, drained once its run ends.
    let tail = std::rc::Rc::new(std::cell::RefCell::new(None));
    let filled = tail.clone();
    let finished = runtime.block_on(async {
        let ready = Box::new(move |ready: crate::embed::Ready| {
            first(&ready);
            *filled.borrow_mut() = announce(&ready, control, events);
        });
        let finished = run(ready, Box::pin(shutdown_signal())).await;
        let printer = tail.borrow_mut().take();
        if let Some(printer) = printer {
            printer.finish().await;
        }
        finished
    });
    runtime.shutdown_background();
    finished
}

/// The signal a double's command ends its run on: [`shutdown_signal`], boxed.
pub type ShutdownSignal = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

/// Says on stdout what a test program driving the double needs once it is up: the control API's
/// URL and token (`control URL token=TOKEN`), then, with `--events`, the run's progress as JSON
/// lines until [`EventsTail::finish`].
pub fn announce(
    ready: &crate::embed::Ready,
    control: Option<&crate::control::ControlConfig>,
    events: bool,
) -> Option<EventsTail> {
    let mut stdout = std::io::stdout();
    if let (Some(addr), Some(config)) = (ready.control, control) {
        let _ = writeln!(stdout, "control http://{addr} token={}", config.token);
        let _ = stdout.flush();
    }
    if !events {
        return None;
    }
    let mut watched = ready.progress.subscribe();
    let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        use tokio::sync::broadcast::error::{RecvError, TryRecvError};
        loop {
            tokio::select! {
                biased;
                received = watched.recv() => match received {
                    Ok(event) => print_event(&event),
                    Err(RecvError::Lagged(missed)) => print_lagged(missed),
                    Err(RecvError::Closed) => return,
                },
                _ = &mut stopped => {
                    // What came before the end is said too.
                    loop {
                        match watched.try_recv() {
                            Ok(event) => print_event(&event),
                            Err(TryRecvError::Lagged(missed)) => print_lagged(missed),
                            Err(_) => return,
                        }
                    }
                }
            }
        }
    });
    Some(EventsTail { stop, task })
}

/// The `--events` printer of a run.
#[derive(Debug)]
pub struct EventsTail {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

impl EventsTail {
    /// Prints what is left, once the run has ended (within a second).
    pub async fn finish(self) {
        let _ = self.stop.send(());
        let _ = tokio::time::timeout(std::time::Duration::from_secs(1), self.task).await;
    }
}

fn print_event(event: &crate::engine::RunEvent) {
    let mut stdout = std::io::stdout();
    let _ = writeln!(
        stdout,
        "{}",
        serde_json::to_string(event).unwrap_or_default()
    );
    let _ = stdout.flush();
}

fn print_lagged(missed: u64) {
    let mut stdout = std::io::stdout();
    let _ = writeln!(
        stdout,
        "{}",
        serde_json::json!({ "event": "lagged", "missed": missed })
    );
    let _ = stdout.flush();
}

/// What `--version` says on every binary: the release, then the harness spec versions and the
/// protocol versions the doubles implement, so a CI log shows which spec a run was judged by.
pub fn version() -> &'static str {
    static VERSION: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        let specs: Vec<&str> = crate::lembas::Spec::ALL
            .iter()
            .map(|s| s.as_str())
            .collect();
        let protocols: Vec<String> = (1..=crate::lembas::LATEST_PROTOCOL)
            .map(|p| p.to_string())
            .collect();
        format!(
            "{} (harness spec {}; link protocol {})",
            env!("CARGO_PKG_VERSION"),
            specs.join(", "),
            protocols.join(", ")
        )
    });
    VERSION.as_str()
}

/// Whether to colour what goes to `stream`: only a terminal, and never when `NO_COLOR` is set
/// to anything (no-color.org), so a log redirected to a file holds no escape codes.
pub fn colours_on(stream: &impl std::io::IsTerminal) -> bool {
    stream.is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// Sets up a process: `RUST_LOG`-driven logs on stderr (stdout is for the ready line and
/// reports), `default_level` when `RUST_LOG` is unset, and the rustls crypto provider, without
/// which the first `wss://` dial would panic.
pub fn init_process(default_level: &str) {
    init_logs(default_level);
    init_tls();
}

/// Whether a log record may be written. tungstenite traces a client's whole handshake request,
/// its Authorization header and the device token in it: no token may reach a log at any level,
/// so that one target's trace records are dropped whatever RUST_LOG asks.
fn may_log(meta: &tracing::Metadata<'_>) -> bool {
    !(*meta.level() == tracing::Level::TRACE && meta.target().starts_with("tungstenite::handshake"))
}

/// How often [`return_freed_memory`] hands freed memory back.
const RETURN_FREED_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// Has the allocator (mimalloc, the commands' own) hand the memory freed since its last call
/// back to the system, once a second, on a thread of its own. mimalloc returns freed memory
/// only when it is next called on that path, which an idle double never is: after a peer's ten
/// 30 MB frames, fake-device held 383 MB for good; with this, a second after the link closed,
/// 202 MB, which is what its message budgets keep (docs/book/src/performance.md, "Hostile
/// peers"). For a process whose global allocator is mimalloc; elsewhere it only tidies mimalloc's own (empty)
/// arenas.
pub fn return_freed_memory() {
    let spawned = std::thread::Builder::new()
        .name("return-freed-memory".into())
        .spawn(|| {
            // SAFETY: both take no pointer and may be called from any thread at any time.
            // Initialized, this thread's heap is a real one: mimalloc's collect skips a thread
            // that never allocated.
            unsafe { libmimalloc_sys::mi_thread_init() };
            loop {
                std::thread::sleep(RETURN_FREED_EVERY);
                // `true`: the arenas' freed memory is purged process-wide, whichever thread
                // freed it (pages other threads' heaps still hold are theirs to purge).
                unsafe { libmimalloc_sys::mi_collect(true) };
            }
        });
    if let Err(e) = spawned {
        tracing::warn!("freed memory will not be handed back: {e}");
    }
}

/// `RUST_LOG`-driven logs on stderr, at `default_level` when it is unset.
pub fn init_logs(default_level: &str) {
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    // The MCP client logs a peer's refusal (an instance with no library answers 404) as its own
    // error; the double says what it means where it matters, so by default that is left out.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new(format!("{default_level},rmcp=off"))
    });
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(colours_on(&std::io::stderr()))
        .finish()
        .with(tracing_subscriber::filter::filter_fn(may_log))
        .try_init();
}

/// The rustls crypto provider, without which the first `wss://` dial would panic.
pub fn init_tls() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// The `--hooks` file, read; an error names its file, line and key.
pub fn hooks(
    path: Option<&std::path::Path>,
) -> Result<Option<std::sync::Arc<crate::hooks::Hooks>>, CliError> {
    let Some(path) = path else {
        return Ok(None);
    };
    crate::hooks::Hooks::load(path)
        .map(|h| Some(std::sync::Arc::new(h)))
        .map_err(|e| CliError::Usage(format!("--hooks: {e}")))
}

/// Prints the embedded scenarios of a double with their `about` lines.
pub fn list_scenarios(side: crate::scenario::Side) {
    list_scenarios_in(side, crate::scenario::Family::Lembas);
}

/// Prints the embedded scenarios of one family with what each proves.
pub fn list_scenarios_in(side: crate::scenario::Side, family: crate::scenario::Family) {
    for embedded in crate::scenario::catalogue::embedded_of(side, family) {
        match embedded.load() {
            Ok(s) => {
                let _ = writeln!(std::io::stdout(), "{:<28} {}", embedded.file, s.about);
            }
            Err(e) => {
                let _ = writeln!(std::io::stdout(), "{:<28} (broken: {e})", embedded.file);
            }
        }
    }
}

/// Loads the scenario a command line names and checks that the cell is one it applies to.
pub fn load_scenario(
    arg: &str,
    side: crate::scenario::Side,
    cell: &crate::engine::Cell,
) -> Result<crate::scenario::Scenario, CliError> {
    load_scenario_in(arg, side, None, cell)
}

/// [`load_scenario`] for `--family`: an embedded scenario of that family, or a file, which must
/// then say that family.
pub fn load_scenario_in(
    arg: &str,
    side: crate::scenario::Side,
    family: Option<crate::scenario::Family>,
    cell: &crate::engine::Cell,
) -> Result<crate::scenario::Scenario, CliError> {
    let wanted = family.unwrap_or_default();
    let scenario = crate::scenario::catalogue::resolve_in(arg, side, wanted)
        .map_err(|e| CliError::Usage(e.to_string()))?;
    if let Some(family) = family
        && scenario.family != family
    {
        return Err(CliError::Usage(format!(
            "scenario `{}` is of family `{}`, not of --family {family}",
            scenario.name, scenario.family
        )));
    }
    // An lvmh scenario has one cell, whatever the command line's protocol.
    if scenario.family == crate::scenario::Family::Lembas
        && !crate::engine::Cell::all_of(&scenario).contains(cell)
    {
        return Err(CliError::Usage(format!(
            "scenario `{}` applies to protocols {:?} and specs {:?}, not to {cell}",
            scenario.name, scenario.matrix.protocol, scenario.matrix.spec
        )));
    }
    Ok(scenario)
}

/// Prints the human report (one line for a run that passed or did not apply, with `--quiet`;
/// the last messages even for a pass, with `--verbose`), writes the requested ones, and says how
/// the process exits: a run that did not apply exits 0, or 1 when `--strict`.
pub fn finish(
    double: &'static str,
    args: &CommonArgs,
    cell: &crate::engine::Cell,
    outcome: Option<&crate::engine::RunOutcome>,
    findings: &[crate::finding::Finding],
    recent: &[crate::journal::Entry],
) -> crate::Exit {
    use crate::Exit;
    use crate::engine::Verdict;
    let Some(outcome) = outcome else {
        if let Some(name) = &args.scenario {
            // A CI timeout or a kill must not read as a pass, and the reports a CI collects
            // say what happened rather than go missing.
            eprintln!("{double}: interrupted before scenario `{name}` reached a verdict");
            let interrupted =
                crate::engine::RunOutcome::interrupted(name, *cell, findings.to_vec());
            if let Err(e) = crate::report::write_all(&args.reports, double, &interrupted, recent) {
                eprintln!("error: cannot write a report: {e}");
            }
            return Exit::Interrupted;
        }
        // A simulated run (no scenario) ends on a signal: its findings go to stderr, and the
        // exit is 0 as the command-line contract says.
        for finding in findings {
            eprintln!("{double}: finding {finding}");
        }
        return Exit::Passed;
    };
    let failed = matches!(outcome.verdict(), Verdict::Failed | Verdict::ScenarioError);
    let text = if args.quiet && !failed {
        crate::report::human::one_line(double, outcome)
    } else {
        let mut text = crate::report::human::render(double, outcome, recent);
        if args.verbose && !failed {
            text.push_str(&crate::report::human::last_messages(recent, usize::MAX));
        }
        text
    };
    let _ = write!(std::io::stdout(), "{text}");
    if let Err(e) = crate::report::write_all(&args.reports, double, outcome, recent) {
        eprintln!("error: cannot write a report: {e}");
        return Exit::Internal;
    }
    let strict = args.strict;
    match outcome.verdict() {
        Verdict::ScenarioError => Exit::Usage,
        Verdict::Passed => Exit::Passed,
        Verdict::NotApplicable(_) if strict => {
            eprintln!("{double}: --strict: a scenario that does not apply to the peer fails");
            Exit::PeerFailed
        }
        Verdict::NotApplicable(_) => Exit::Passed,
        Verdict::Failed => Exit::PeerFailed,
    }
}

/// Listens for SIGINT and SIGTERM from the moment it is called (inside the runtime), and
/// resolves on the first. Call it before announcing readiness: a signal that came between the
/// ready line and the first wait would otherwise kill the process with no verdict.
pub fn shutdown_signal() -> impl std::future::Future<Output = ()> + Send + 'static {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let interrupt = signal(SignalKind::interrupt()).ok();
        let terminate = signal(SignalKind::terminate()).ok();
        async move {
            match (interrupt, terminate) {
                (Some(mut i), Some(mut t)) => {
                    tokio::select! {
                        _ = i.recv() => {}
                        _ = t.recv() => {}
                    }
                }
                (Some(mut i), None) => {
                    i.recv().await;
                }
                (None, Some(mut t)) => {
                    t.recv().await;
                }
                (None, None) => std::future::pending::<()>().await,
            }
        }
    }
    #[cfg(not(unix))]
    {
        async {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

/// The runtime of a command; a failure to make one is printed and is [`Exit::Internal`].
///
/// [`Exit::Internal`]: crate::Exit::Internal
pub fn runtime(multi_thread: bool) -> Result<tokio::runtime::Runtime, CliError> {
    // A double is one process talking to one peer: a current-thread runtime is the fastest
    // there (see the notes on crates); the self-test runs many pairs and wants both cores.
    let mut builder = if multi_thread {
        tokio::runtime::Builder::new_multi_thread()
    } else {
        tokio::runtime::Builder::new_current_thread()
    };
    builder
        .enable_all()
        .build()
        .map_err(|e| CliError::Internal(format!("cannot start the runtime: {e}")))
}

/// The `--misbehave` rules of a double of `side`; an unknown one is a usage error.
pub fn misbehaviours(
    ids: &[String],
    side: crate::rules::Binds,
) -> Result<crate::rules::Misbehaviours, CliError> {
    crate::rules::Misbehaviours::parse(ids, side)
        .map_err(|e| CliError::Usage(format!("--misbehave {e}")))
}

/// The tokens of a token file (`--tokens FILE`): one a line, blank lines and `#` comments
/// skipped, each trimmed. A file that cannot be read, or holds no token, is a usage error.
pub fn token_file(path: &std::path::Path) -> Result<Vec<String>, CliError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| CliError::Usage(format!("--tokens {}: {e}", path.display())))?;
    let tokens: Vec<String> = text
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .map(String::from)
        .collect();
    if tokens.is_empty() {
        return Err(CliError::Usage(format!(
            "--tokens {}: the file holds no token (one a line)",
            path.display()
        )));
    }
    Ok(tokens)
}
