//! A run of fake-device: its options, what it ends with, why it may not start, and the run
//! itself: discovery read and the link dialled (and kept), the scenario's steps (or the
//! person's own) run over it, and the instance under test started and ended around them; and
//! `serve --stdio`, plain ACP to an editor.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use harness::engine::{Hub, PeerProcess};
use harness::lembas::setup::InstanceSetup;
use harness::scenario::{Mode, Scenario, check_actions};
use harness::under_test::UnderTest;

use crate::actions::{self, DeviceActor};
use crate::agent::{AgentConfig, AgentModel};
use crate::dial::DeviceDialer;
use crate::sessions::Sessions;
use crate::settings::{self, DeviceSettings};

mod config;
mod finished;
mod instance;
mod options;
mod stdio;
mod timers;

use config::{Basics, device_limits, reduced, sessions_config};
use instance::instance_placeholders;
use timers::play_on_timers;

pub use finished::{Finished, PROTOCOL_MISMATCH_SENTENCE, StartError, last_words};
pub use instance::start_instance;
pub use options::{Options, TERMINAL_PROMPT, TerminalPlay};
pub use stdio::serve_stdio;

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
    .map_err(StartError::Scenario)?;
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
                    .map_err(StartError::Scenario)?;
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
