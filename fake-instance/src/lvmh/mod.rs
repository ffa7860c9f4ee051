//! fake-instance as the lvmh daemon (`--family lvmh`, spec `lvmh-protocol-v1.md`): it accepts
//! plugins on `/agent/ws` and browsers on `/ws`, persists and serves what the plugins stream,
//! routes the web's prompts to them, spawns sessions and speaks for a GitLab; it checks every
//! plugin rule as the plugins talk, and runs an lvmh scenario's steps over those links.
//!
//! The engine is LLeMbas's own, unchanged: the family switch is the typed framing its links
//! read ([`harness::lvmh::framing`]).

mod actions;
mod api;
mod daemon;
mod gitlab;
mod routes;
mod spawn;
mod state;
mod store;
mod web_seen;

use std::sync::Arc;

use harness::double::{Course, SetUp};
use harness::lvmh::AGENT_PATH;
use harness::scenario::{Scenario, check_actions};
use serde::Deserialize;
use serde_json::json;

use crate::run::start_error::StartError;

pub use actions::{DaemonAction, DaemonActor};
pub use gitlab::GitLab;

/// What an lvmh scenario's `instance:` section says of the fake daemon.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DaemonSettings {
    /// The GitLab behind `/api/gitlab/*`: the token it accepts, its user, the repos.
    #[serde(default)]
    pub gitlab: Option<GitLab>,
}

impl DaemonSettings {
    fn of(scenario: &Scenario) -> Result<DaemonSettings, harness::scenario::LoadError> {
        match &scenario.instance {
            Some(section) => harness::scenario::read_section(
                section.value.clone(),
                "instance",
                &scenario.source,
                section,
            ),
            None => Ok(DaemonSettings::default()),
        }
    }
}

/// What a daemon's run is given (fake-instance's options, as far as they concern it).
pub(crate) struct DaemonPlan {
    /// Where to listen.
    pub listen: std::net::SocketAddr,
    /// A socket already listening, used instead (a restart serves on the same port).
    pub bound: Option<Arc<std::net::TcpListener>>,
    /// `LVMH_TOKEN`.
    pub token: String,
    /// Where to write the journal.
    pub journal: Option<std::path::PathBuf>,
    /// The daemon rules to break.
    pub misbehave: harness::rules::Misbehaviours,
    /// How long a plugin's lost events may wait for their notice.
    pub patience: std::time::Duration,
    /// Each link's frame limits.
    pub limits: harness::transport::FrameLimits,
    /// Where the store lives across restarts.
    pub state_dir: Option<std::path::PathBuf>,
    /// The plugin under test, started here.
    pub sut: Option<harness::process::SutSpec>,
    /// The plugin as a process something else runs.
    pub process: Option<Arc<dyn harness::engine::PeerProcess>>,
    /// What the plugin's project does for the scenario's `peer:` set-up.
    pub hooks: Option<Arc<harness::hooks::Hooks>>,
    /// Which of the `peer:` set-up something arranges.
    pub arranged: harness::engine::Arranged,
    /// End the scenario at the first finding under this rule.
    pub end_at_finding: Option<String>,
}

/// Checks what the daemon reads of a plugin-side lvmh scenario beyond the format: its settings
/// and its steps' actions.
pub(crate) fn check_scenario(scenario: &Scenario) -> Result<(), harness::scenario::LoadError> {
    // Said as it always was: the section's own error, unlocated in the scenario's file.
    DaemonSettings::of(scenario)
        .map_err(|e| harness::scenario::LoadError::unlocated(&scenario.source, e.to_string()))?;
    check_actions::<DaemonAction>(&scenario.steps, "steps", &scenario.source)
}

/// Runs fake-instance as the lvmh daemon; `started` gets its address once it listens.
pub(crate) async fn run_started(
    options: DaemonPlan,
    scenario: Option<Scenario>,
    started: impl FnOnce(std::net::SocketAddr, Arc<harness::engine::Progress>),
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<harness::embed::Ended, StartError> {
    harness::double::check_steps::<DaemonAction>(scenario.as_ref(), &[], "")?;
    let settings = match &scenario {
        Some(scenario) => DaemonSettings::of(scenario)?,
        None => DaemonSettings::default(),
    };
    let (opened, listener, addr) = crate::run::listening::open_listening(
        options.journal.as_deref(),
        options.listen,
        options.bound.as_ref(),
    )
    .await?;
    let store =
        store::Store::open(options.state_dir.as_deref()).map_err(StartError::DaemonState)?;
    let daemon = Arc::new(daemon::Daemon::new(
        store,
        options.misbehave.clone(),
        options.patience,
    ));
    let token = options.token.clone();
    let agent_url = format!("ws://{addr}{AGENT_PATH}");
    let mut vars = harness::engine::Cell::Lvmh.builtin_vars(
        &format!("http://{addr}"),
        &token,
        opened.tmp.path(),
    );
    vars.set("link_url", json!(agent_url));
    let hub = opened.hub(daemon.clone(), scenario.as_ref(), vars)?;
    let spawns = Arc::new(spawn::Spawns::default());
    if let Ok(mut url) = spawns.agent_url.lock() {
        *url = agent_url;
    }
    let state = state::DaemonState {
        hub: hub.clone(),
        daemon: daemon.clone(),
        token: Arc::new(token.clone()),
        limits: options.limits,
        spawns: spawns.clone(),
        gitlab: Arc::new(settings.gitlab.clone().unwrap_or_default()),
    };
    let server =
        harness::double::serve(listener, routes::router(state), "the daemon's HTTP server");
    started(addr, hub.progress().clone());
    let mut under_test =
        start_under_test(&options, scenario.as_ref(), addr, &token, opened.tmp.path()).await?;
    let set_up = match &scenario {
        Some(scenario) => {
            // What the plugin under test must be given (an agent that calls a tool): the keys
            // of the `peer:` set-up, beside its steps.
            let arranged = under_test.arranged(options.arranged.clone(), &[]);
            let needs = harness::double::needs_as_keyed(scenario);
            SetUp::unarranged(harness::engine::applicability::unarranged(
                &needs, &arranged,
            ))
        }
        None => SetUp::Ready,
    };
    if let (Some(scenario), true) = (&scenario, set_up.is_ready()) {
        let steps = harness::hooks::from_first_link(scenario.peer_steps())?;
        under_test.drive(
            &hub,
            &harness::engine::Cell::Lvmh,
            "the plugin's own steps",
            steps,
        );
    }
    let actor = Arc::new(DaemonActor {
        daemon: daemon.clone(),
        spawns: spawns.clone(),
        token: token.clone(),
        limits: options.limits,
    });
    let mut outcome = Course::new(
        "fake-instance",
        hub.clone(),
        harness::engine::Cell::Lvmh,
        actor,
    )
    .with_process(under_test.process(options.process.clone()))
    .ending_at_finding(options.end_at_finding.clone())
    .run(scenario.as_ref(), set_up, shutdown)
    .await;
    spawns.stop_all();
    let grace = std::time::Duration::from_secs(2);
    harness::double::close_links(&hub, "the fake daemon is done", Some(grace)).await;
    harness::double::stop(server).await;
    under_test.finish(outcome.as_mut()).await;
    Ok(opened.ended(outcome))
}

/// The plugin under test (when one is given), started with the daemon's address, token and
/// agent WebSocket in its command's placeholders.
async fn start_under_test(
    options: &DaemonPlan,
    scenario: Option<&Scenario>,
    addr: std::net::SocketAddr,
    token: &str,
    tmp: &std::path::Path,
) -> Result<harness::under_test::UnderTest, StartError> {
    let mut placeholders = harness::under_test::placeholders(
        &format!("http://{addr}"),
        Some(addr.port()),
        token,
        tmp,
        &tmp.display().to_string(),
        &harness::engine::Cell::Lvmh,
    );
    placeholders.set("ws_url", format!("ws://{addr}{AGENT_PATH}"));
    let sut = options
        .sut
        .clone()
        .or_else(|| scenario.and_then(|s| s.sut.clone()));
    Ok(
        harness::under_test::UnderTest::start(sut, placeholders, options.hooks.clone(), &[], None)
            .await?,
    )
}
