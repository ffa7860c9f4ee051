//! fake-device inside a Rust test: a builder that starts it on the test's runtime, dialling the
//! instance under test, and a handle that acts as the person at the device, gives the verdict,
//! and shuts the device down when dropped.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::FutureExt;
use harness::Exit;
use harness::embed::{
    BuilderCore, Ended, Hands, InProcessPeer, RunPlan, Running, Shutdown, isolated,
};
use harness::engine::{ActError, Cell};
use harness::lembas::setup::DeviceSetup;
use harness::rules::Binds;
use harness::scenario::{LoadError, Scenario, Side};
use serde_json::Value;

use crate::actions::{DeviceAction, DeviceActor};
use crate::dial::{ProtocolChoice, Stopped};
use crate::peer_of::PeerPlay;
use crate::run::{Options, StartError, Started, last_words};
use crate::settings::AgentKind;

/// How long an action waits, unless the call says.
const ACT_WITHIN: Duration = Duration::from_secs(10);

/// How often [`FakeDevice::wait_linked`] looks at the link.
const LINK_POLL: Duration = Duration::from_millis(10);

/// A builder method's example (see [`harness::builder_example`]).
macro_rules! example {
    ($call:expr) => {
        harness::builder_example!(
            "fake_device",
            "FakeDevice::builder(\"http://127.0.0.1:8000\")",
            $call
        )
    };
}

/// Sets up a [`FakeDevice`]: its roots, the protocol, a scenario, rules to break.
#[derive(Debug)]
#[must_use = "a builder does nothing until `start().await`"]
pub struct DeviceBuilder {
    options: Options,
    core: BuilderCore,
    cell: Option<Cell>,
    play: Option<PeerPlay>,
    own_runtime: bool,
    stdio: Option<harness::transport::Connection>,
}

impl DeviceBuilder {
    harness::double_builder_setters! {
        krate: "fake_device",
        new: "FakeDevice::builder(\"http://127.0.0.1:8000\")",
        handle: "FakeDevice",
        builder: "DeviceBuilder",
        side: Side::Device,
        binds: Binds::Device,
        rule: "device.prompt.queued",
        error: StartError,
        peer: "instance",
        example: "prompt",
        patience: "to answer or to send initialize",
        lvmh: "plugin",
    }

    /// A device for the instance whose base URL is `instance` (`http://host:port`).
    #[doc = harness::builder_example!(
        "fake_device",
        "DeviceBuilder::new(\"http://127.0.0.1:8000\")",
        ".token(\"device-token\")"
    )]
    pub fn new(instance: impl Into<String>) -> Self {
        Self {
            options: Options::for_instance(instance),
            core: BuilderCore::default(),
            cell: None,
            play: None,
            own_runtime: false,
            stdio: None,
        }
    }

    /// Serves an editor over `connection` as `fake-device serve --stdio` does on its standard
    /// input and output (plain ACP, one message a line) instead of dialling the instance, whose
    /// URL then serves only the model of `--agent model`.
    #[doc = example!(".stdio(connection)")]
    pub fn stdio(mut self, connection: harness::transport::Connection) -> Self {
        self.stdio = Some(connection);
        self
    }

    /// Adds a trusted remote root (`remote.roots`): where sessions may work.
    #[doc = example!(".root(\"/work/project\")")]
    pub fn root(mut self, root: impl AsRef<Path>) -> Self {
        self.options.roots.push(root.as_ref().display().to_string());
        self
    }

    /// Says this link protocol in hello, whatever discovery lists (default: chosen from
    /// discovery, as the spec says).
    #[doc = example!(".protocol(1)")]
    pub fn protocol(mut self, protocol: u8) -> Self {
        self.options.protocol = ProtocolChoice::Fixed(protocol);
        self
    }

    /// The device token (default `lembas-test-token`, fake-instance's default).
    #[doc = example!(".token(\"device-token\")")]
    pub fn token(mut self, token: impl Into<String>) -> Self {
        self.options.token = token.into();
        self
    }

    /// Lists only these of the spec's capabilities, and behaves as a device without the
    /// others does.
    #[doc = example!(".capabilities([\"model\", \"steer\"])")]
    pub fn capabilities<S: Into<String>>(mut self, only: impl IntoIterator<Item = S>) -> Self {
        self.options.capabilities = Some(only.into_iter().map(Into::into).collect());
        self
    }

    /// What drives its turns (default: the echo agent, a model of its own).
    #[doc = example!(".agent(AgentKind::Model)")]
    pub fn agent(mut self, agent: AgentKind) -> Self {
        self.options.agent = agent;
        self
    }

    /// The lvmh plugin's settings (with [`DeviceBuilder::family`] lvmh).
    #[doc = example!(".plugin(lvmh::PluginSettings::default())")]
    pub fn plugin(mut self, settings: crate::lvmh::PluginSettings) -> Self {
        self.options.plugin = Some(settings);
        self
    }

    /// Steps it does by itself, as a scenario's `peer.steps` describe (the lvmh plugin's).
    #[doc = example!(".peer_steps(scenario.peer_steps().to_vec())")]
    pub fn peer_steps(
        mut self,
        steps: Vec<harness::scenario::Spanned<harness::scenario::Step>>,
    ) -> Self {
        self.options.steps = steps;
        self
    }

    /// Answers `initialize` only this long after it came, as a CLI on the official ACP SDK may;
    /// an instance that sends anything before the answer is caught.
    #[doc = example!(".initialize_after(Duration::from_millis(200))")]
    pub fn initialize_after(mut self, after: Duration) -> Self {
        self.options.initialize_after = Some(after);
        self
    }

    /// How long the echo and scripted agents pause between a turn's steps (50 ms unless a
    /// scenario says): longer turns, as a real model's are, so that prompts meet a turn running.
    #[doc = example!(".step_delay(Duration::from_millis(400))")]
    pub fn step_delay(mut self, delay: Duration) -> Self {
        self.options.step_delay = Some(delay);
        self
    }

    /// The largest message taken from the instance; a larger one ends the link.
    #[doc = example!(".max_message_bytes(64 * 1024)")]
    pub fn max_message_bytes(mut self, bytes: usize) -> Self {
        self.options.limits.max_message_bytes = bytes;
        self
    }

    /// Lets the instance open terminals on the device (`remote.terminal`), with the shell's
    /// integration on or off and `HOME` set to `home` (default: the user's).
    #[doc = example!(".remote_terminal(true, None)")]
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
    #[doc = example!(".as_peer_of(&scenario)?")]
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
    #[doc = example!(".cell(Cell::lembas(1, Spec::V1_0_0))")]
    pub fn cell(mut self, cell: Cell) -> Self {
        self.cell = Some(cell);
        self
    }

    /// Lets `peer` restart it, as `restart_peer` restarts a real device's process: the run ends
    /// and starts again on the same store. `peer` also hears the code the command would have
    /// exited with.
    #[doc = example!(".restarted_by(InProcessPeer::new())")]
    pub fn restarted_by(mut self, peer: Arc<InProcessPeer>) -> Self {
        self.core.restarts = Some(peer);
        self
    }

    /// Runs each of its runs on a runtime and a thread of its own, dropped when the run ends:
    /// every task of a restarted run (a turn still streaming, a timer) ends with it, as a killed
    /// process's would. Without, a run shares the test's runtime, whose workers keep its timers
    /// on time on a busy machine.
    #[doc = example!(".own_runtime(true)")]
    pub fn own_runtime(mut self, own: bool) -> Self {
        self.own_runtime = own;
        self
    }

    /// Starts the device on the current tokio runtime: it reads discovery and dials (a
    /// scenario's `dial: manual` waits for its steps), and the handle comes back at once.
    #[doc = example!(".scenario(\"prompt\")?")]
    pub async fn start(self) -> Result<FakeDevice, StartError> {
        let core = self.core.vetted()?;
        let mut options = self.options;
        let family = core.scenario.as_ref().map_or(options.family, |s| s.family);
        // A scenario's `${protocol}` and `when: {protocol}` follow the link's protocol, which
        // by default is what discovery allows; lvmh has one.
        let protocol = match (options.protocol, &core.scenario, &self.cell) {
            _ if family == harness::scenario::Family::Lvmh => 1,
            (ProtocolChoice::Fixed(p), _, _) => p,
            (ProtocolChoice::Auto, _, Some(cell)) => cell.protocol(),
            (ProtocolChoice::Auto, None, None) => 2,
            (ProtocolChoice::Auto, Some(_), None) => {
                crate::dial::probe_protocol(&options.instance, harness::embed::START_WITHIN)
                    .await
                    .map_err(StartError::Discovery)?
            }
        };
        options.cell = match family {
            harness::scenario::Family::Lvmh => Cell::Lvmh,
            harness::scenario::Family::Lembas => Cell::lembas(
                protocol,
                core.spec_or(self.cell.as_ref(), options.cell.lembas_spec()),
            ),
        };
        let scratch = if self.play.is_some() || core.restarts.is_some() {
            // The run's own directory, as a run that opens makes it, and said the same.
            Some(tempfile::tempdir().map_err(harness::double::OpenError::Scratch)?)
        } else {
            None
        };
        if let (Some(play), Some(scratch)) = (&self.play, &scratch) {
            crate::peer_of::apply(play, &mut options, scratch.path()).map_err(StartError::Play)?;
        }
        if let (Some(_), Some(scratch), None) = (&core.restarts, &scratch, &options.state_dir) {
            // A restart finds the sessions of the run before it.
            options.state_dir = Some(scratch.path().join("state"));
        }
        let control_token = options.control.as_ref().map(|c| c.token.clone());
        let plan = core.plan("fake-device", options.cell);
        if let Some(connection) = self.stdio {
            return Self::start_stdio(options, plan, connection, core.restarts, scratch).await;
        }
        let (scenario, restarts) = (core.scenario, core.restarts);
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
        let control = harness::embed::control_url(live.control, control_token);
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
    up: tokio::sync::oneshot::Sender<Started>,
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
        let started = move |live: Started| {
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
                .unwrap_or_else(|| Err(StartError::NoThread))
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
    harness::double_handle_methods! { double: "device" }

    /// A builder for a device that dials the instance at `instance` (`http://host:port`).
    pub fn builder(instance: impl Into<String>) -> DeviceBuilder {
        DeviceBuilder::new(instance)
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
}

impl std::fmt::Debug for FakeDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeDevice")
            .field("cell", self.cell())
            .field("scenario", &self.running.scenario())
            .finish_non_exhaustive()
    }
}
