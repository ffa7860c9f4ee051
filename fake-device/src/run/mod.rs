//! A run of fake-device: its options, what it ends with, why it may not start, and the run
//! itself: discovery read and the link dialled (and kept), the scenario's steps (or the
//! person's own) run over it, and the instance under test started and ended around them; and
//! `serve --stdio`, plain ACP to an editor.

use std::future::Future;
use std::sync::Arc;

use harness::double::{Beside, Course, SetUp};
use harness::engine::PeerProcess;
use harness::lembas::setup::InstanceSetup;
use harness::scenario::{Mode, Scenario};
use harness::under_test::UnderTest;

use crate::actions::{self, DeviceActor};
use crate::settings::{self, DeviceSettings};

mod config;
mod finished;
mod instance;
mod options;
pub(crate) mod start_error;
mod stdio;
mod timers;
mod wiring;

use config::Basics;
use instance::instance_placeholders;
use timers::play_on_timers;
use wiring::Wired;

pub use finished::{Finished, PROTOCOL_MISMATCH_SENTENCE, last_words};
pub use instance::start_instance;
pub use options::{Options, TERMINAL_PROMPT, TerminalPlay};
pub use start_error::StartError;
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
    started: impl FnOnce(Started),
    shutdown: impl Future<Output = ()>,
) -> Result<Finished, StartError> {
    use crate::lvmh::PluginPlan;
    let plan = PluginPlan {
        instance: options.instance,
        token: options.token,
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
            started(Started {
                addr: (),
                actor: None,
                control: None,
                progress,
            })
        },
        shutdown,
    )
    .await?;
    Ok(Finished::of(ended, None))
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
/// its terminal (none for the lvmh plugin), its control API and its progress.
pub(crate) type Started = harness::embed::Started<DeviceActor>;

/// [`run`], handing `started` what an embedding handle needs once the device is set up (before
/// its first dial).
pub(crate) async fn run_started(
    options: Options,
    scenario: Option<Scenario>,
    started: impl FnOnce(Started),
    shutdown: impl Future<Output = ()>,
) -> Result<Finished, StartError> {
    let family = scenario.as_ref().map_or(options.family, |s| s.family);
    if family == harness::scenario::Family::Lvmh {
        return Box::pin(run_plugin(options, scenario, started, shutdown)).await;
    }
    // The actions are this double's vocabulary: checked here, each against its own type.
    harness::double::check_steps::<actions::DeviceAction>(
        scenario.as_ref(),
        &options.steps,
        "the device's own steps",
    )?;
    let (settings, instance_setup) = match &scenario {
        Some(scenario) => (settings::of(scenario)?, InstanceSetup::of(scenario)?),
        None => (DeviceSettings::default(), InstanceSetup::default()),
    };
    let wired = Wired::new(
        &options,
        scenario.as_ref(),
        &settings,
        Basics::open(&options)?,
    )?;
    let control = Box::pin(wired.serve_control(&options, scenario.as_ref())).await?;
    // Timers start once the control API is up: a port it cannot have leaves nothing running.
    play_on_timers(&wired.actor, &options);
    let hub = wired.hub.clone();
    started(Started {
        addr: (),
        actor: Some(wired.actor.clone()),
        control: control.as_ref().map(|c| c.addr),
        progress: hub.progress().clone(),
    });
    let mut under_test = UnderTest::adopt(
        options.sut.clone(),
        options.hooks.clone(),
        instance_placeholders(&options, wired.opened.tmp.path()),
    );
    let set_up = match &scenario {
        Some(scenario) => {
            Box::pin(set_up_of(&options, scenario, &instance_setup, &under_test)).await
        }
        None => SetUp::Ready,
    };
    // The instance's project plays its part by hooks, unless the run cannot apply; its web UI
    // acts on a linked device, so from the first link on.
    if let (Some(scenario), true) = (&scenario, set_up.is_ready()) {
        // A person sees the device linked once the instance has initialized it.
        let steps = harness::hooks::from_first_link(scenario.peer_steps())
            .and_then(|s| harness::hooks::after_signal(s, crate::agent::INITIALIZED))?;
        under_test.drive(&hub, &options.cell, "the web UI's own steps", steps);
    }
    let beside = Beside {
        task: wired.linking(&options, &settings),
        during_scenario: settings.dial == Mode::Auto,
    };
    let course = Course::new("fake-device", hub.clone(), options.cell, wired.actor)
        .dialling(wired.dialer)
        .with_process(under_test.process(options.process.clone()))
        .ending_at_finding(options.end_at_finding.clone())
        .own_steps(
            "the device's own steps",
            options.steps.clone(),
            options.console,
        );
    let (mut outcome, stopped) =
        Box::pin(course.run_beside(scenario.as_ref(), set_up, Some(beside), shutdown)).await;
    harness::double::close_links(&hub, "fake-device is done", None).await;
    Box::pin(under_test.finish(outcome.as_mut())).await;
    Ok(Finished::of(wired.opened.ended(outcome), stopped))
}

/// Whether the scenario applies: what it needs arranged, then the instance's project's set-up,
/// made before the device dials; one that broke leaves nothing to judge, one it does not
/// implement does not apply.
async fn set_up_of(
    options: &Options,
    scenario: &Scenario,
    instance_setup: &InstanceSetup,
    under_test: &UnderTest,
) -> SetUp {
    let unarranged = harness::engine::applicability::unarranged(
        &scenario.set_up_needs(instance_setup.needs()),
        &under_test.arranged(options.arranged.clone(), &[]),
    );
    if unarranged.is_some() {
        return SetUp::unarranged(unarranged);
    }
    match under_test.set_up(&instance_setup.at_start()).await {
        Ok(()) => SetUp::Ready,
        Err(harness::engine::ActError::NotApplicable(why)) => SetUp::Unarranged(why),
        Err(_) => under_test
            .set_up_failed()
            .map_or(SetUp::Ready, SetUp::Broke),
    }
}
