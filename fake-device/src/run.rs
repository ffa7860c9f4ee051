//! A run of fake-device: its options, what it ends with, why it may not start, and the run
//! itself: discovery read and the link dialled (and kept), the scenario's steps (or the
//! person's own) run over it, and the instance under test started and ended around them; and
//! `serve --stdio`, plain ACP to an editor.

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use harness::engine::{Arranged, Cell, Hub, PeerProcess, RunOutcome};
use harness::finding::{Finding, Findings};
use harness::journal::{Entry, Journal};
use harness::lembas::Spec;
use harness::lembas::setup::InstanceSetup;
use harness::process::{Placeholders, Sut, SutSpec};
use harness::rules::{Misbehaviours, ids};
use harness::scenario::{Mode, Scenario, check_actions};
use harness::under_test::UnderTest;

use crate::account;
use crate::actions::{self, DeviceActor};
use crate::agent::{AgentConfig, AgentModel};
use crate::dial::DeviceDialer;
use crate::dial::{ProtocolChoice, Stopped};
use crate::limits::Limits;
use crate::model::ModelClient;
use crate::registry::SessionsConfig;
use crate::sessions::Sessions;
use crate::settings::{self, AgentKind, DeviceSettings};
use crate::store::Store;

/// The sentence a device says when the instance closed with 4400 (the CLI's own words).
pub const PROTOCOL_MISMATCH_SENTENCE: &str =
    "the instance and this CLI speak different link protocols — update one of them";

/// What the command tells the person running it (on stderr) when its run stopped by itself:
/// why, and what to do about it; `None`: nothing to tell.
pub fn last_words(
    stopped: Option<&crate::dial::Stopped>,
    misbehave: &Misbehaviours,
) -> Option<String> {
    match stopped? {
        // Misbehaving: it stops for good without a word on why.
        crate::dial::Stopped::ProtocolMismatch
            if misbehave.breaks(harness::rules::ids::DEVICE_LINK_4400_MESSAGE) =>
        {
            None
        }
        // Misbehaving: a word on it, but none on the protocols or an update.
        crate::dial::Stopped::ProtocolMismatch
            if misbehave.breaks_way(harness::rules::ids::DEVICE_LINK_4400_MESSAGE, "vague") =>
        {
            Some("fake-device: the instance closed the link (4400); not dialling again".into())
        }
        crate::dial::Stopped::ProtocolMismatch => {
            Some(format!("fake-device: {PROTOCOL_MISMATCH_SENTENCE}"))
        }
        crate::dial::Stopped::Unauthorized => {
            Some("fake-device: the instance refused this device's token (401); log in again".into())
        }
        crate::dial::Stopped::ByUs | crate::dial::Stopped::GaveUp => None,
    }
}

/// How to run.
#[derive(Debug, Clone)]
pub struct Options {
    /// The protocol family to play: LLeMbas's device, or lvmh's plugin (a scenario's `family`
    /// decides when one runs).
    pub family: harness::scenario::Family,
    /// The lvmh plugin's settings, when no scenario of its own gives them (the self-test's
    /// plugin playing a daemon scenario's `peer:` set-up).
    pub plugin: Option<crate::lvmh::PluginSettings>,
    /// The instance's base URL.
    pub instance: String,
    /// The device token.
    pub token: String,
    /// `remote.roots`.
    pub roots: Vec<String>,
    /// How the protocol is chosen.
    pub protocol: ProtocolChoice,
    /// The protocol and spec of this run (the protocol is the cell's, for `${protocol}`).
    pub cell: Cell,
    /// Where to write the journal.
    pub journal: Option<PathBuf>,
    /// The rules to break.
    pub misbehave: Misbehaviours,
    /// How long the instance may take to answer or to send initialize.
    pub patience: Duration,
    /// Frame limits of each link.
    pub limits: harness::transport::FrameLimits,
    /// Where the store lives (`--state-dir`); `None`: a temporary directory of the run's own.
    pub state_dir: Option<PathBuf>,
    /// What drives turns (a scenario's `device.agent` overrides it).
    pub agent: AgentKind,
    /// Add a remote root this long after the start (as a person editing `remote:` would).
    pub change_limits_after: Option<Duration>,
    /// How long the device takes to answer initialize (a scenario's `device.initialize_after`
    /// overrides it): a CLI on the official ACP SDK answers from a handler that may wait, and
    /// an instance must not send anything before the answer comes.
    pub initialize_after: Option<Duration>,
    /// What a person at the device's terminal does, and when.
    pub terminal: TerminalPlay,
    /// How long a card waits for an answer, unless a scenario says (default 30s).
    pub approval_timeout: Option<Duration>,
    /// `remote.max_mode`: the most permissive mode a client may ask for (default `edit`).
    pub max_mode: Option<String>,
    /// The device's local personality and instructions (`{personality, personality_custom,
    /// instructions}`), used when no one instance gives it its account's.
    pub local_personalization: Option<serde_json::Value>,
    /// `library: local`: the model searches the device's own library, not the account's.
    pub library_local: bool,
    /// Folders inside the roots the person has not trusted as projects (absolute).
    pub untrusted: Vec<String>,
    /// The scripted agent's scripts (`--scripts`); a scenario's `device.scripts` come first.
    pub scripts: Vec<crate::scripts::AgentScript>,
    /// `remote.terminal`: remote terminals on (a scenario's `device.terminal` also turns them
    /// on).
    pub remote_terminal: bool,
    /// The terminals' shell's home instead of the user's (the self-test gives an empty one).
    pub terminal_home: Option<PathBuf>,
    /// `remote.terminal_integration`: the terminals' shells start with the rc wrapper that
    /// marks prompts (default on).
    pub terminal_integration: bool,
    /// What the person at the device does by itself from the start (`act` and `wait` steps;
    /// the self-test's `peer.steps`), when no scenario runs.
    pub steps: Vec<harness::scenario::Spanned<harness::scenario::Step>>,
    /// List only these of the spec's capabilities in `initialize` (`--capabilities`), and behave
    /// as a device without the others does; a scenario's `device.capabilities` reduces further.
    /// `None`: every one.
    pub capabilities: Option<Vec<String>>,
    /// Which of a scenario's `peer:` set-up something arranges for the instance under test (the
    /// self-test's fake-instance does all of it; a real web server's test says what it does
    /// with `--arranged`). A scenario needing more is not applicable.
    pub arranged: Arranged,
    /// The instance under test, started for this run ([`start_instance`]): `restart_peer` and the
    /// process steps use it, and the run ends it with every process it started.
    pub sut: Option<Arc<Sut>>,
    /// The instance as a process something else runs (the self-test's fake-instance in this
    /// process), when no `sut` is started.
    pub process: Option<Arc<dyn PeerProcess>>,
    /// What the instance's project does for the scenario's `peer:` set-up and `peer.steps`
    /// (`--hooks`): its web UI opening chats and sending messages, how its person answers cards.
    pub hooks: Option<Arc<harness::hooks::Hooks>>,
    /// Read a person's actions at the terminal from standard input, one JSON line each
    /// (`--console`), when no scenario runs.
    pub console: bool,
    /// Serve the control API (`--control`): state, journal, actions, injections, signals.
    pub control: Option<harness::control::ControlConfig>,
    /// End the scenario at the first finding under this rule, skipping the steps left (the
    /// self-test's misbehaviour cases: the check has caught the break by then).
    pub end_at_finding: Option<String>,
    /// Keep none of the link's messages in memory (no inbox, no recent journal entries, no
    /// answers), for a run nothing reads them from: a fleet's devices. A `journal` file is
    /// still written.
    pub lean: bool,
}

impl Options {
    /// A device for the instance at `instance`, with the default token and every default: no
    /// root, protocol from discovery, spec 1.1.0, the echo agent, nothing misbehaving.
    pub fn for_instance(instance: impl Into<String>) -> Options {
        Options {
            family: harness::scenario::Family::Lembas,
            plugin: None,
            instance: instance.into(),
            token: "lembas-test-token".into(),
            roots: Vec::new(),
            protocol: ProtocolChoice::Auto,
            cell: Cell {
                protocol: 2,
                spec: harness::lembas::Spec::V1_1_0,
            },
            journal: None,
            misbehave: Misbehaviours::default(),
            patience: Duration::from_secs(5),
            limits: harness::transport::FrameLimits::default(),
            state_dir: None,
            agent: AgentKind::Echo,
            change_limits_after: None,
            initialize_after: None,
            terminal: TerminalPlay::default(),
            approval_timeout: None,
            max_mode: None,
            local_personalization: None,
            library_local: false,
            untrusted: Vec::new(),
            scripts: Vec::new(),
            remote_terminal: false,
            terminal_home: None,
            terminal_integration: true,
            steps: Vec::new(),
            capabilities: None,
            arranged: Arranged::Nothing,
            sut: None,
            process: None,
            hooks: None,
            console: false,
            control: None,
            end_at_finding: None,
            lean: false,
        }
    }
}

/// What hooks are told of an instance this run did not start: its URL, the device's token,
/// root and a `{tmp}`, and the cell.
fn instance_placeholders(options: &Options, tmp: &std::path::Path) -> Placeholders {
    harness::under_test::placeholders(
        &options.instance,
        None,
        &options.token,
        tmp,
        options.roots.first().map_or("", String::as_str),
        &options.cell,
    )
}

/// Starts the instance under test (`--exec`) for a device whose root is `root`: `{port}` is a
/// free port for it to listen on, and `{url}` the instance's address, `instance` when given,
/// else `http://127.0.0.1:{port}`; `{tmp}` is a directory of its own. An lvmh daemon is also
/// told `{gitlab_url}`, the fake GitLab its GitLab routes are to ask
/// ([`harness::lvmh::gitlab`]). Gives it and its URL.
pub async fn start_instance(
    spec: SutSpec,
    instance: Option<&str>,
    token: &str,
    cell: &Cell,
    root: &std::path::Path,
    family: harness::family::Family,
) -> Result<(Arc<Sut>, String), crate::instance_start::InstanceStartError> {
    let port =
        harness::free_port::free_port().map_err(crate::instance_start::InstanceStartError::Port)?;
    let url = instance
        .map(|u| u.trim_end_matches('/').to_string())
        .unwrap_or_else(|| format!("http://127.0.0.1:{port}"));
    let scratch =
        harness::random::temp_dir().map_err(crate::instance_start::InstanceStartError::Scratch)?;
    let mut placeholders = harness::under_test::placeholders(
        &url,
        Some(port),
        token,
        scratch.path(),
        &root.display().to_string(),
        cell,
    );
    if family == harness::family::Family::Lvmh {
        placeholders.set("gitlab_url", harness::lvmh::gitlab::url()?);
    }
    let sut = Sut::start(spec, placeholders, Some(scratch)).await?;
    if instance.is_none() {
        // The run starts once the server listens on the port it was given: a scenario's first
        // step may dial at once, and a server still starting (a cold binary on a busy machine)
        // would fail that dial through no fault of its own.
        listening(port, LISTEN_WITHIN).await;
    }
    Ok((sut, url))
}

/// How long a started web server has to listen on its port before the run starts anyway (its
/// steps then say what they could not reach).
const LISTEN_WITHIN: Duration = Duration::from_secs(30);

/// Waits until something accepts connections on `port`, at most `within`.
async fn listening(port: u16, within: Duration) {
    let deadline = tokio::time::Instant::now() + within;
    while tokio::time::Instant::now() < deadline {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A person at the device's terminal, played on a timer (the self-test's stand-in for what a
/// real CLI's test does by hand): shares a session, types in it, answers its cards, lets it go.
#[derive(Debug, Clone, Default)]
pub struct TerminalPlay {
    /// Shares a new session this long after the start.
    pub share_after: Option<Duration>,
    /// Types a prompt into it this long after sharing it.
    pub prompt_after: Option<Duration>,
    /// Answers each card of the shared session this long after it is shown.
    pub answers_after: Option<Duration>,
    /// Lets it go this long after sharing it.
    pub leave_after: Option<Duration>,
}

/// What the person at the terminal types (`TerminalPlay::prompt_after`): the scenarios'
/// words, which hooks also type into a real CLI.
pub use harness::lembas::setup::TERMINAL_PROMPT;

/// How a run ended.
#[derive(Debug)]
pub struct Finished {
    /// The scenario's verdict, when one ran.
    pub outcome: Option<RunOutcome>,
    /// What the monitors found.
    pub findings: Vec<Finding>,
    /// The last messages.
    pub recent: Vec<Entry>,
    /// Why a simulated device stopped dialling, when it did by itself.
    pub stopped: Option<Stopped>,
}

/// Why a run could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The journal could not be created.
    #[error("cannot write the journal: {0}")]
    Journal(std::io::Error),
    /// It did not come up (embedded in a test: see the builder).
    #[error("{0}")]
    NotUp(String),
    /// The scenario or the options do not fit.
    #[error("{0}")]
    Scenario(String),
}

/// Runs fake-device until the scenario ends, or (without one) until `shutdown` or until the
/// instance makes it stop (4400, 401).
pub async fn run(
    options: Options,
    scenario: Option<Scenario>,
    shutdown: impl Future<Output = ()>,
) -> Result<Finished, StartError> {
    run_started(options, scenario, |_| {}, shutdown).await
}

/// [`run_started`] for the lvmh plugin.
async fn run_plugin(
    options: Options,
    scenario: Option<Scenario>,
    started: impl FnOnce(Live),
    shutdown: impl Future<Output = ()>,
) -> Result<Finished, StartError> {
    use crate::lvmh::{PluginError, PluginPlan};
    let plan = PluginPlan {
        instance: options.instance,
        token: options.token,
        cell: options.cell,
        journal: options.journal,
        misbehave: options.misbehave,
        limits: options.limits,
        steps: options.steps,
        plugin: options.plugin,
        process: options
            .process
            .or_else(|| options.sut.map(|s| s as Arc<dyn PeerProcess>)),
        end_at_finding: options.end_at_finding,
        arranged: options.arranged,
        state_dir: options.state_dir,
    };
    let ended = crate::lvmh::run_started(
        plan,
        scenario,
        |progress| {
            started(Live {
                actor: None,
                control: None,
                progress,
            })
        },
        shutdown,
    )
    .await
    .map_err(|e| match e {
        PluginError::Journal(e) => StartError::Journal(e),
        PluginError::Setup(why) => StartError::Scenario(why),
    })?;
    Ok(Finished {
        outcome: ended.outcome,
        findings: ended.findings,
        recent: ended.recent,
        stopped: None,
    })
}

/// [`run`], telling `ready` where its control API listens once the device is set up, and
/// handing it the run's progress (for `--events`).
pub async fn run_with(
    options: Options,
    scenario: Option<Scenario>,
    ready: impl FnOnce(harness::embed::Ready),
    shutdown: impl Future<Output = ()>,
) -> Result<Finished, StartError> {
    run_started(options, scenario, |live| ready(live.ready()), shutdown).await
}

/// What a running device hands whoever embeds it once it is set up: the hands of a person at
/// its terminal, its control API and its progress.
pub(crate) struct Live {
    /// The person at the device, for actions from Rust (none for the lvmh plugin).
    pub actor: Option<Arc<DeviceActor>>,
    /// Where its control API listens.
    pub control: Option<std::net::SocketAddr>,
    /// How the run is getting on.
    pub progress: Arc<harness::engine::Progress>,
}

impl Live {
    fn ready(&self) -> harness::embed::Ready {
        harness::embed::Ready {
            addr: None,
            control: self.control,
            progress: self.progress.clone(),
        }
    }
}

/// [`run`], handing `started` what an embedding handle needs once the device is set up (before
/// its first dial).
pub(crate) async fn run_started(
    options: Options,
    scenario: Option<Scenario>,
    started: impl FnOnce(Live),
    shutdown: impl Future<Output = ()>,
) -> Result<Finished, StartError> {
    let family = scenario.as_ref().map_or(options.family, |s| s.family);
    if family == harness::scenario::Family::Lvmh {
        return run_plugin(options, scenario, started, shutdown).await;
    }
    // The actions are this double's vocabulary: checked here, each against its own type.
    if let Some(scenario) = &scenario {
        check_actions::<actions::DeviceAction>(&scenario.steps, "steps", &scenario.source)
            .map_err(|e| StartError::Scenario(e.to_string()))?;
    }
    check_actions::<actions::DeviceAction>(&options.steps, "peer.steps", "the device's own steps")
        .map_err(|e| StartError::Scenario(e.to_string()))?;
    let (settings, instance_setup) = match &scenario {
        Some(scenario) => (
            settings::of(scenario).map_err(|e| StartError::Scenario(e.to_string()))?,
            InstanceSetup::of(scenario).map_err(|e| StartError::Scenario(e.to_string()))?,
        ),
        None => (DeviceSettings::default(), InstanceSetup::default()),
    };
    let Basics {
        spec,
        journal,
        findings,
        tmp,
        state_dir,
        store,
    } = Basics::open(&options)?;
    let agent = AgentConfig {
        spec,
        only: reduced(
            options.capabilities.as_deref(),
            settings.capabilities.as_deref(),
        ),
        connection: "lembas".into(),
        misbehave: options.misbehave.clone(),
        patience: options.patience,
        terminal: settings.terminal || options.remote_terminal,
        terminal_home: options.terminal_home.clone(),
        terminal_integration: options.terminal_integration,
        stdio: false,
        initialize_after: settings
            .initialize_after
            .map(|d| d.0)
            .or(options.initialize_after)
            .unwrap_or_default(),
    };
    let http = harness::transport::http_client();
    let sessions = Sessions::new(
        store,
        device_limits(&options),
        sessions_config(&options, &settings, &agent, &http),
    );
    let sessions_for_limits = sessions.clone();
    let model = AgentModel::new(agent, sessions);
    let vars = options
        .cell
        .builtin_vars(&options.instance, &options.token, tmp.path());
    let hub = Hub::for_scenario(
        model.clone(),
        scenario.as_ref(),
        vars,
        journal.clone(),
        findings.clone(),
    )
    .map_err(|e| StartError::Scenario(e.to_string()))?;
    if options.lean {
        hub.keep_nothing();
    }
    let dialer = Arc::new(DeviceDialer {
        instance: options.instance.clone(),
        token: options.token.clone(),
        protocol: options.protocol,
        hub: hub.clone(),
        model: model.clone(),
        http,
        limits: options.limits,
        relinking: std::sync::atomic::AtomicBool::new(false),
        dialling: tokio::sync::Mutex::new(()),
        first_allowed: std::sync::Mutex::new(None),
        cached_allowed: std::sync::Mutex::new(None),
    });
    let initial = settings
        .redial_initial
        .map(|d| d.0)
        .unwrap_or(Duration::from_millis(250));
    let cap = settings
        .redial_cap
        .map(|d| d.0)
        .unwrap_or(Duration::from_secs(30));
    let patience = options.patience;
    let actor = Arc::new(DeviceActor {
        sessions: sessions_for_limits.clone(),
        model: model.clone(),
        hub: hub.clone(),
        dialer: dialer.clone(),
        scratch: state_dir.clone(),
    });
    let control = match &options.control {
        Some(config) => {
            let snapshot = sessions_for_limits.clone();
            let target = harness::control::ControlTarget {
                double: "fake-device",
                cell: options.cell.clone(),
                scenario: scenario.as_ref().map(|s| s.name.clone()),
                hub: hub.clone(),
                actor: actor.clone(),
                peer_state: Arc::new(move || snapshot.registry().snapshot()),
            };
            let served = Box::pin(harness::control::serve(config, target))
                .await
                .map_err(|e| {
                    StartError::Scenario(format!(
                        "cannot serve the control API on {}: {e}",
                        config.listen
                    ))
                })?;
            Some(served)
        }
        None => None,
    };
    // Timers start once the control API is up: a port it cannot have leaves nothing running.
    play_on_timers(&actor, &options);
    started(Live {
        actor: Some(actor.clone()),
        control: control.as_ref().map(|c| c.addr),
        progress: hub.progress().clone(),
    });
    let mut under_test = UnderTest::adopt(
        options.sut.clone(),
        options.hooks.clone(),
        instance_placeholders(&options, tmp.path()),
    );
    // The run's futures are boxed, so what a fleet's idle device holds is the state it waits
    // in, not the largest of them all.
    let linking = {
        let dialer = dialer.clone();
        Box::pin(async move { dialer.keep_linked(initial, cap, patience).await })
    };
    let mut unarranged = scenario.as_ref().and_then(|scenario| {
        harness::engine::applicability::unarranged(
            &scenario.set_up_needs(instance_setup.needs()),
            &under_test.arranged(options.arranged.clone(), &[]),
        )
    });
    // The instance's project makes its set-up before the device dials, unless the run cannot
    // apply; one that broke leaves nothing to judge, one it does not implement does not apply.
    let mut set_up_broke = None;
    if let (Some(_), None) = (&scenario, &unarranged) {
        match under_test.set_up(&instance_setup.at_start()).await {
            Ok(()) => {}
            Err(harness::engine::ActError::NotApplicable(why)) => unarranged = Some(why),
            Err(_) => set_up_broke = under_test.set_up_failed(),
        }
    }
    let (outcome, stopped) = match (&scenario, set_up_broke) {
        (Some(scenario), Some(why)) => (
            Some(harness::engine::RunOutcome::broken(
                scenario.name.clone(),
                options.cell.clone(),
                why,
            )),
            None,
        ),
        (Some(scenario), None) => {
            let keeper = (settings.dial == Mode::Auto).then(|| tokio::spawn(linking));
            // The instance's project plays its part by hooks, unless the run cannot apply; its
            // web UI acts on a linked device, so from the first link on.
            if unarranged.is_none() {
                // A person sees the device linked once the instance has initialized it.
                let steps = harness::hooks::from_first_link(scenario.peer_steps())
                    .and_then(|s| harness::hooks::after_signal(s, crate::agent::INITIALIZED))
                    .map_err(|e| StartError::Scenario(e.to_string()))?;
                under_test.drive(&hub, &options.cell, "the web UI's own steps", steps);
            }
            let scripted = harness::double::Scripted {
                hub: hub.clone(),
                cell: options.cell.clone(),
                dialer: Some(dialer.clone()),
                actor: actor.clone(),
                process: under_test.process(options.process.clone()),
                unarranged,
                end_at_finding: options.end_at_finding.clone(),
            };
            let outcome = scripted.run(scenario, shutdown).await;
            if let Some(keeper) = keeper {
                keeper.abort();
            }
            (outcome, None)
        }
        (None, _) => {
            let unattended = harness::double::Unattended {
                hub: hub.clone(),
                cell: options.cell.clone(),
                actor: actor.clone(),
                console: options.console,
                steps: options.steps.clone(),
                steps_of: "the device's own steps",
                double: "fake-device",
            };
            let end = async {
                tokio::select! {
                    stopped = linking => Some(stopped),
                    () = shutdown => None,
                }
            };
            (None, unattended.until(end).await)
        }
    };
    harness::double::close_links(&hub, "fake-device is done", None).await;
    let mut outcome = outcome;
    Box::pin(under_test.finish(outcome.as_mut())).await;
    let ended = harness::double::ended(outcome, &journal, &findings);
    Ok(Finished {
        outcome: ended.outcome,
        findings: ended.findings,
        recent: ended.recent,
        stopped,
    })
}

/// The capabilities to list: those both the command line and the scenario keep (`None`: no
/// reduction).
fn reduced(options: Option<&[String]>, scenario: Option<&[String]>) -> Option<Vec<String>> {
    match (options, scenario) {
        (None, None) => None,
        (Some(only), None) | (None, Some(only)) => Some(only.to_vec()),
        (Some(a), Some(b)) => Some(a.iter().filter(|c| b.contains(c)).cloned().collect()),
    }
}

/// What every run starts from: its spec, journal and findings, a temporary directory of its own,
/// and the store.
struct Basics {
    spec: Spec,
    journal: Arc<Journal>,
    findings: Arc<Findings>,
    tmp: tempfile::TempDir,
    state_dir: PathBuf,
    store: Store,
}

impl Basics {
    fn open(options: &Options) -> Result<Basics, StartError> {
        let spec = options.cell.spec;
        let journal = Journal::open(options.journal.as_deref()).map_err(StartError::Journal)?;
        let journal = Arc::new(if options.lean {
            journal.keeping_nothing()
        } else {
            journal
        });
        let tmp = harness::random::temp_dir()
            .map_err(|e| StartError::Scenario(format!("cannot make a temporary directory: {e}")))?;
        // The store lives in --state-dir, so a restart finds its sessions; else in this run's
        // own temporary directory.
        let state_dir = options
            .state_dir
            .clone()
            .unwrap_or_else(|| tmp.path().join("state"));
        let store = Store::open(&state_dir).map_err(|e| {
            StartError::Scenario(format!(
                "cannot open the state directory {}: {e}",
                state_dir.display()
            ))
        })?;
        Ok(Basics {
            spec,
            journal,
            findings: Arc::new(Findings::default()),
            tmp,
            state_dir,
            store,
        })
    }
}

/// The device's limits, from the options: its roots, the folders in them left untrusted, its
/// most permissive mode.
fn device_limits(options: &Options) -> Limits {
    let mut limits = Limits::new(&options.roots).with_untrusted(&options.untrusted);
    if let Some(mode) = &options.max_mode {
        limits = limits.with_max_mode(mode);
    }
    // Misbehaving: a config that says nothing of `remote.require_trust` requires none.
    if options.misbehave.breaks(ids::DEVICE_LIMITS_TRUST_DEFAULT) {
        limits.require_trust = false;
    }
    // Misbehaving: trust said to be required, and an untrusted project opened all the same.
    if options
        .misbehave
        .breaks_way(ids::DEVICE_LIMITS_TRUST_DEFAULT, "unenforced")
    {
        limits.untrusted.clear();
    }
    limits
}

/// How the sessions behave, from the options and the scenario's `device` section.
fn sessions_config(
    options: &Options,
    settings: &DeviceSettings,
    agent: &AgentConfig,
    http: &reqwest::Client,
) -> SessionsConfig {
    SessionsConfig {
        spec: agent.spec,
        capabilities: agent.capabilities(),
        misbehave: options.misbehave.clone(),
        step_delay: settings
            .step_delay
            .map(|d| d.0)
            .unwrap_or(Duration::from_millis(50)),
        connection: agent.connection.clone(),
        stdio: agent.stdio,
        account: account::Account {
            base: options.instance.clone(),
            token: options.token.clone(),
            http: http.clone(),
            writes_whole: options
                .misbehave
                .breaks(ids::DEVICE_PERSONALIZATION_PARTIAL),
            ignores_enabled: options.misbehave.breaks(ids::DEVICE_PERSONALIZATION_USE),
            invents_presets: options
                .misbehave
                .breaks(ids::DEVICE_PERSONALIZATION_UNKNOWN_PRESET),
            ways: account::Ways {
                no_enabled: options
                    .misbehave
                    .breaks_way(ids::DEVICE_PERSONALIZATION_PARTIAL, "no_enabled"),
                unused_when_enabled: options
                    .misbehave
                    .breaks_way(ids::DEVICE_PERSONALIZATION_USE, "unused_when_enabled"),
                account_too: options
                    .misbehave
                    .breaks_way(ids::DEVICE_PERSONALIZATION_LOCAL_OTHERWISE, "account_too"),
                unknown_as_custom: options
                    .misbehave
                    .breaks_way(ids::DEVICE_PERSONALIZATION_UNKNOWN_PRESET, "as_custom"),
            },
            // Misbehaving: the local settings are never used.
            local: options.local_personalization.clone().filter(|_| {
                !options
                    .misbehave
                    .breaks(ids::DEVICE_PERSONALIZATION_LOCAL_OTHERWISE)
            }),
        },
        model: (settings.agent.unwrap_or(options.agent) == AgentKind::Model).then(|| ModelClient {
            base: options.instance.clone(),
            token: options.token.clone(),
            http: http.clone(),
            index_less_is_zero: options.misbehave.breaks(ids::DEVICE_MODEL_TOOLCALL_INDEX),
            any_kind: options.misbehave.breaks(ids::DEVICE_MODELS_CHAT_ONLY),
            index_less_new: options
                .misbehave
                .breaks_way(ids::DEVICE_MODEL_TOOLCALL_INDEX, "new_call"),
            no_model: options
                .misbehave
                .breaks_way(ids::DEVICE_MODEL_SERVED_ID, "no_model"),
            first_listed: options
                .misbehave
                .breaks_way(ids::DEVICE_MODELS_CHAT_ONLY, "asks_first_listed"),
        }),
        approval_timeout: settings
            .approval_timeout
            .map(|d| d.0)
            .or(options.approval_timeout)
            .unwrap_or(Duration::from_secs(30)),
        terminal_answers_after: options.terminal.answers_after,
        library_local: options.library_local,
        scripts: settings
            .scripts
            .iter()
            .chain(&options.scripts)
            .cloned()
            .collect(),
    }
}

/// Serves plain ACP to an editor over `connection` (stdin and stdout for
/// `fake-device serve --stdio`, one message a line), until the editor closes its end or
/// `shutdown`. The spec's stdio mode: no hello, `limits: null`, none of the `_lembas`
/// notifications and no question or plan cards (the editor is a plain ACP client), any existing
/// directory a project. `options.instance` is used only by `--agent model`.
pub async fn serve_stdio(
    options: Options,
    connection: harness::transport::Connection,
    shutdown: impl Future<Output = ()>,
) -> Result<Finished, StartError> {
    let settings = DeviceSettings::default();
    let Basics {
        spec,
        journal,
        findings,
        tmp,
        store,
        ..
    } = Basics::open(&options)?;
    let agent = AgentConfig {
        spec,
        only: None,
        connection: "lembas".into(),
        misbehave: options.misbehave.clone(),
        patience: options.patience,
        terminal: false,
        terminal_home: None,
        terminal_integration: true,
        stdio: true,
        initialize_after: Duration::ZERO,
    };
    let http = harness::transport::http_client();
    let sessions = Sessions::new(
        store,
        Limits::local(),
        sessions_config(&options, &settings, &agent, &http),
    );
    let model = AgentModel::new(agent, sessions);
    model.set_next_protocol(2);
    let vars = options
        .cell
        .builtin_vars(&options.instance, &options.token, tmp.path());
    let hub = Hub::for_scenario(model, None, vars, journal.clone(), findings.clone())
        .map_err(|e| StartError::Scenario(e.to_string()))?;
    // No step reads what the editor sends: none of it is kept.
    hub.keep_nothing();
    // Misbehaving: a line of its own log on standard output, before any message.
    if options
        .misbehave
        .breaks(harness::rules::ids::DEVICE_STDIO_FRAMING)
    {
        let _ = connection.outgoing.send(harness::transport::Outgoing::Text(
            "fake-device: serving plain ACP on stdio".into(),
        ));
    }
    let mut connection = connection;
    if options
        .misbehave
        .breaks_way(harness::rules::ids::DEVICE_STDIO_FRAMING, "pretty")
    {
        // Misbehaving: every message pretty-printed, over several lines.
        let (relay, mut from_hub) = harness::transport::outbox();
        let to_editor = std::mem::replace(&mut connection.outgoing, relay);
        tokio::spawn(async move {
            while let Some(item) = from_hub.recv().await {
                let bytes = harness::transport::outbox::Weighed::bytes(&item);
                from_hub.written(bytes);
                // Each line of the pretty text written as a line of its own.
                let items = match item {
                    harness::transport::Outgoing::Text(text) => {
                        serde_json::from_str::<serde_json::Value>(&text)
                            .ok()
                            .and_then(|v| serde_json::to_string_pretty(&v).ok())
                            .unwrap_or(text)
                            .lines()
                            .map(|line| harness::transport::Outgoing::Text(line.to_string()))
                            .collect()
                    }
                    other => vec![other],
                };
                if items.into_iter().any(|item| to_editor.send(item).is_err()) {
                    break;
                }
            }
        });
    }
    let peer = hub.attach(connection);
    tokio::select! {
        _ = peer.closed() => {}
        () = shutdown => peer.close(harness::transport::CLOSE_NORMAL, "fake-device is done"),
    }
    Ok(Finished {
        outcome: None,
        findings: findings.all(),
        recent: {
            journal.finish();
            journal.recent(200)
        },
        stopped: None,
    })
}

/// The self-test's stand-in for what a real CLI's test does by hand, on timers from the start:
/// edit the limits; share a session at the terminal, type in it, let it go.
fn play_on_timers(actor: &Arc<DeviceActor>, options: &Options) {
    if let Some(after) = options.change_limits_after {
        let actor = actor.clone();
        tokio::spawn(async move {
            tokio::time::sleep(after).await;
            if let Err(e) = actor.change_limits(true, None) {
                tracing::warn!("cannot change the limits: {e}");
            }
        });
    }
    let terminal = options.terminal.clone();
    let Some(share_after) = terminal.share_after else {
        return;
    };
    let actor = actor.clone();
    tokio::spawn(async move {
        tokio::time::sleep(share_after).await;
        if actor.share_session().await.is_err() {
            return;
        }
        if let Some(prompt_after) = terminal.prompt_after {
            let actor = actor.clone();
            tokio::spawn(async move {
                tokio::time::sleep(prompt_after).await;
                if let Err(e) = actor.terminal_prompt(TERMINAL_PROMPT).await {
                    tracing::warn!("the terminal's prompt: {e}");
                }
            });
        }
        if let Some(leave_after) = terminal.leave_after {
            tokio::time::sleep(leave_after).await;
            let _ = actor.leave_session().await;
        }
    });
}

/// The exit code of a run that could not start: one place for the command's mapping.
#[cfg(feature = "cli")]
impl From<StartError> for harness::cli::CliError {
    fn from(e: StartError) -> Self {
        match e {
            StartError::Scenario(_) => harness::cli::CliError::Usage(e.to_string()),
            StartError::Journal(_) | StartError::NotUp(_) => {
                harness::cli::CliError::Internal(e.to_string())
            }
        }
    }
}

impl From<harness::embed::EmbedError<StartError>> for StartError {
    fn from(e: harness::embed::EmbedError<StartError>) -> Self {
        match e {
            harness::embed::EmbedError::Run(e) => e,
            other => StartError::NotUp(other.to_string()),
        }
    }
}

impl From<Finished> for harness::embed::Ended {
    fn from(finished: Finished) -> Self {
        harness::embed::Ended {
            outcome: finished.outcome,
            findings: finished.findings,
            recent: finished.recent,
        }
    }
}
