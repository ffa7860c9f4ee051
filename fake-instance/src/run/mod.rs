//! A run of fake-instance: its options, what it ends with, why it may not start, and the run
//! itself: discovery and the HTTP API served, links accepted, the scenario's steps (or the web
//! UI's own) run over them, and the device under test started and ended around them.

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use harness::double::{Course, Opened, SetUp};
use harness::engine::{Arranged, Cell, Hub, PeerProcess};
use harness::hooks::Hooks;
use harness::journal::Journal;
use harness::lembas::setup::DeviceSetup;
use harness::lembas::{Discovery, LINK_PATH};
use harness::process::{Placeholders, SutSpec};
use harness::rules::Misbehaviours;
use harness::scenario::{Scenario, Spanned, Step};

use crate::http::{self, HTTP_CHAT};
use crate::settings::{self, CardPolicy, InstanceSettings};
use crate::{actions, applicability, server};
use harness::under_test::UnderTest;

use harness::transport::FrameLimits;
use serde_json::json;

use crate::actions::InstanceActor;
use crate::chats::{Chats, ChatsConfig};
use crate::client::{ClientConfig, ClientModel};
use crate::server::ServerState;

pub(crate) mod listening;
pub(crate) mod start_error;

pub use start_error::StartError;

/// The link number the HTTP side's requests are seen on in a scenario's inbox (links count
/// from 1).
pub const HTTP_LINK: u32 = 0;

/// The token a device uses when none is configured.
pub const DEFAULT_TOKEN: &str = "lembas-test-token";

/// How to run.
#[derive(Debug, Clone)]
pub struct Options {
    /// The protocol family to play: LLeMbas's instance, or lvmh's daemon (a scenario's
    /// `family` decides when one runs).
    pub family: harness::scenario::Family,
    /// Where to listen (port 0: any free port).
    pub listen: SocketAddr,
    /// A socket already bound and listening, used instead of binding `listen`: a run restarted
    /// in-process serves on the same port, which nothing else can take between its runs.
    pub bound: Option<Arc<std::net::TcpListener>>,
    /// The device tokens that may link.
    pub tokens: Vec<String>,
    /// The protocols discovery lists; `None`: derived from the cell's protocol.
    pub protocols: Option<Vec<u8>>,
    /// The protocol and spec of this run.
    pub cell: Cell,
    /// Where to write the journal.
    pub journal: Option<PathBuf>,
    /// The rules to break.
    pub misbehave: Misbehaviours,
    /// How long a device may take to say hello or answer.
    pub patience: Duration,
    /// Frame limits of each link.
    pub limits: FrameLimits,
    /// What the HTTP API the CLI uses serves (models, chat, usage, personalization, instance).
    pub http: http::HttpConfig,
    /// How the person answers cards (a scenario's `instance.cards` overrides it).
    pub cards: CardPolicy,
    /// Where chats' undelivered deletes are kept across runs (`--state-dir`).
    pub state_dir: Option<PathBuf>,
    /// What the simulated web UI does by itself from the start (`act` and `wait` steps; the
    /// self-test's `peer.steps`), when no scenario runs.
    pub steps: Vec<Spanned<Step>>,
    /// Which of a scenario's `peer:` set-up something arranges for the device under test (the
    /// self-test's fake-device does all of it; a real CLI's test says what it does with
    /// `--arranged`). A scenario needing more is not applicable.
    pub arranged: Arranged,
    /// The device under test to start once listening (`--exec`); `None`: the scenario's `sut:`,
    /// if it has one. It gets `{url}`, `{token}`, a `{root}` laid out as the scenario's `peer:`
    /// says, and is ended with every process it started when the run ends.
    pub sut: Option<SutSpec>,
    /// The device as a process something else runs (the self-test's fake-device in this
    /// process), for `restart_peer` and the like when no `sut` is started.
    pub process: Option<Arc<dyn PeerProcess>>,
    /// What the device's project does for the scenario's `peer:` set-up (`--hooks`): a
    /// person at its terminal, a change of its limits, sessions deleted while offline.
    pub hooks: Option<Arc<Hooks>>,
    /// Read the web UI's actions from standard input, one JSON line each (`--console`), when
    /// no scenario runs.
    pub console: bool,
    /// Serve the control API (`--control`): state, journal, actions, injections, signals.
    pub control: Option<harness::control::ControlConfig>,
    /// End the scenario at the first finding under this rule, skipping the steps left (the
    /// self-test's misbehaviour cases: the check has caught the break by then).
    pub end_at_finding: Option<String>,
    /// The device's standard input and output, for a scenario whose link is `stdio`, when
    /// something else runs the device (the self-test's fake-device in this process); `None`:
    /// the device started here (`--exec`, `sut:`) speaks on its own.
    pub stdio_link: Option<StdioLink>,
}

/// A link over a device's standard input and output that something else made, taken once by
/// the run whose scenario speaks to the device that way.
#[derive(Debug, Clone, Default)]
pub struct StdioLink(Arc<std::sync::Mutex<Option<harness::transport::Connection>>>);

impl StdioLink {
    /// The link `connection` (from [`harness::transport::stdio::from_streams`]).
    pub fn new(connection: harness::transport::Connection) -> Self {
        Self(Arc::new(std::sync::Mutex::new(Some(connection))))
    }

    fn take(&self) -> Option<harness::transport::Connection> {
        self.0.lock().ok().and_then(|mut slot| slot.take())
    }
}

impl Default for Options {
    fn default() -> Self {
        Self {
            family: harness::scenario::Family::Lembas,
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            bound: None,
            tokens: vec![DEFAULT_TOKEN.into()],
            protocols: None,
            cell: Cell::LATEST,
            journal: None,
            misbehave: Misbehaviours::default(),
            patience: Duration::from_secs(5),
            limits: FrameLimits::default(),
            http: http::HttpConfig::default(),
            cards: CardPolicy::default(),
            state_dir: None,
            steps: Vec::new(),
            arranged: Arranged::Nothing,
            sut: None,
            process: None,
            hooks: None,
            console: false,
            control: None,
            end_at_finding: None,
            stdio_link: None,
        }
    }
}

/// What a run ends with: the scenario's verdict when one ran, what the monitors found (also
/// inside the verdict), and the last messages, for reports.
pub type Finished = harness::embed::Ended;

/// The discovery a run serves: the scenario's list, else the options', else what the cell's
/// protocol implies (`[1, 2]` for 2, `[1]` for 1).
fn discovery_for(options: &Options, settings: &InstanceSettings) -> Discovery {
    if settings.omit_protocols {
        return Discovery::for_protocols(None);
    }
    let list = settings
        .protocols
        .clone()
        .or_else(|| options.protocols.clone())
        .unwrap_or_else(|| {
            if options.cell.protocol() >= 2 {
                vec![1, 2]
            } else {
                vec![1]
            }
        });
    Discovery::for_protocols(Some(list))
}

/// What a device under test is told (its command's and its hooks' placeholders): the
/// instance's address in `{url}`, `{ws_url}` and `{port}`, its token, a `{root}` to work in and a
/// `{tmp}` of its own (both made here), and the cell.
fn device_placeholders(
    cell: &Cell,
    addr: SocketAddr,
    token: &str,
    tmp: &std::path::Path,
) -> Result<Placeholders, StartError> {
    let root = tmp.join("root");
    let own = tmp.join("sut");
    for dir in [&root, &own] {
        std::fs::create_dir_all(dir).map_err(|source| StartError::Directory {
            path: dir.clone(),
            source,
        })?;
    }
    let placeholders = harness::under_test::placeholders(
        &format!("http://{addr}"),
        Some(addr.port()),
        token,
        &own,
        &root.display().to_string(),
        cell,
    );
    Ok(placeholders)
}

/// Runs fake-instance: binds, calls `ready` with the address, then runs the scenario to its
/// end (or, without one, serves until `shutdown`).
pub async fn run(
    options: Options,
    scenario: Option<Scenario>,
    ready: impl FnOnce(SocketAddr),
    shutdown: impl Future<Output = ()>,
) -> Result<Finished, StartError> {
    run_started(options, scenario, |live| ready(live.addr), shutdown).await
}

/// [`run`], telling `ready` where the instance and its control API listen, and handing it the
/// run's progress (for `--events`).
pub async fn run_with(
    options: Options,
    scenario: Option<Scenario>,
    ready: impl FnOnce(harness::embed::Ready),
    shutdown: impl Future<Output = ()>,
) -> Result<Finished, StartError> {
    run_started(options, scenario, |live| ready(live.ready()), shutdown).await
}

/// What a running instance hands whoever embeds it, once it listens: its address, the web
/// UI's hands (none for the lvmh daemon), its control API and its progress.
pub(crate) type Started = harness::embed::Started<InstanceActor, SocketAddr>;

/// [`run`], handing `started` what an embedding handle needs once the instance listens.
pub(crate) async fn run_started(
    options: Options,
    scenario: Option<Scenario>,
    started: impl FnOnce(Started),
    shutdown: impl Future<Output = ()>,
) -> Result<Finished, StartError> {
    let family = scenario.as_ref().map_or(options.family, |s| s.family);
    if family == harness::scenario::Family::Lvmh {
        return run_daemon(options, scenario, started, shutdown).await;
    }
    // The actions are this double's vocabulary: checked here, each against its own type.
    harness::double::check_steps::<actions::WebAction>(
        scenario.as_ref(),
        &options.steps,
        "the web UI's own steps",
    )?;
    let (settings, device_setup) = match &scenario {
        Some(scenario) => (settings::of(scenario)?, DeviceSetup::of(scenario)?),
        None => Default::default(),
    };
    let (opened, listener, addr) = listening::open_listening(
        options.journal.as_deref(),
        options.listen,
        options.bound.as_ref(),
    )
    .await?;
    let wired = Wired::new(
        &options,
        scenario.as_ref(),
        &settings,
        &device_setup,
        &opened,
        addr,
    )?;
    let hub = wired.state.hub.clone();
    // The control API binds before the server starts: a port it cannot have ends the run
    // with nothing left serving.
    let control = serve_control(&options, scenario.as_ref(), &wired).await?;
    let server = harness::double::serve(listener, server::router(wired.state), "the HTTP server");
    started(Started {
        addr,
        actor: Some(wired.actor.clone()),
        control: control.as_ref().map(|c| c.addr),
        progress: hub.progress().clone(),
    });
    let token = options.tokens.first().cloned().unwrap_or_default();
    let (mut under_test, no_stdio) = start_device(
        &options,
        scenario.as_ref(),
        &settings,
        &device_setup,
        &hub,
        (addr, &token, opened.tmp.path()),
    )
    .await?;
    let set_up = match (&scenario, under_test.set_up_failed()) {
        (Some(_), Some(why)) => SetUp::Broke(why),
        (Some(scenario), None) => set_up_of(
            &options,
            scenario,
            &settings,
            &device_setup,
            &under_test,
            no_stdio,
        ),
        (None, _) => SetUp::Ready,
    };
    // The device's project plays its part by hooks, unless the run cannot apply.
    if let (Some(scenario), true) = (&scenario, set_up.is_ready()) {
        let timeline = harness::hooks::steps_of(&device_setup.timeline())?;
        under_test.drive(&hub, &options.cell, "the timed set-up", timeline);
        let steps = harness::hooks::from_first_link(scenario.peer_steps())?;
        under_test.drive(&hub, &options.cell, "the device's own steps", steps);
    }
    let mut outcome = Course::new("fake-instance", hub.clone(), options.cell, wired.actor)
        .with_process(under_test.process(options.process.clone()))
        .ending_at_finding(options.end_at_finding.clone())
        .own_steps(
            "the web UI's own steps",
            options.steps.clone(),
            options.console,
        )
        .run(scenario.as_ref(), set_up, shutdown)
        .await;
    // Links hold the server open; the run is over, so the server goes without waiting for them
    // past a short while: the device hears the close and answers it before the system under
    // test is stopped.
    harness::double::close_links(&hub, "fake-instance is done", Some(CLOSING_GRACE)).await;
    harness::double::stop(server).await;
    under_test.finish(outcome.as_mut()).await;
    Ok(opened.ended(outcome))
}

/// What a LLeMbas run serves and acts with: the server's state (the hub, the HTTP API, the
/// chats) and the web UI's hands.
struct Wired {
    state: ServerState,
    actor: Arc<InstanceActor>,
}

impl Wired {
    /// The client model, its hub, the HTTP API (each of whose requests a step can expect) and
    /// the web UI, for an instance listening on `addr`.
    fn new(
        options: &Options,
        scenario: Option<&Scenario>,
        settings: &InstanceSettings,
        device_setup: &DeviceSetup,
        opened: &Opened,
        addr: SocketAddr,
    ) -> Result<Wired, StartError> {
        let http_config = settings
            .http
            .clone()
            .unwrap_or_else(|| options.http.clone());
        let discovery = Arc::new(RwLock::new(discovery_for(options, settings)));
        let chats = Chats::new(ChatsConfig {
            patience: options.patience,
            misbehave: options.misbehave.clone(),
            state_dir: options.state_dir.clone(),
        });
        let cards = match scenario {
            Some(_) => settings.cards.clone(),
            None => options.cards.clone(),
        };
        // Whether the device ever asks the instance's model: a step waiting for a model request
        // from a device that talks to a model of its own does not apply to it.
        let model_use = Arc::new(applicability::ModelUse::default());
        let applicability = applicability::Applicability::new(
            applicability::Standing::of(scenario, settings, device_setup),
            chats.clone(),
            model_use.clone(),
        );
        let model = ClientModel::new(
            ClientConfig {
                spec: options.cell.lembas_spec(),
                initialize: settings.initialize,
                client: settings.client,
                misbehave: options.misbehave.clone(),
                patience: options.patience,
                cards,
                stdio: settings.link == settings::LinkKind::Stdio,
            },
            discovery.clone(),
            chats.clone(),
        )
        .with_applicability(applicability);
        let token = options.tokens.first().cloned().unwrap_or_default();
        let mut vars =
            options
                .cell
                .builtin_vars(&format!("http://{addr}"), &token, opened.tmp.path());
        vars.set("link_url", json!(format!("ws://{addr}{LINK_PATH}")));
        let hub = opened.hub(Arc::new(model), scenario, vars)?;
        // A scenario configures its device tokens with their scopes: each token `token_scopes`
        // names is a device's token too, after the command line's (so `device-N` numbers stay).
        let mut tokens = options.tokens.clone();
        for token in http_config.token_scopes.keys() {
            if !tokens.contains(token) {
                tokens.push(token.clone());
            }
        }
        let tokens = Arc::new(tokens);
        let http = http::HttpState::new(http_config, tokens.clone(), discovery.clone())
            .with_scopes(chats.clone())
            .misbehaving(options.misbehave.clone());
        observe_http(&http, &hub, &opened.journal, model_use);
        let actor = Arc::new(InstanceActor {
            chats: chats.clone(),
            hub: hub.clone(),
            discovery: discovery.clone(),
            own_steps: scenario.is_none(),
            http: http.clone(),
        });
        let state = ServerState {
            hub,
            tokens,
            discovery,
            http,
            misbehave: options.misbehave.clone(),
            limits: options.limits,
            chats,
        };
        Ok(Wired { state, actor })
    }
}

/// Each request on the HTTP API is a message a step can expect, on link 0 (the HTTP side):
/// "the model was asked exactly once for this turn" is an expect and an expect_none.
fn observe_http(
    http: &http::HttpState,
    hub: &Arc<Hub>,
    journal: &Arc<Journal>,
    model_use: Arc<applicability::ModelUse>,
) {
    let inbox_hub = hub.clone();
    let http_journal = journal.clone();
    http.observe(Arc::new(move |method, params| {
        let message = json!({ "method": method, "params": params });
        // In the journal too, on link 0: reports draw the HTTP side as a lane of its own.
        http_journal.record_ref(HTTP_LINK, harness::journal::Direction::In, &message);
        if method == HTTP_CHAT {
            model_use.saw_chat(&params);
        }
        // Counted all the same by an inbox that keeps nothing.
        let kept = inbox_hub.inbox.keeps().then_some(message);
        inbox_hub.inbox.push(HTTP_LINK, kept.unwrap_or_default());
    }));
}

/// The control API, when asked for (`--control`), served until its server is dropped.
async fn serve_control(
    options: &Options,
    scenario: Option<&Scenario>,
    wired: &Wired,
) -> Result<Option<harness::control::ControlServer>, StartError> {
    let Some(config) = &options.control else {
        return Ok(None);
    };
    let state = &wired.state;
    let snapshot = state.chats.clone();
    let target = harness::control::ControlTarget {
        double: "fake-instance",
        cell: options.cell,
        scenario: scenario.map(|s| s.name.clone()),
        hub: state.hub.clone(),
        // The control API's actions are the test program's: one the device cannot take says so
        // (409) rather than being skipped as the web UI's own steps are.
        actor: Arc::new(InstanceActor {
            chats: state.chats.clone(),
            hub: state.hub.clone(),
            discovery: state.discovery.clone(),
            own_steps: false,
            http: state.http.clone(),
        }),
        peer_state: Arc::new(move || snapshot.snapshot()),
    };
    let served = harness::control::serve(config, target)
        .await
        .map_err(|source| StartError::Listen {
            addr: config.listen,
            source,
        })?;
    Ok(Some(served))
}

/// The device under test, started once the instance answers so its first dial finds it (what
/// its project must set up before it starts done first), and the stdio link a scenario speaks
/// on, attached; gives it, and whether a stdio scenario has no device speaking on its pipes.
async fn start_device(
    options: &Options,
    scenario: Option<&Scenario>,
    settings: &InstanceSettings,
    device_setup: &DeviceSetup,
    hub: &Arc<Hub>,
    (addr, token, tmp): (SocketAddr, &str, &std::path::Path),
) -> Result<(UnderTest, bool), StartError> {
    let stdio = settings.link == settings::LinkKind::Stdio;
    let spec = options
        .sut
        .clone()
        .or_else(|| scenario.and_then(|s| s.sut.clone()))
        // A device that speaks on its standard input and output is started to do so.
        .map(|spec| harness::process::SutSpec {
            link_on_stdio: stdio,
            ..spec
        });
    let placeholders = device_placeholders(&options.cell, addr, token, tmp)?;
    if spec.is_some() {
        device_setup.lay_out(std::path::Path::new(
            placeholders.get("root").unwrap_or_default(),
        ))?;
    }
    let before = match scenario {
        Some(_) => device_setup.before_start(),
        None => Vec::new(),
    };
    let under_test =
        UnderTest::start(spec, placeholders, options.hooks.clone(), &before, None).await?;
    // The stdio link, made by whoever runs the device, or over the process started here.
    let stdio_link = match stdio {
        true => options
            .stdio_link
            .as_ref()
            .and_then(StdioLink::take)
            .or_else(|| under_test.take_link()),
        false => None,
    };
    let no_stdio = stdio && stdio_link.is_none();
    if let Some(connection) = stdio_link {
        hub.attach(crate::stdio_watch::watch(
            connection,
            hub.findings().clone(),
        ));
    }
    Ok((under_test, no_stdio))
}

/// Whether the scenario applies: what it needs arranged (a device it starts gets its root
/// laid out by fake-instance itself), and a device speaking on its pipes for a stdio one.
fn set_up_of(
    options: &Options,
    scenario: &Scenario,
    settings: &InstanceSettings,
    device_setup: &DeviceSetup,
    under_test: &UnderTest,
    no_stdio: bool,
) -> SetUp {
    let arranged = under_test.arranged(options.arranged.clone(), &["lay_out_root"]);
    let mut needs = scenario.set_up_needs(device_setup.needs());
    // The device's link command is not its `serve --stdio`: a stdio scenario runs only where
    // the test says its device command speaks on its pipes (`--arranged serve_stdio`; the
    // self-test's fake-device does).
    if settings.link == settings::LinkKind::Stdio {
        needs.push("serve_stdio".to_string());
    }
    let unarranged =
        harness::engine::applicability::unarranged_but(&needs, &arranged, &["lay_out_root"])
            .or_else(|| under_test.set_up_not_applicable())
            .or_else(|| {
                no_stdio.then(|| {
                    "needs the device's `serve --stdio` command, started here with --exec or a \
                     scenario `sut:`: the scenario speaks to it on its standard input and output"
                        .to_string()
                })
            });
    SetUp::unarranged(unarranged)
}

/// [`run_started`] for the lvmh daemon.
async fn run_daemon(
    options: Options,
    scenario: Option<Scenario>,
    started: impl FnOnce(Started),
    shutdown: impl Future<Output = ()>,
) -> Result<Finished, StartError> {
    use crate::lvmh::DaemonPlan;
    let plan = DaemonPlan {
        listen: options.listen,
        bound: options.bound,
        token: options.tokens.first().cloned().unwrap_or_default(),
        journal: options.journal,
        misbehave: options.misbehave,
        patience: options.patience,
        limits: options.limits,
        state_dir: options.state_dir,
        sut: options.sut,
        process: options.process,
        hooks: options.hooks,
        arranged: options.arranged,
        end_at_finding: options.end_at_finding,
    };
    crate::lvmh::run_started(
        plan,
        scenario,
        |addr, progress| {
            started(Started {
                addr,
                actor: None,
                control: None,
                progress,
            })
        },
        shutdown,
    )
    .await
}

/// How long a finished run waits for its links' close handshakes.
const CLOSING_GRACE: Duration = Duration::from_secs(2);
