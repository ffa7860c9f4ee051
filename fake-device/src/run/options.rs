//! How fake-device is told to run: every option a command line, a test's builder or the
//! self-test sets, and the person at its terminal played on timers.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use harness::engine::{Arranged, Cell, PeerProcess};
use harness::process::Sut;
use harness::rules::Misbehaviours;

use crate::dial::ProtocolChoice;
use crate::settings::AgentKind;

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
    /// How long the echo and scripted agents pause between a turn's steps, unless a scenario
    /// says (default 50ms).
    pub step_delay: Option<Duration>,
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
    /// The instance under test, started for this run ([`crate::start_instance`]): `restart_peer` and the
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
    /// Record the link's figures here (how long answers, prompts and set-ups took; messages and
    /// events counted): a fleet's devices share one, for its summary, reports and `--metrics`.
    pub recorder: Option<Arc<harness::load::Recorder>>,
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
            cell: Cell::LATEST,
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
            step_delay: None,
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
            recorder: None,
        }
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
