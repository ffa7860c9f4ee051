//! fake-instance inside a Rust test: a builder that starts it on the test's runtime, and a
//! handle that acts as the web UI, gives the verdict, and shuts the instance down when dropped.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use harness::embed::{BuilderCore, Ended, Hands, InProcessPeer, Running, Shutdown};
use harness::engine::{ActError, Cell};
use harness::lembas::LINK_PATH;
use harness::process::SutSpec;
use harness::rules::Binds;
use harness::scenario::{LoadError, Scenario, Side};
use serde_json::Value;
use tokio::sync::oneshot;

use crate::actions::{InstanceActor, OpenChat, SendMessage, WebAction};
use crate::run::{Options, StartError, Started};

/// How long an action waits for a linked device, unless the call says.
const ACT_WITHIN: Duration = Duration::from_secs(10);

/// A builder method's example (see [`harness::builder_example`]).
macro_rules! example {
    ($call:expr) => {
        harness::builder_example!("fake_instance", "FakeInstance::builder()", $call)
    };
}

/// Sets up a [`FakeInstance`]: the protocol and spec, a scenario, a token, rules to break.
#[derive(Debug, Default)]
#[must_use = "a builder does nothing until `start().await`"]
pub struct InstanceBuilder {
    options: Options,
    core: BuilderCore,
    protocol: Option<u8>,
}

impl InstanceBuilder {
    harness::double_builder_setters! {
        krate: "fake_instance",
        new: "FakeInstance::builder()",
        handle: "FakeInstance",
        builder: "InstanceBuilder",
        side: Side::Instance,
        binds: Binds::Instance,
        rule: "instance.prompt.blocks",
        error: StartError,
        peer: "device",
        example: "reattach",
        patience: "to say hello or to answer",
        lvmh: "daemon",
    }

    /// The link protocol of the run (default: the scenario's newest, else 2).
    #[doc = example!(".protocol(1)")]
    pub fn protocol(mut self, protocol: u8) -> Self {
        self.protocol = Some(protocol);
        self
    }

    /// The device token that may link (default [`crate::DEFAULT_TOKEN`]).
    #[doc = example!(".token(\"device-token\")")]
    pub fn token(mut self, token: impl Into<String>) -> Self {
        self.options.tokens = vec![token.into()];
        self
    }

    /// The device tokens that may link, one a device (a fleet's).
    #[doc = example!(".tokens([\"device-1\", \"device-2\"])")]
    pub fn tokens<S: Into<String>>(mut self, tokens: impl IntoIterator<Item = S>) -> Self {
        self.options.tokens = tokens.into_iter().map(Into::into).collect();
        self
    }

    /// Starts the device under test once the instance listens (as `--exec`), with `{url}`,
    /// `{token}`, `{root}` and the rest in its command and environment; it is ended with every
    /// process it started when the run ends.
    #[doc = example!(".exec(\"lembas remote --instance {url} --token {token}\")")]
    pub fn exec(mut self, command: impl Into<String>) -> Self {
        self.options.sut = Some(SutSpec::command(command));
        self
    }

    /// Listens on this address (default: a free loopback port).
    #[doc = example!(".listen(\"127.0.0.1:8000\".parse()?)")]
    pub fn listen(mut self, addr: SocketAddr) -> Self {
        self.options.listen = addr;
        self
    }

    /// Links to the device over this pipe (`serve --stdio`) instead of a WebSocket.
    #[doc = example!(".stdio_link(None)")]
    pub fn stdio_link(mut self, link: Option<crate::run::StdioLink>) -> Self {
        self.options.stdio_link = link;
        self
    }

    /// How the web UI answers cards (approvals, questions, plans).
    #[doc = example!(".cards(CardPolicy::default())")]
    pub fn cards(mut self, cards: crate::settings::CardPolicy) -> Self {
        self.options.cards = cards;
        self
    }

    /// Plays the instance a device-side scenario's `peer:` section describes, as the
    /// self-test does: its web UI answers cards as `peer.cards` says and does `peer.steps` by
    /// itself.
    #[doc = example!(".as_peer_of(&scenario)?")]
    pub fn as_peer_of(mut self, scenario: &Scenario) -> Result<Self, LoadError> {
        crate::check::check_as_peer_of(scenario)?;
        self.options.cards = crate::check::peer_cards(scenario)?;
        if let Some(library) = crate::check::peer_library(scenario)? {
            self.options.http.library = library;
        }
        self.options.steps = scenario.peer_steps().to_vec();
        let setup = harness::lembas::setup::InstanceSetup::of(scenario)?;
        if let Some(personalization) = setup.personalization {
            self.options.http.personalization.available = personalization.available;
        }
        Ok(self)
    }

    /// The protocol and spec of the run, as a matrix cell names them.
    #[doc = example!(".cell(Cell::lembas(1, Spec::V1_0_0))")]
    pub fn cell(mut self, cell: Cell) -> Self {
        self.protocol = Some(cell.protocol());
        self.core.spec = cell.spec().or(self.core.spec);
        self
    }

    /// Lets `peer` restart it, as `restart_peer` restarts a real server: it stops and serves
    /// again on the same address and state (its chats, their undelivered deletes), its own
    /// steps done already.
    #[doc = example!(".restarted_by(InProcessPeer::new())")]
    pub fn restarted_by(mut self, peer: Arc<InProcessPeer>) -> Self {
        self.core.restarts = Some(peer);
        self
    }

    /// Starts the instance on the current tokio runtime and gives its handle once it listens.
    #[doc = example!(".scenario(\"reattach\")?")]
    pub async fn start(self) -> Result<FakeInstance, StartError> {
        let core = self.core.vetted()?;
        let mut options = self.options;
        let matrix = core.scenario.as_ref().map(|s| &s.matrix);
        let family = core.scenario.as_ref().map_or(options.family, |s| s.family);
        options.cell = match family {
            harness::scenario::Family::Lvmh => Cell::Lvmh,
            harness::scenario::Family::Lembas => Cell::lembas(
                self.protocol
                    .or_else(|| matrix.and_then(|m| m.protocol.iter().max().copied()))
                    .unwrap_or(options.cell.protocol()),
                core.spec_or(None, options.cell.lembas_spec()),
            ),
        };
        let scratch = match (&core.restarts, &options.state_dir) {
            (Some(_), None) => {
                let scratch = tempfile::tempdir().map_err(StartError::StateDir)?;
                // A restart finds the chats of the run before it.
                options.state_dir = Some(scratch.path().to_path_buf());
                Some(scratch)
            }
            _ => None,
        };
        let token = options.tokens.first().cloned().unwrap_or_default();
        let control_token = options.control.as_ref().map(|c| c.token.clone());
        let plan = core.plan("fake-instance", options.cell);
        let (scenario, restarts) = (core.scenario, core.restarts);
        let actor = Arc::new(Hands::<InstanceActor>::default());
        let slot = actor.clone();
        let (live, running) = Running::start(plan, |up, shutdown| async move {
            match restarts {
                None => {
                    crate::run::run_started(
                        options,
                        scenario,
                        move |live| {
                            let _ = up.send(live);
                        },
                        shutdown,
                    )
                    .await
                }
                Some(peer) => runs(options, peer, up, slot, shutdown).await,
            }
        })
        .await?;
        let control = harness::embed::control_url(live.control, control_token);
        if let Some(hands) = live.actor {
            actor.set(hands);
        }
        Ok(FakeInstance {
            addr: live.addr,
            token,
            actor,
            running,
            _scratch: scratch,
            control,
        })
    }
}

/// The instance's runs while `peer` restarts it: each serves on the address of the first and
/// the same state directory, until `shutdown` or a run that ends by itself. The web UI's own
/// steps run once, in the first. The first run's hands go to `up`; a later run's replace them
/// in `actor`.
async fn runs(
    mut options: Options,
    peer: Arc<InProcessPeer>,
    up: oneshot::Sender<Started>,
    actor: Arc<Hands<InstanceActor>>,
    shutdown: Shutdown,
) -> Result<Ended, StartError> {
    let stop = shutdown.shared();
    let mut up = Some(up);
    let mut ack: Option<oneshot::Sender<()>> = None;
    // One socket for every run: were each to bind the port again, another double starting in
    // the gap could take it (the self-test starts a hundred at once). A device dialing during
    // the restart waits in the socket's backlog until the next run accepts it.
    if options.bound.is_none() {
        let bound = std::net::TcpListener::bind(options.listen)
            .and_then(|l| l.set_nonblocking(true).map(|()| l))
            .map_err(|source| StartError::Listen {
                addr: options.listen,
                source,
            })?;
        options.bound = Some(Arc::new(bound));
    }
    loop {
        let (asked, stop_now) = (peer.clone(), stop.clone());
        let run_shutdown = async move {
            tokio::select! {
                () = stop_now => {}
                () = asked.restart_asked() => {}
            }
        };
        let (first, restarted) = (up.take(), ack.take());
        let mut listened = None;
        let mut controlled = None;
        let finished = crate::run::run_started(
            options.clone(),
            None,
            |live| {
                listened = Some(live.addr);
                controlled = live.control;
                match first {
                    Some(up) => {
                        let _ = up.send(live);
                    }
                    None => {
                        if let Some(hands) = live.actor {
                            actor.set(hands);
                        }
                    }
                }
                if let Some(ack) = restarted {
                    let _ = ack.send(());
                }
            },
            run_shutdown,
        )
        .await;
        let stopped = stop.clone().now_or_never().is_some();
        match peer.take_restart() {
            Some(next) if !stopped => ack = Some(next),
            _ => {
                peer.ended(harness::Exit::Passed as i32);
                return finished;
            }
        }
        if let Some(addr) = listened {
            options.listen = addr;
        }
        // The control API comes back where it was, so the URL given out stays true.
        if let (Some(addr), Some(control)) = (controlled, options.control.as_mut()) {
            control.listen = addr;
        }
        options.steps = Vec::new();
    }
}

/// A fake LLeMbas instance running inside the test: give its [`url`](Self::url) and
/// [`token`](Self::token) to the CLI under test, act as its web UI, and take its
/// [`verdict`](Self::verdict).
///
/// Dropping it shuts the instance down. A handle that ran a scenario must have its verdict
/// taken: dropped without, it fails the test, as a mock server that verifies on drop does.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use fake_instance::FakeInstance;
///
/// let instance = FakeInstance::builder().protocol(2).start().await?;
/// assert!(instance.url().starts_with("http://127.0.0.1:"));
/// // Nothing linked, so its monitors found nothing.
/// instance.verdict().await.assert_passed();
/// # Ok(())
/// # }
/// ```
pub struct FakeInstance {
    addr: SocketAddr,
    token: String,
    /// The web UI's hands in the current run (a restart replaces them).
    actor: Arc<Hands<InstanceActor>>,
    running: Running<StartError>,
    /// The control API's URL and token, when the builder asked for it.
    control: Option<(String, String)>,
    /// The state directory a restartable instance keeps its chats in.
    _scratch: Option<tempfile::TempDir>,
}

impl FakeInstance {
    harness::double_handle_methods! { double: "instance" }

    /// A builder, for a scenario, a protocol, a token.
    pub fn builder() -> InstanceBuilder {
        InstanceBuilder::default()
    }

    /// Starts a simulated instance with every default (protocol 2, spec 1.1.0, no scenario).
    pub async fn start() -> Result<FakeInstance, StartError> {
        Self::builder().start().await
    }

    /// Its base URL, `http://127.0.0.1:PORT`: where a device reads discovery.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The link's URL, `ws://127.0.0.1:PORT/…`.
    pub fn ws_url(&self) -> String {
        format!("ws://{}{LINK_PATH}", self.addr)
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The device token it accepts.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// Does what a person does in the web UI, waiting up to 10 s for a linked device; gives the
    /// action's result (what a scenario's `capture` reads).
    pub async fn act(&self, action: WebAction) -> Result<Value, ActError> {
        self.act_within(action, ACT_WITHIN).await
    }

    /// As [`act`](Self::act), waiting up to `within`.
    pub async fn act_within(&self, action: WebAction, within: Duration) -> Result<Value, ActError> {
        self.actor()?.act_now(action, within).await
    }

    /// The web UI's hands in the current run.
    fn actor(&self) -> Result<Arc<InstanceActor>, ActError> {
        self.actor.current()
    }

    /// Waits until a device has linked and finished `initialize`.
    pub async fn wait_for_device(&self, within: Duration) -> Result<(), ActError> {
        let actor = self.actor()?;
        actor
            .chats
            .ready_link(&actor.hub, within)
            .await
            .map(|_| ())
            .map_err(ActError::Failed)
    }

    /// Opens a chat on the device named `device` (`device-3`: the one that linked with the third
    /// token, a fleet's third device), in its first root; gives its session id.
    pub async fn open_chat_on(&self, device: &str) -> Result<String, ActError> {
        let opened = self
            .act(WebAction::OpenChat(OpenChat {
                device: Some(device.to_string()),
                ..OpenChat::default()
            }))
            .await?;
        string_field(&opened, "sessionId")
    }

    /// Waits until every turn sent in `chat` has its answer from the device.
    pub async fn wait_answered(&self, chat: &str, within: Duration) -> Result<(), ActError> {
        let actor = self.actor()?;
        let deadline = tokio::time::Instant::now() + within;
        loop {
            match actor.chats.answered(chat) {
                Some(true) => return Ok(()),
                None => return Err(ActError::Failed(format!("no chat `{chat}`"))),
                Some(false) if tokio::time::Instant::now() >= deadline => {
                    return Err(ActError::Failed(format!(
                        "chat `{chat}`: a turn was not answered within {within:?}"
                    )));
                }
                Some(false) => tokio::time::sleep(Duration::from_millis(10)).await,
            }
        }
    }

    /// Opens a chat in the device's first root; gives its session id.
    pub async fn open_chat(&self) -> Result<String, ActError> {
        let opened = self.act(WebAction::OpenChat(OpenChat::default())).await?;
        string_field(&opened, "sessionId")
    }

    /// Writes `text` in a chat: a prompt with a new turn id, or a steer while a turn runs.
    pub async fn send(&self, chat: &str, text: &str) -> Result<Value, ActError> {
        self.act(WebAction::Send(SendMessage {
            chat: chat.into(),
            text: text.into(),
            attach: Vec::new(),
        }))
        .await
    }

    /// Deletes a chat; the delete is kept and sent again until the device answers it.
    pub async fn delete_chat(&self, chat: &str) -> Result<Value, ActError> {
        self.act(WebAction::DeleteChat(chat.into())).await
    }
}

/// A string field of an action's result.
fn string_field(result: &Value, field: &str) -> Result<String, ActError> {
    result[field]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| ActError::Failed(format!("the result has no `{field}`: {result}")))
}

impl std::fmt::Debug for FakeInstance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeInstance")
            .field("url", &self.url())
            .field("cell", self.cell())
            .field("scenario", &self.running.scenario())
            .finish_non_exhaustive()
    }
}
