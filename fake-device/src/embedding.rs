//! fake-device inside a Rust test: a builder that starts it on the test's runtime, dialling the
//! instance under test, and a handle that acts as the person at the device, gives the verdict,
//! and shuts the device down when dropped.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::FutureExt;
use harness::Exit;
use harness::embed::{Ended, Hands, InProcessPeer, RunPlan, Running, Shutdown, isolated};
use harness::engine::{ActError, Cell};
use harness::lembas::setup::DeviceSetup;
use harness::report::RunReport;
use harness::rules::{Binds, Misbehaviours};
use harness::scenario::{LoadError, Scenario, Side};
use serde_json::Value;

use crate::actions::{DeviceAction, DeviceActor};
use crate::dial::{ProtocolChoice, Stopped};
use crate::peer_of::PeerPlay;
use crate::run::{Live, Options, StartError, last_words};
use crate::settings::AgentKind;

/// How long [`DeviceBuilder::start`] waits for the device to be set up, and for discovery
/// when the protocol is chosen from it.
const START_WITHIN: Duration = Duration::from_secs(10);

/// How long [`FakeDevice::verdict`] waits for a scenario to end, unless the builder says.
const VERDICT_WITHIN: Duration = Duration::from_secs(300);

/// How long an action waits, unless the call says.
const ACT_WITHIN: Duration = Duration::from_secs(10);

/// How often [`FakeDevice::wait_linked`] looks at the link.
const LINK_POLL: Duration = Duration::from_millis(10);

/// Sets up a [`FakeDevice`]: its roots, the protocol, a scenario, rules to break.
#[derive(Debug)]
#[must_use = "a builder does nothing until `start().await`"]
pub struct DeviceBuilder {
    options: Options,
    scenario: Option<Scenario>,
    spec: Option<harness::lembas::Spec>,
    cell: Option<Cell>,
    verdict_within: Option<Duration>,
    play: Option<PeerPlay>,
    restarts: Option<Arc<InProcessPeer>>,
    own_runtime: bool,
    stdio: Option<harness::transport::Connection>,
}

impl DeviceBuilder {
    /// A device for the instance whose base URL is `instance` (`http://host:port`).
    pub fn new(instance: impl Into<String>) -> Self {
        Self {
            options: Options::for_instance(instance),
            scenario: None,
            spec: None,
            cell: None,
            verdict_within: None,
            play: None,
            restarts: None,
            own_runtime: false,
            stdio: None,
        }
    }

    /// Serves an editor over `connection` as `fake-device serve --stdio` does on its standard
    /// input and output (plain ACP, one message a line) instead of dialling the instance, whose
    /// URL then serves only the model of `--agent model`.
    pub fn stdio(mut self, connection: harness::transport::Connection) -> Self {
        self.stdio = Some(connection);
        self
    }

    /// Adds a trusted remote root (`remote.roots`): where sessions may work.
    pub fn root(mut self, root: impl AsRef<Path>) -> Self {
        self.options.roots.push(root.as_ref().display().to_string());
        self
    }

    /// Says this link protocol in hello, whatever discovery lists (default: chosen from
    /// discovery, as the spec says).
    pub fn protocol(mut self, protocol: u8) -> Self {
        self.options.protocol = ProtocolChoice::Fixed(protocol);
        self
    }

    /// The spec version it follows (default: the scenario's newest, else 1.1.0).
    pub fn spec(mut self, spec: harness::lembas::Spec) -> Self {
        self.spec = Some(spec);
        self
    }

    /// The device token (default `lembas-test-token`, fake-instance's default).
    pub fn token(mut self, token: impl Into<String>) -> Self {
        self.options.token = token.into();
        self
    }

    /// Runs a scenario: an embedded one by name (`"prompt"`, `"prompt.yaml"`) or a file.
    pub fn scenario(mut self, name_or_path: &str) -> Result<Self, LoadError> {
        self.scenario = Some(harness::scenario::catalogue::resolve(
            name_or_path,
            Side::Device,
        )?);
        Ok(self)
    }

    /// Runs a scenario already loaded (or written in the test with
    /// [`harness::scenario::load_str`]).
    pub fn with_scenario(mut self, scenario: Scenario) -> Self {
        self.scenario = Some(scenario);
        self
    }

    /// Lists only these of the spec's capabilities, and behaves as a device without the
    /// others does.
    pub fn capabilities<S: Into<String>>(mut self, only: impl IntoIterator<Item = S>) -> Self {
        self.options.capabilities = Some(only.into_iter().map(Into::into).collect());
        self
    }

    /// What drives its turns (default: the echo agent, a model of its own).
    pub fn agent(mut self, agent: AgentKind) -> Self {
        self.options.agent = agent;
        self
    }

    /// Breaks a rule of the catalogue on purpose, to show an instance's check catches it.
    pub fn misbehave(mut self, rule: &str) -> Result<Self, StartError> {
        let mut rules: Vec<String> = self.options.misbehave.iter().cloned().collect();
        rules.push(rule.to_string());
        self.options.misbehave = Misbehaviours::parse(&rules, Binds::Device)
            .map_err(|e| StartError::Scenario(e.to_string()))?;
        Ok(self)
    }

    /// How long the instance may take to answer or to send initialize (default 5 s).
    pub fn patience(mut self, patience: Duration) -> Self {
        self.options.patience = patience;
        self
    }

    /// How long [`FakeDevice::verdict`] waits for the scenario to end (default 5 minutes).
    pub fn verdict_within(mut self, within: Duration) -> Self {
        self.verdict_within = Some(within);
        self
    }

    /// Serves the control API on a free loopback port with a fresh token, for a program in
    /// another language that the test starts ([`FakeDevice::control`] says where).
    pub fn control(mut self) -> Self {
        self.options.control = Some(harness::control::ControlConfig::loopback(0));
        self
    }

    /// The protocol family it plays: LLeMbas CLI (the default) or lvmh's plugin.
    pub fn family(mut self, family: harness::family::Family) -> Self {
        self.options.family = family;
        self
    }

    /// The lvmh plugin's settings (with [`DeviceBuilder::family`] lvmh).
    pub fn plugin(mut self, settings: crate::lvmh::PluginSettings) -> Self {
        self.options.plugin = Some(settings);
        self
    }

    /// Steps it does by itself, as a scenario's `peer.steps` describe (the lvmh plugin's).
    pub fn peer_steps(
        mut self,
        steps: Vec<harness::scenario::Spanned<harness::scenario::Step>>,
    ) -> Self {
        self.options.steps = steps;
        self
    }

    /// What the instance's own test has set up, so the scenario's `needs_setup` steps apply.
    pub fn arranged(mut self, arranged: harness::engine::Arranged) -> Self {
        self.options.arranged = arranged;
        self
    }

    /// The instance's process, for a scenario that restarts it (`restart_peer`) and reads its
    /// output; [`DeviceBuilder::restarted_by`] is the usual way in a test.
    pub fn peer_process(mut self, process: Arc<dyn harness::engine::PeerProcess>) -> Self {
        self.options.process = Some(process);
        self
    }

    /// Ends the run at the first finding of this rule: what decides a misbehaviour case of the
    /// self-test, so it need not wait out the scenario.
    pub fn end_at_finding(mut self, rule: Option<String>) -> Self {
        self.options.end_at_finding = rule;
        self
    }

    /// Answers `initialize` only this long after it came, as a CLI on the official ACP SDK may;
    /// an instance that sends anything before the answer is caught.
    pub fn initialize_after(mut self, after: Duration) -> Self {
        self.options.initialize_after = Some(after);
        self
    }

    /// The largest message taken from the instance; a larger one ends the link.
    pub fn max_message_bytes(mut self, bytes: usize) -> Self {
        self.options.limits.max_message_bytes = bytes;
        self
    }

    /// How long a link may say nothing before it is closed as gone (the transport's
    /// keep-alive).
    pub fn silence(mut self, silence: Duration) -> Self {
        self.options.limits.silence = silence;
        self
    }

    /// Lets the instance open terminals on the device (`remote.terminal`), with the shell's
    /// integration on or off and `HOME` set to `home` (default: the user's).
    pub fn remote_terminal(mut self, integration: bool, home: Option<&Path>) -> Self {
        self.options.remote_terminal = true;
        self.options.terminal_integration = integration;
        self.options.terminal_home = home.map(Path::to_path_buf);
        self
    }

    /// Plays the device an instance-side scenario's `peer:` section describes, as the
    /// self-test does: a trusted root laid out as it says (or none), its store seeded with
    /// sessions deleted offline or started elsewhere, the model the scenario scripts, a person
    /// at the terminal on its timers, and its `peer.steps`.
    pub fn as_peer_of(mut self, scenario: &Scenario) -> Result<Self, LoadError> {
        crate::check::check_as_peer_of(scenario)?;
        self.play = Some(PeerPlay {
            setup: DeviceSetup::of(scenario)?,
            steps: scenario.peer_steps().to_vec(),
        });
        Ok(self)
    }

    /// The protocol and spec of the run, as a matrix cell names them: the spec it follows and
    /// the `${protocol}` of its steps (the protocol it says is still chosen from discovery).
    pub fn cell(mut self, cell: Cell) -> Self {
        self.cell = Some(cell);
        self
    }

    /// Lets `peer` restart it, as `restart_peer` restarts a real device's process: the run ends
    /// and starts again on the same store. `peer` also hears the code the command would have
    /// exited with.
    pub fn restarted_by(mut self, peer: Arc<InProcessPeer>) -> Self {
        self.restarts = Some(peer);
        self
    }

    /// Runs each of its runs on a runtime and a thread of its own, dropped when the run ends:
    /// every task of a restarted run (a turn still streaming, a timer) ends with it, as a killed
    /// process's would. Without, a run shares the test's runtime, whose workers keep its timers
    /// on time on a busy machine.
    pub fn own_runtime(mut self, own: bool) -> Self {
        self.own_runtime = own;
        self
    }

    /// Starts the device on the current tokio runtime: it reads discovery and dials (a
    /// scenario's `dial: manual` waits for its steps), and the handle comes back at once.
    pub async fn start(self) -> Result<FakeDevice, StartError> {
        if self.restarts.is_some() && self.scenario.is_some() {
            // A restarted run plays a peer; a scenario's steps would start over with it.
            return Err(StartError::Scenario(
                "a double restarted by its peer runs no scenario of its own".into(),
            ));
        }
        let mut options = self.options;
        let matrix = self.scenario.as_ref().map(|s| &s.matrix);
        // A scenario's `${protocol}` and `when: {protocol}` follow the link's protocol, which
        // by default is what discovery allows.
        let protocol = match (options.protocol, &self.scenario, &self.cell) {
            (ProtocolChoice::Fixed(p), _, _) => p,
            (ProtocolChoice::Auto, _, Some(cell)) => cell.protocol,
            (ProtocolChoice::Auto, None, None) => 2,
            (ProtocolChoice::Auto, Some(_), None) => {
                crate::dial::probe_protocol(&options.instance, START_WITHIN)
                    .await
                    .map_err(StartError::Scenario)?
            }
        };
        options.cell = Cell {
            protocol,
            spec: self
                .spec
                .or_else(|| self.cell.map(|c| c.spec))
                .or_else(|| matrix.and_then(|m| m.spec.iter().filter_map(|s| s.parse().ok()).max()))
                .unwrap_or(options.cell.spec),
        };
        let scratch = if self.play.is_some() || self.restarts.is_some() {
            Some(tempfile::tempdir().map_err(|e| {
                StartError::Scenario(format!("cannot make a temporary directory: {e}"))
            })?)
        } else {
            None
        };
        if let (Some(play), Some(scratch)) = (&self.play, &scratch) {
            crate::peer_of::apply(play, &mut options, scratch.path())
                .map_err(StartError::Scenario)?;
        }
        if let (Some(_), Some(scratch), None) = (&self.restarts, &scratch, &options.state_dir) {
            // A restart finds the sessions of the run before it.
            options.state_dir = Some(scratch.path().join("state"));
        }
        let control_token = options.control.as_ref().map(|c| c.token.clone());
        let plan = RunPlan {
            double: "fake-device",
            cell: options.cell.clone(),
            scenario: self.scenario.as_ref().map(|s| s.name.clone()),
            up_within: START_WITHIN,
            verdict_within: self.verdict_within.unwrap_or(VERDICT_WITHIN),
        };
        if let Some(connection) = self.stdio {
            return Self::start_stdio(options, plan, connection, self.restarts, scratch).await;
        }
        let scenario = self.scenario;
        let restarts = self.restarts;
        let own_runtime = self.own_runtime;
        let actor = Arc::new(Hands::<DeviceActor>::default());
        let slot = actor.clone();
        let (live, running) = Running::start(plan, |up, shutdown| async move {
            match restarts {
                None => crate::run::run_started(
                    options,
                    scenario,
                    move |live| {
                        let _ = up.send(live);
                    },
                    shutdown,
                )
                .await
                .map(Into::into),
                Some(peer) => runs(options, peer, own_runtime, up, slot, shutdown).await,
            }
        })
        .await?;
        let control = live
            .control
            .zip(control_token)
            .map(|(addr, token)| (format!("http://{addr}"), token));
        if let Some(hands) = live.actor {
            actor.set(hands);
        }
        Ok(FakeDevice {
            actor,
            running,
            _scratch: scratch,
            control,
        })
    }
}

impl DeviceBuilder {
    /// The stdio run: up at once (an editor speaks first), until the editor's end closes or the
    /// handle goes; `peer` hears the code it ended with.
    async fn start_stdio(
        options: Options,
        plan: RunPlan,
        connection: harness::transport::Connection,
        peer: Option<Arc<InProcessPeer>>,
        scratch: Option<tempfile::TempDir>,
    ) -> Result<FakeDevice, StartError> {
        let ((), running) = Running::start(plan, |up, shutdown| async move {
            let _ = up.send(());
            let finished = crate::run::serve_stdio(options, connection, shutdown).await;
            if let Some(peer) = peer {
                peer.ended(exit_code(&finished));
            }
            finished.map(Into::into)
        })
        .await?;
        Ok(FakeDevice {
            actor: Arc::new(Hands::default()),
            running,
            _scratch: scratch,
            control: None,
        })
    }
}

/// The device's runs while `peer` restarts it, on the same store (each on a runtime of its own
/// when `own_runtime`), until `shutdown` or a run that ends by itself. The first run's hands go to `up`; a later
/// run's replace them in `actor`.
async fn runs(
    mut options: Options,
    peer: Arc<InProcessPeer>,
    own_runtime: bool,
    up: tokio::sync::oneshot::Sender<Live>,
    actor: Arc<Hands<DeviceActor>>,
    shutdown: Shutdown,
) -> Result<Ended, StartError> {
    let stop = shutdown.shared();
    let mut up = Some(up);
    loop {
        let (asked, stop_now) = (peer.clone(), stop.clone());
        let run_shutdown = async move {
            tokio::select! {
                () = stop_now => {}
                () = asked.restart_asked() => {}
            }
        };
        let first = up.take();
        let slot = actor.clone();
        let controlled = Arc::new(Mutex::new(None));
        let seen = controlled.clone();
        let started = move |live: Live| {
            if let Ok(mut seen) = seen.lock() {
                *seen = live.control;
            }
            match first {
                Some(up) => {
                    let _ = up.send(live);
                }
                None => {
                    if let Some(actor) = live.actor {
                        slot.set(actor);
                    }
                }
            }
        };
        let run_options = options.clone();
        let finished = if own_runtime {
            isolated(move || crate::run::run_started(run_options, None, started, run_shutdown))
                .await
                .unwrap_or_else(|| Err(StartError::NotUp("its thread could not start".into())))
        } else {
            crate::run::run_started(run_options, None, started, run_shutdown).await
        };
        let stopped = stop.clone().now_or_never().is_some();
        // The control API comes back where it was, so the URL given out stays true.
        let bound = controlled.lock().ok().and_then(|c| *c);
        if let (Some(addr), Some(control)) = (bound, options.control.as_mut()) {
            control.listen = addr;
        }
        match peer.take_restart() {
            Some(ack) if !stopped => {
                let _ = ack.send(());
            }
            _ => {
                // What its command would say as it stops, where a step can read it.
                let said = finished
                    .as_ref()
                    .ok()
                    .and_then(|done| last_words(done.stopped.as_ref(), &options.misbehave));
                if let Some(words) = said {
                    peer.say(harness::process::Stream::Stderr, &words);
                }
                peer.ended(exit_code(&finished));
                return finished.map(Into::into);
            }
        }
    }
}

/// The code the fake-device command would have exited with after this run.
fn exit_code(finished: &Result<crate::run::Finished, StartError>) -> i32 {
    let code = match finished {
        Ok(done) => match done.stopped {
            Some(Stopped::ProtocolMismatch) => Exit::ProtocolMismatch,
            Some(Stopped::Unauthorized) => Exit::Unauthorized,
            _ => Exit::Passed,
        },
        Err(_) => Exit::Usage,
    };
    code as i32
}

/// A fake LLeMbas CLI running inside the test, linked to the instance under test: act as the
/// person at its terminal, and take its [`verdict`](Self::verdict).
///
/// Dropping it shuts the device down. A handle that ran a scenario must have its verdict
/// taken: dropped without, it fails the test.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use fake_device::FakeDevice;
/// use fake_instance::FakeInstance;
///
/// let root = tempfile::tempdir()?;
/// // A simulated web server (no scenario), and a device linked to it.
/// let instance = FakeInstance::builder().start().await?;
/// let device = FakeDevice::builder(instance.url()).root(root.path()).start().await?;
/// device.wait_linked(Duration::from_secs(5)).await?;
/// let chat = instance.open_chat().await?;
/// let sent = instance.send(&chat, "hello").await?;
/// assert!(sent["turnId"].is_string());
/// # Ok(())
/// # }
/// ```
pub struct FakeDevice {
    /// The person's hands in the current run (a restart replaces them).
    actor: Arc<Hands<DeviceActor>>,
    running: Running<StartError>,
    /// The control API's URL and token, when the builder asked for it.
    control: Option<(String, String)>,
    /// The root, home and store a device playing a scenario's peer works in.
    _scratch: Option<tempfile::TempDir>,
}

impl FakeDevice {
    /// A builder for a device that dials the instance at `instance` (`http://host:port`).
    pub fn builder(instance: impl Into<String>) -> DeviceBuilder {
        DeviceBuilder::new(instance)
    }

    /// The control API's URL and token, when the builder asked for it.
    pub fn control(&self) -> Option<(&str, &str)> {
        self.control
            .as_ref()
            .map(|(url, token)| (url.as_str(), token.as_str()))
    }

    /// The protocol and spec of the run.
    pub fn cell(&self) -> &Cell {
        self.running.cell()
    }

    /// The person's hands in the current run.
    fn actor(&self) -> Result<Arc<DeviceActor>, ActError> {
        self.actor.current()
    }

    /// Waits until the device is linked and the instance has initialized it as LLeMbas. An
    /// instance's scenario that ends by itself may have closed the link before this looks: wait
    /// for its verdict instead.
    pub async fn wait_linked(&self, within: Duration) -> Result<(), ActError> {
        let deadline = Instant::now() + within;
        loop {
            if self
                .actor()
                .is_ok_and(|actor| actor.lembas_link().is_some())
            {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(ActError::Failed(format!(
                    "the device was not linked and initialized within {within:?}"
                )));
            }
            tokio::time::sleep(LINK_POLL).await;
        }
    }

    /// Does what a person at the device does, within 10 s; gives the action's result (what a
    /// scenario's `capture` reads).
    pub async fn act(&self, action: DeviceAction) -> Result<Value, ActError> {
        self.act_within(action, ACT_WITHIN).await
    }

    /// As [`act`](Self::act), within `within`.
    pub async fn act_within(
        &self,
        action: DeviceAction,
        within: Duration,
    ) -> Result<Value, ActError> {
        self.actor()?
            .act_now(action, within)
            .await
            .map_err(ActError::Failed)
    }

    /// A person starts a session at the terminal and shares it; gives its session id.
    pub async fn share_session(&self) -> Result<String, ActError> {
        let shared = self.act(DeviceAction::ShareSession(true)).await?;
        shared["sessionId"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| ActError::Failed(format!("no `sessionId` in {shared}")))
    }

    /// The person types `text` into the shared session.
    pub async fn terminal_prompt(&self, text: &str) -> Result<Value, ActError> {
        self.act(DeviceAction::TerminalPrompt(text.into())).await
    }

    /// The session is deleted at the device; the instance is told now, or on the next link.
    pub async fn delete_session(&self, id: &str) -> Result<Value, ActError> {
        self.act(DeviceAction::DeleteSession(id.into())).await
    }

    /// The verdict: with a scenario, once it has ended (within the builder's `verdict_within`);
    /// without one, what the monitors found until now. The device shuts down either way.
    pub async fn verdict(self) -> RunReport {
        self.running.verdict().await
    }

    /// Stops the double without taking its verdict: for a test that failed before the run
    /// could end (its own error is then the one it reports).
    pub fn dismiss(self) {
        self.running.dismiss();
    }
}

impl std::fmt::Debug for FakeDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeDevice")
            .field("cell", self.cell())
            .field("scenario", &self.running.scenario())
            .finish_non_exhaustive()
    }
}
