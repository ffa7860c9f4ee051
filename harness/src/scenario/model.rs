//! The scenario model: what a YAML scenario file says, as Rust types.
//!
//! Every struct refuses unknown keys, so a typo is an error with its line, never a silently
//! ignored step. The doc comments here become the JSON Schema's descriptions, which editors show
//! while a person types: they are written for scenario authors.

use std::collections::BTreeMap;

/// The deadline of a step that waits, when neither it nor its scenario gives one.
pub const DEFAULT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use serde_saphyr::Spanned;

use crate::duration::Dur;

/// A scenario: what one double does and checks in one run against a real peer.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// A short name, unique in its folder (`negotiate`).
    pub name: String,
    /// One line: what the scenario proves about the peer.
    pub about: String,
    /// The protocol family it speaks: `lembas` (the default) or `lvmh` (whose scenarios live in
    /// `scenarios/lvmh/`, and whose steps send and expect whole frames: `send` and `expect`
    /// with `message`, no requests).
    #[serde(default)]
    pub family: crate::family::Family,
    /// The catalogue rules (ids from `conformance/rules/`) this scenario checks.
    #[serde(default)]
    pub rules: Vec<String>,
    /// Capabilities the scenario relies on beyond those its steps' messages show (a method, a
    /// block, a `_meta.lembas` field, a result field: the spec's capability table derives
    /// those). A peer that did not list one makes the run not applicable.
    #[serde(default)]
    pub needs: Vec<String>,
    /// Capabilities whose fields the scenario sends on purpose whether or not the peer listed
    /// them (to judge that an unlisted field is ignored): sending one to a peer that did not
    /// list it keeps the run applicable.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sends_unlisted: Vec<String>,
    /// The protocol and spec cells the scenario applies to; `harness selftest` runs each.
    #[serde(default)]
    pub matrix: Matrix,
    /// The default deadline of every step that waits (default 5s).
    #[serde(default)]
    pub timeout: Option<Dur>,
    /// Variables available as `${name}` from the start, beside the built-ins: `protocol`,
    /// `spec`, `url`, `token`, `tmp`, and `link_url` (fake-instance) or `link_protocol`
    /// (fake-device, after each dial).
    #[serde(default)]
    pub vars: BTreeMap<String, Value>,
    /// What `harness selftest` changes when the other double plays the peer: `vars` giving
    /// windows that exist for a real peer (a server's restart, a redial) the length a double
    /// that answers in milliseconds needs. Runs against a real peer never read it.
    #[serde(default)]
    pub selftest: Option<SelftestSettings>,
    /// How fake-instance behaves by default in this scenario (only in scenarios it runs). Its
    /// keys are fake-instance's own (it reads them when the run starts; `harness check` too).
    #[serde(default)]
    #[schemars(with = "Option<Value>")]
    pub instance: Option<Spanned<Value>>,
    /// How fake-device behaves by default in this scenario (only in scenarios it runs). Its keys
    /// are fake-device's own (it reads them when the run starts; `harness check` too).
    #[serde(default)]
    #[schemars(with = "Option<Value>")]
    pub device: Option<Spanned<Value>>,
    /// What the peer under test must be given, and what the other double does by itself in the
    /// self-test. A real peer's test must set it up alike (`--arranged` says it did).
    #[serde(default)]
    #[schemars(with = "Option<PeerSetup>")]
    pub peer: Option<Spanned<PeerSetup>>,
    /// The system under test, started by the double for the run (`--exec` on the command line
    /// overrides it): a command, or `{exec, env, cwd, grace}`.
    #[serde(default)]
    pub sut: Option<crate::process::SutSpec>,
    /// Rules that answer the peer's matching requests instead of the default behaviour.
    #[serde(default)]
    #[schemars(with = "Vec<Handler>")]
    pub handlers: Vec<Spanned<Handler>>,
    /// What to do and expect, in order.
    #[schemars(with = "Vec<Step>")]
    pub steps: Vec<Spanned<Step>>,
    /// The file it was read from (or its embedded name), for errors found after loading.
    #[serde(skip)]
    #[schemars(skip)]
    pub source: String,
}

/// The `selftest:` section of a scenario.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SelftestSettings {
    /// Variables of `vars:` given another value in the self-test (each must be one of them).
    #[serde(default)]
    pub vars: BTreeMap<String, Value>,
}

impl Scenario {
    /// What the other double does by itself (`peer.steps`).
    pub fn peer_steps(&self) -> &[Spanned<Step>] {
        self.peer.as_ref().map_or(&[], |p| &p.value.steps)
    }

    /// Every set-up the peer under test needs, by name: `own` (what the double running the
    /// scenario reads from its `peer:` set-up), then each action of `peer.steps`, once each.
    pub fn set_up_needs(&self, own: Vec<String>) -> Vec<String> {
        let mut needs = own;
        if let Some(peer) = &self.peer {
            for action in peer.value.actions() {
                if !needs.contains(&action) {
                    needs.push(action);
                }
            }
        }
        needs
    }

    /// A scenario of nothing but these steps (a double's own steps, run by its runner).
    pub fn of_steps(name: &str, steps: Vec<Spanned<Step>>) -> Scenario {
        Scenario {
            name: name.into(),
            about: String::new(),
            family: crate::family::Family::Lembas,
            rules: Vec::new(),
            needs: Vec::new(),
            sends_unlisted: Vec::new(),
            matrix: Matrix::default(),
            timeout: Some(Dur(std::time::Duration::from_secs(30))),
            vars: BTreeMap::new(),
            selftest: None,
            instance: None,
            device: None,
            peer: None,
            sut: None,
            handlers: Vec::new(),
            steps,
            source: name.into(),
        }
    }
}

/// The cells a scenario applies to.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Matrix {
    /// Link protocols (1, 2). Default: both.
    #[serde(default = "Matrix::all_protocols")]
    pub protocol: Vec<u8>,
    /// Harness spec versions ("1.0.0", "1.1.0"). Default: both.
    #[serde(default = "Matrix::all_specs")]
    pub spec: Vec<String>,
}

impl Matrix {
    fn all_protocols() -> Vec<u8> {
        vec![1, 2]
    }

    fn all_specs() -> Vec<String> {
        vec!["1.0.0".into(), "1.1.0".into()]
    }
}

impl Default for Matrix {
    fn default() -> Self {
        Self {
            protocol: Self::all_protocols(),
            spec: Self::all_specs(),
        }
    }
}

/// The peer under test's set-up: what the other double does by itself (`steps`), and the rest
/// of the section as written, which the double running the scenario reads as a type of its own
/// (fake-instance: what a device must be given; fake-device: what an instance must be made to
/// do). The engine knows neither.
#[derive(Debug, Clone, Default)]
pub struct PeerSetup {
    /// What the other double does by itself, in order, from its first link: `act` steps (its
    /// own actions: a person at the device's terminal, or in LLeMbas's web UI) and `wait` steps.
    /// A real peer under test must be made to do the same (by its test).
    pub steps: Vec<Spanned<Step>>,
    /// Every other key of the section, as written.
    pub setup: serde_json::Map<String, Value>,
}

impl PeerSetup {
    /// The actions of `steps`, by name, once each: set-up a real peer's test must do.
    pub fn actions(&self) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        for step in &self.steps {
            if let Step::Act(act) = &step.value
                && !names.contains(&act.name)
            {
                names.push(act.name.clone());
            }
        }
        names
    }
}

impl<'de> Deserialize<'de> for PeerSetup {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Fields;
        impl<'de> serde::de::Visitor<'de> for Fields {
            type Value = PeerSetup;

            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("the peer's set-up (a mapping)")
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<PeerSetup, A::Error> {
                let mut peer = PeerSetup::default();
                while let Some(key) = map.next_key::<String>()? {
                    // Read straight from the YAML, so each step keeps its line.
                    if key == "steps" {
                        peer.steps = map.next_value()?;
                    } else {
                        let value = map.next_value()?;
                        peer.setup.insert(key, value);
                    }
                }
                Ok(peer)
            }
        }
        deserializer.deserialize_map(Fields)
    }
}

impl JsonSchema for PeerSetup {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "PeerSetup".into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        // The set-up keys are the doubles' own: `harness schema` puts them in place.
        let steps = generator.subschema_for::<Vec<Step>>();
        schemars::json_schema!({
            "type": "object",
            "properties": { "steps": steps }
        })
    }
}

/// Whether the double does a thing by itself or leaves it to the steps.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// The double does it, as the real peer would.
    #[default]
    Auto,
    /// The steps do it.
    Manual,
}

/// A handler: answers the peer's matching requests, for the whole run or `times` times.
///
/// Exactly one of `result`, `error` or `hold`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Handler {
    /// The request method it answers.
    pub method: String,
    /// A pattern the params must match (partial; see the matching reference). `${...}` in it
    /// sees the variables known when the run starts (built-ins and `vars:`), not later captures.
    #[serde(default)]
    pub params: Option<Value>,
    /// Answer with this result (`${...}` substituted; `${params.x}` is the request's params).
    #[serde(default)]
    pub result: Option<Value>,
    /// Answer with this error object (`{code, message}`).
    #[serde(default)]
    pub error: Option<Value>,
    /// Take the request and do not answer it: a `reply` step answers it, or nobody does.
    #[serde(default)]
    pub hold: bool,
    /// Wait this long before answering.
    #[serde(default)]
    pub delay: Option<Dur>,
    /// Answer only this many requests, then let later ones through.
    #[serde(default)]
    pub times: Option<u32>,
}

/// One step. Each is a map with exactly one of these keys.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Step {
    /// Send a notification.
    Notify(NotifyStep),
    /// Send a request and expect its result or error.
    Request(RequestStep),
    /// Send a request and go on without its answer; an `await` step takes the answer later.
    Start(StartStep),
    /// Wait for the answer of a request sent by `start`, and check it like `request` does.
    Await(AwaitStep),
    /// Expect a request or notification from the peer (consumed from the inbox).
    Expect(ExpectStep),
    /// Expect nothing matching from the peer for a while.
    ExpectNone(ExpectNoneStep),
    /// Check a value taken earlier (a capture) against a pattern, at once.
    Check(CheckStep),
    /// Expect all of these, in any order (only `expect` steps inside).
    #[schemars(with = "Vec<Step>")]
    AnyOrder(Vec<Spanned<Step>>),
    /// Answer a request captured earlier (held by a handler with `hold: true`).
    Reply(ReplyStep),
    /// Send any JSON (or raw text) as one message, as is.
    Send(SendStep),
    /// Do nothing for a while; the traffic keeps flowing to handlers and the default behaviour.
    Wait(Dur),
    /// Close the link with a code, drop it without one (`drop: true`), or end only our
    /// sending direction (`half: true`).
    Close(CloseStep),
    /// Send the peer nothing on the link for a while (what is sent meanwhile waits, then goes
    /// in order), still reading it: a stalled peer, as a busy or suspended process is.
    Stall(Dur),
    /// Expect the peer to close the link (with a code, if given).
    ExpectClose(ExpectCloseStep),
    /// Expect a link from the peer (an open one, or one within a time).
    ExpectLink(ExpectLinkStep),
    /// Expect the peer to link again within a time.
    ExpectReconnect(ExpectReconnectStep),
    /// Expect the peer not to link again for a time.
    ExpectNoReconnect(ExpectNoReconnectStep),
    /// Dial the instance (fake-device only): a fresh link, or an expected refusal.
    Dial(DialStep),
    /// Act as the double's own side would, off the link: a person in LLeMbas's web UI
    /// (fake-instance), a person at the device or an edit of its settings (fake-device).
    Act(Box<ActStep>),
    /// Run these steps only in the cells that match.
    When(WhenStep),
    /// Expect the system under test's process to exit (with a code, if given): it needs a
    /// process the double started (`--exec`, `sut:`).
    ExpectExit(ExpectExitStep),
    /// Expect a line matching a pattern on the system under test's stdout or stderr.
    ExpectOutput(ExpectOutputStep),
    /// Stop the system under test (SIGTERM, then SIGKILL after its grace period) and start it
    /// again on the same state: a restart of the real CLI or web server.
    RestartPeer(RestartPeerStep),
    /// Wait until the test program driving the double raises a named signal on its control
    /// API: a point where the program does its part (starts a second client, edits a file).
    WaitForSignal(WaitForSignalStep),
}

impl Step {
    /// What the step judges of the peer: `Some(rule)` for a step that can fail it (with the
    /// rule it names, or `None` where it names none), `None` for one that acts, sends, waits or
    /// groups (a group's steps judge for themselves).
    pub fn judges(&self) -> Option<Option<&str>> {
        let rule = match self {
            Step::Request(s) => &s.rule,
            Step::Await(s) => &s.rule,
            Step::Expect(s) => &s.rule,
            Step::ExpectNone(s) => &s.rule,
            Step::Check(s) => &s.rule,
            Step::ExpectClose(s) => &s.rule,
            Step::ExpectLink(s) => &s.rule,
            Step::ExpectReconnect(s) => &s.rule,
            Step::ExpectNoReconnect(s) => &s.rule,
            Step::Dial(s) => &s.rule,
            Step::ExpectExit(s) => &s.rule,
            Step::ExpectOutput(s) => &s.rule,
            Step::AnyOrder(_)
            | Step::When(_)
            | Step::Notify(_)
            | Step::Start(_)
            | Step::Reply(_)
            | Step::Send(_)
            | Step::Wait(_)
            | Step::Stall(_)
            | Step::Close(_)
            | Step::Act(_)
            | Step::RestartPeer(_)
            | Step::WaitForSignal(_) => return None,
        };
        Some(rule.as_deref())
    }

    /// The steps inside a group (`any_order`, `when`); none for any other step.
    pub fn inner(&self) -> &[Spanned<Step>] {
        match self {
            Step::AnyOrder(inner) => inner,
            Step::When(when) => &when.steps,
            _ => &[],
        }
    }
}

/// Wait for a named signal from the control API.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WaitForSignalStep {
    /// The signal's name (`POST /v1/signals/{name}`).
    pub name: String,
    /// How long to wait (default: the step timeout). A signal raised earlier counts.
    #[serde(default)]
    pub within: Option<Dur>,
}

/// Expect the system under test to exit.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExpectExitStep {
    /// The exit code it must end with; without one, any end passes.
    #[serde(default)]
    pub code: Option<i32>,
    /// How long it may take (default: the step timeout).
    #[serde(default)]
    pub within: Option<Dur>,
    /// The catalogue rule the peer breaks otherwise.
    #[serde(default)]
    pub rule: Option<String>,
}

/// Expect a line of the system under test's output.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExpectOutputStep {
    /// A regular expression a line must match (searched, not anchored; `(?i)` for any case).
    pub pattern: String,
    /// Which stream: `stdout`, `stderr`, or either (the default).
    #[serde(default)]
    pub stream: Option<crate::process::Stream>,
    /// How long it may take to come (default: the step timeout). Lines printed before the step
    /// count, after the last one an earlier `expect_output` matched.
    #[serde(default)]
    pub within: Option<Dur>,
    /// The catalogue rule the peer breaks otherwise.
    #[serde(default)]
    pub rule: Option<String>,
}

/// Restart the system under test.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RestartPeerStep {}

/// What to capture: variable name → path in the matched message (`result.sessionId`,
/// `params.questions[0]`; `$` for the whole message).
pub type Captures = BTreeMap<String, String>;

/// Send a notification.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NotifyStep {
    /// The method.
    pub method: String,
    /// The params (`${...}` substituted).
    #[serde(default)]
    pub params: Option<Value>,
    /// Send it even to a peer that did not list the capability it needs: a negative test (the
    /// peer must refuse it). Without it, such a step makes the run not applicable.
    #[serde(default)]
    pub unlisted: bool,
}

/// Send a request, then expect its answer.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RequestStep {
    /// The method.
    pub method: String,
    /// The params (`${...}` substituted).
    #[serde(default)]
    pub params: Option<Value>,
    /// A pattern the result must match. Without `result` or `error`, any result passes.
    #[serde(default)]
    pub result: Option<Value>,
    /// A pattern the error must match (the request is expected to fail).
    #[serde(default)]
    pub error: Option<Value>,
    /// A pattern the whole answer must match, `{result: ...}` or `{error: ...}`: for a request
    /// the spec lets the peer either answer or refuse, with `$one_of` (instead of `result` and
    /// `error`).
    #[serde(default)]
    pub answer: Option<Value>,
    /// Variables to take from the response (paths like `result.sessionId`).
    #[serde(default)]
    pub capture: Captures,
    /// The catalogue rule a wrong answer breaks.
    #[serde(default)]
    pub rule: Option<String>,
    /// This step's deadline.
    #[serde(default)]
    pub timeout: Option<Dur>,
    /// Send it even to a peer that did not list the capability it needs: a negative test (the
    /// peer must refuse it). Without it, such a step makes the run not applicable.
    #[serde(default)]
    pub unlisted: bool,
}

/// Send a request without waiting for its answer.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StartStep {
    /// The method.
    pub method: String,
    /// The params (`${...}` substituted).
    #[serde(default)]
    pub params: Option<Value>,
    /// The name an `await` step uses for it.
    #[serde(rename = "as")]
    pub name: String,
    /// How long its answer may take in all (default: the scenario's timeout).
    #[serde(default)]
    pub timeout: Option<Dur>,
    /// Send it even to a peer that did not list the capability it needs: a negative test (the
    /// peer must refuse it). Without it, such a step makes the run not applicable.
    #[serde(default)]
    pub unlisted: bool,
}

/// Wait for a started request's answer.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AwaitStep {
    /// The `as` name of the `start` step.
    pub request: String,
    /// A pattern the result must match. Without `result` or `error`, any result passes.
    #[serde(default)]
    pub result: Option<Value>,
    /// A pattern the error must match.
    #[serde(default)]
    pub error: Option<Value>,
    /// A pattern the whole answer must match, `{result: ...}` or `{error: ...}`: for a request
    /// the spec lets the peer either answer or refuse, with `$one_of` (instead of `result` and
    /// `error`).
    #[serde(default)]
    pub answer: Option<Value>,
    /// Variables to take from the response.
    #[serde(default)]
    pub capture: Captures,
    /// The catalogue rule a wrong answer breaks.
    #[serde(default)]
    pub rule: Option<String>,
    /// How long to wait here (default: what is left of the `start` step's timeout).
    #[serde(default)]
    pub timeout: Option<Dur>,
    /// Expect no answer for this long instead (a card the peer must leave open); the request
    /// stays started, so a later `await` may still take its answer.
    #[serde(default)]
    pub none_for: Option<Dur>,
}

/// Expect a message from the peer.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExpectStep {
    /// The method of the request or notification.
    #[serde(default)]
    pub method: Option<String>,
    /// A pattern its params must match.
    #[serde(default)]
    pub params: Option<Value>,
    /// A pattern the whole message must match (for anything `method`/`params` cannot say): a
    /// mapping, merged with `method` and `params`.
    #[serde(default)]
    pub message: Option<Value>,
    /// Variables to take from the message (paths like `params.sessionId`; `$` for all of it).
    #[serde(default)]
    pub capture: Captures,
    /// The catalogue rule the peer breaks when this does not come.
    #[serde(default)]
    pub rule: Option<String>,
    /// This step's deadline.
    #[serde(default)]
    pub timeout: Option<Dur>,
    /// Only a message that arrived after the `start` (or `send`) step with this `as` name sent
    /// its message: an earlier turn's message still in the inbox is not this one.
    #[serde(default)]
    pub after: Option<String>,
}

/// Expect nothing matching for a while.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExpectNoneStep {
    /// The method that must not come.
    #[serde(default)]
    pub method: Option<String>,
    /// A pattern its params would match.
    #[serde(default)]
    pub params: Option<Value>,
    /// A pattern the whole message would match.
    #[serde(default)]
    pub message: Option<Value>,
    /// How long to watch.
    #[serde(rename = "for")]
    pub duration: Dur,
    /// The catalogue rule the peer breaks when it comes.
    #[serde(default)]
    pub rule: Option<String>,
    /// Only what arrives after the `start` (or `send`) step with this `as` name sent its
    /// message.
    #[serde(default)]
    pub after: Option<String>,
}

/// Check a captured value.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckStep {
    /// The value to check, usually one variable: `${hello.protocol}`.
    pub that: Value,
    /// The pattern it must match (`${...}` substituted).
    pub matches: Value,
    /// The catalogue rule the peer breaks when it does not.
    #[serde(default)]
    pub rule: Option<String>,
}

/// Expect the peer to link.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExpectLinkStep {
    /// How long it may take.
    pub within: Dur,
    /// The catalogue rule the peer breaks otherwise.
    #[serde(default)]
    pub rule: Option<String>,
}

/// Answer a captured request.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReplyStep {
    /// The variable holding the captured request (captured with `$`).
    pub to: String,
    /// The result to answer with.
    #[serde(default)]
    pub result: Option<Value>,
    /// The error object to answer with.
    #[serde(default)]
    pub error: Option<Value>,
}

/// Send a message as is.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SendStep {
    /// JSON to send (`${...}` substituted).
    #[serde(default)]
    pub message: Option<Value>,
    /// Raw text to send, not checked at all (for malformed input).
    #[serde(default)]
    pub text: Option<String>,
    /// A name for the moment it went out: a later `expect` or `expect_none` with `after:` this
    /// name looks only at what arrives after it.
    #[serde(default, rename = "as")]
    pub name: Option<String>,
}

/// Close the link.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CloseStep {
    /// The close code (default 1000).
    #[serde(default)]
    pub code: Option<u16>,
    /// The reason text.
    #[serde(default)]
    pub reason: Option<String>,
    /// End the link without a close frame (no code, no reason), as a crashed process or a lost
    /// network does: what a reattach must survive.
    #[serde(default)]
    pub drop: bool,
    /// End only this side's sending direction (TCP's end of stream, no close frame) and go on
    /// reading what the peer still sends: a link half gone, which a peer that notices a lost
    /// link only when its own writes fail never sees.
    #[serde(default)]
    pub half: bool,
}

/// Expect the peer to close the link.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExpectCloseStep {
    /// The code it must close with; absent: any close, or vanishing.
    #[serde(default)]
    pub code: Option<u16>,
    /// The catalogue rule the peer breaks otherwise.
    #[serde(default)]
    pub rule: Option<String>,
    /// This step's deadline.
    #[serde(default)]
    pub timeout: Option<Dur>,
}

/// Expect the peer to link again.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExpectReconnectStep {
    /// How long it may take.
    pub within: Dur,
    /// The catalogue rule the peer breaks otherwise.
    #[serde(default)]
    pub rule: Option<String>,
}

/// Expect the peer not to link again.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExpectNoReconnectStep {
    /// How long to watch.
    #[serde(rename = "for")]
    pub duration: Dur,
    /// The catalogue rule the peer breaks when it does.
    #[serde(default)]
    pub rule: Option<String>,
}

/// Dial the instance (fake-device only).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DialStep {
    /// The bearer token to dial with (default: the device's own).
    #[serde(default)]
    pub token: Option<String>,
    /// The protocol to say in hello (default: what discovery allows).
    #[serde(default)]
    pub protocol: Option<u8>,
    /// The dial must be refused with this HTTP status (401 for a wrong token).
    #[serde(default)]
    pub refused: Option<u16>,
    /// The catalogue rule the peer breaks otherwise.
    #[serde(default)]
    pub rule: Option<String>,
    /// This step's deadline.
    #[serde(default)]
    pub timeout: Option<Dur>,
}

/// An action of the double's own side: exactly one action key, whose vocabulary is the double's
/// (fake-instance plays a person in LLeMbas's web UI, fake-device a person at the device; each
/// reads its actions into a type of its own), beside `capture` and `timeout`.
#[derive(Debug, Clone, PartialEq)]
pub struct ActStep {
    /// The action's name (`open_chat`, `share_session`).
    pub name: String,
    /// What the action says, as written (`${...}` is substituted across all of it when it runs).
    pub value: Value,
    /// Variables from the action's result: `name: path` (`sessionId`, `turnId`, …).
    pub capture: Captures,
    /// This step's deadline (for actions that wait, like `answer_card` for a card to show).
    pub timeout: Option<Dur>,
}

impl ActStep {
    /// The action as a one-key mapping, `{name: value}`: what a double's action type reads.
    pub fn action(&self) -> Value {
        let mut action = serde_json::Map::new();
        action.insert(self.name.clone(), self.value.clone());
        Value::Object(action)
    }
}

impl<'de> Deserialize<'de> for ActStep {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let mut fields = serde_json::Map::<String, Value>::deserialize(deserializer)?;
        let capture = match fields.remove("capture") {
            Some(value) => serde_json::from_value(value)
                .map_err(|e| D::Error::custom(format!("`capture`: {e}")))?,
            None => Captures::new(),
        };
        let timeout = match fields.remove("timeout") {
            Some(value) => Some(
                serde_json::from_value(value)
                    .map_err(|e| D::Error::custom(format!("`timeout`: {e}")))?,
            ),
            None => None,
        };
        let mut actions = fields.into_iter();
        match (actions.next(), actions.next()) {
            (Some((name, value)), None) => Ok(ActStep {
                name,
                value,
                capture,
                timeout,
            }),
            (None, _) => Err(D::Error::custom(
                "needs exactly one action (see the format reference's `act`), not none",
            )),
            (Some((first, _)), Some((second, _))) => Err(D::Error::custom(format!(
                "needs exactly one action, not `{first}` and `{second}`"
            ))),
        }
    }
}

impl JsonSchema for ActStep {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ActStep".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        // The actions are the doubles' own: `harness schema` puts their schemas in place.
        schemars::json_schema!({
            "type": "object",
            "description": "One action of the double's own side, with `capture` (variables from its result) and `timeout`.",
            "properties": {
                "capture": { "type": "object", "additionalProperties": { "type": "string" } },
                "timeout": { "type": "string" }
            },
            "minProperties": 1
        })
    }
}

/// Steps that run only in some cells, or only when a value (a capture) matches a pattern: for
/// a peer the spec lets do one of several things, each reading's own checks.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WhenStep {
    /// Only at this link protocol.
    #[serde(default)]
    pub protocol: Option<u8>,
    /// Only at this harness spec.
    #[serde(default)]
    pub spec: Option<String>,
    /// Only when the peer claimed these (fake-instance: capabilities the device listed): a
    /// part of a scenario that judges what not every peer implements. Where it did not, the
    /// steps are skipped and the rest of the scenario goes on.
    #[serde(default)]
    pub needs: Vec<String>,
    /// Only when this value (usually a capture: `${status.turnId}`) matches `matches`.
    #[serde(default)]
    pub that: Option<Value>,
    /// The pattern `that` must match for the steps to run.
    #[serde(default)]
    pub matches: Option<Value>,
    /// The steps.
    #[schemars(with = "Vec<Step>")]
    pub steps: Vec<Spanned<Step>>,
}
