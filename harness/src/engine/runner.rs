//! Walking a scenario's steps over a hub, each with a deadline.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde_json::{Map, Value, json};
use serde_saphyr::Spanned;
use tokio::time::Instant;

use super::applicability::{ActError, Applies, Intent};
use super::hub::Hub;
use super::verdict::{Failure, StepStatus, StepVerdict};
use crate::finding::Finding;
use crate::jsonrpc::{Peer, RpcError};
use crate::pattern::{MatchOutcome, Pattern, Vars, nearest, render_diff, substitute};
use crate::scenario::Dur;
use crate::scenario::model::*;
use crate::transport::CLOSE_NORMAL;

/// The default deadline of a step that waits.
pub const DEFAULT_TIMEOUT: Duration = crate::scenario::DEFAULT_TIMEOUT;

/// How often a step about to send asks again whether the peer has said its capabilities.
const ADMIT_POLL: Duration = Duration::from_millis(10);

/// One cell of the matrix: the link protocol and the harness spec of this run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Cell {
    /// The link protocol (1 or 2).
    pub protocol: u8,
    /// The harness spec.
    pub spec: crate::lembas::Spec,
}

impl Cell {
    /// The variables every scenario has: `protocol`, `spec`, `url` (the double's own URL, or the
    /// instance's for fake-device), `token` and `tmp` (a directory of the run's own).
    pub fn builtin_vars(&self, url: &str, token: &str, tmp: &std::path::Path) -> Vars {
        let mut vars = Vars::default();
        vars.set("protocol", json!(self.protocol));
        vars.set("spec", json!(self.spec));
        vars.set("url", json!(url));
        vars.set("token", json!(token));
        vars.set("tmp", json!(tmp.display().to_string()));
        vars
    }
}

impl std::fmt::Display for Cell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "protocol {} · spec {}", self.protocol, self.spec)
    }
}

/// What a `dial` step asks of a double that dials.
#[derive(Debug, Clone)]
pub struct DialRequest {
    /// The token to dial with; `None`: the double's own.
    pub token: Option<String>,
    /// The protocol to say in hello; `None`: what discovery allows.
    pub protocol: Option<u8>,
    /// How long the dial may take.
    pub timeout: Duration,
}

/// How a dial ended.
#[derive(Debug, Clone)]
pub enum DialResult {
    /// The link is up (and attached to the hub).
    Linked(Arc<Peer>),
    /// The upgrade was answered with this HTTP status.
    Refused(u16),
    /// Anything else (no route, timeout, discovery broken).
    Failed(String),
}

/// A double that can dial out (fake-device); `dial` steps use it.
pub trait Dialer: Send + Sync {
    /// Dials once, as the step asks.
    fn dial<'a>(
        &'a self,
        request: DialRequest,
    ) -> Pin<Box<dyn Future<Output = DialResult> + Send + 'a>>;
}

/// Everything a finished run has to say.
#[derive(Debug, Clone, Serialize)]
pub struct RunOutcome {
    /// The scenario's name.
    pub scenario: String,
    /// The cell it ran in.
    pub cell: Cell,
    /// Each step's verdict, in order.
    pub steps: Vec<StepVerdict>,
    /// What the monitors found, besides the steps.
    pub findings: Vec<Finding>,
    /// Why the run did not apply to the peer, when it did not: a capability it never listed, a
    /// set-up nothing arranged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_applicable: Option<String>,
    /// How long the run took.
    pub elapsed_ms: f64,
    /// The system under test's process, when the double started it: its starts, exits and
    /// output.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub process: Option<crate::process::ProcessReport>,
    /// What each hook did (`--hooks`): the set-up and the other side's actions a real peer's
    /// project did for the run. One that failed makes the run a scenario error: its set-up broke.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hooks: Vec<super::verdict::HookRun>,
    /// The rules the scenario says it checks (its `rules:`), to judge each (see
    /// [`RunOutcome::judgements`]).
    #[serde(skip)]
    pub listed_rules: Vec<String>,
}

/// What a run came to, for the exit code and the reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Every step passed (or was skipped by `when`), and the monitors found nothing.
    Passed,
    /// The peer never claimed what the scenario needs, and broke nothing before that.
    NotApplicable(String),
    /// The peer broke a check.
    Failed,
    /// The scenario itself went wrong.
    ScenarioError,
}

impl RunOutcome {
    /// The outcome of a double that ran with no scenario, as a simulated peer: no steps, only
    /// what its monitors found in `elapsed`.
    pub fn of_monitors(
        name: impl Into<String>,
        cell: Cell,
        findings: Vec<Finding>,
        elapsed: Duration,
    ) -> Self {
        Self {
            scenario: name.into(),
            cell,
            steps: Vec::new(),
            findings,
            not_applicable: None,
            elapsed_ms: elapsed.as_secs_f64() * 1000.0,
            process: None,
            hooks: Vec::new(),
            listed_rules: Vec::new(),
        }
    }

    /// The outcome of a run that ended without a verdict of its own (it could not start, or was
    /// stopped): one step in error, saying why.
    pub fn broken(name: impl Into<String>, cell: Cell, why: impl Into<String>) -> Self {
        let step = StepVerdict {
            index: "-".into(),
            line: 0,
            title: "the run".into(),
            status: StepStatus::Error,
            elapsed_ms: 0.0,
            started_ms: 0.0,
            failure: Some(Failure {
                summary: why.into(),
                ..Failure::default()
            }),
            not_applicable: None,
            rule: None,
        };
        Self {
            steps: vec![step],
            ..Self::of_monitors(name, cell, Vec::new(), Duration::ZERO)
        }
    }

    /// The verdict: a scenario error over a failure over not applicable over a pass. A monitor
    /// finding fails the run even when it did not apply further.
    /// A run a signal stopped before its verdict: the findings so far, and one step in error
    /// saying so, so the reports asked for are still written and never read as a pass.
    pub fn interrupted(scenario: &str, cell: Cell, findings: Vec<Finding>) -> RunOutcome {
        RunOutcome {
            scenario: scenario.to_string(),
            cell,
            steps: vec![StepVerdict {
                index: "1".into(),
                line: 0,
                title: "interrupted".into(),
                status: StepStatus::Error,
                elapsed_ms: 0.0,
                started_ms: 0.0,
                failure: Some(super::verdict::Failure {
                    rule: None,
                    summary: "stopped by a signal (SIGINT or SIGTERM) before the scenario reached a verdict".into(),
                    awaited: None,
                    expected: None,
                    nearest: None,
                    diff: None,
                }),
                not_applicable: None,
                rule: None,
            }],
            findings,
            not_applicable: None,
            elapsed_ms: 0.0,
            process: None,
            hooks: Vec::new(),
            listed_rules: Vec::new(),
        }
    }

    /// Passed, failed (with the rules), not applicable (with why), or a broken scenario.
    pub fn verdict(&self) -> Verdict {
        if self.scenario_error() {
            Verdict::ScenarioError
        } else if !self.findings.is_empty()
            || self.steps.iter().any(|s| s.status == StepStatus::Failed)
        {
            Verdict::Failed
        } else if let Some(why) = &self.not_applicable {
            Verdict::NotApplicable(why.clone())
        } else {
            Verdict::Passed
        }
    }

    /// Whether the peer passed: every step passed or was skipped by `when`, nothing found, and
    /// the scenario applied.
    pub fn passed(&self) -> bool {
        self.verdict() == Verdict::Passed
    }

    /// Whether the scenario itself went wrong (exit code 2 rather than 1): a step could not be
    /// run, or a hook failed.
    pub fn scenario_error(&self) -> bool {
        self.steps.iter().any(|s| s.status == StepStatus::Error)
            || self
                .hooks
                .iter()
                .any(|h| !h.ok && h.not_applicable.is_none())
    }

    /// Each rule the scenario checks (and any other a step named or a monitor reported): kept,
    /// broken, or not judged in this run and why.
    pub fn judgements(&self) -> Vec<super::judged::RuleJudgement> {
        super::judged::judge(
            &self.listed_rules,
            &self.steps,
            &self.findings,
            self.not_applicable
                .as_deref()
                .filter(|_| !self.steps.iter().any(|s| s.not_applicable.is_some())),
        )
    }

    /// Every rule the peer was caught breaking, from steps and monitors.
    pub fn broken_rules(&self) -> Vec<String> {
        let mut rules: Vec<String> = self
            .steps
            .iter()
            .filter_map(|s| s.failure.as_ref().and_then(|f| f.rule.clone()))
            .chain(self.findings.iter().map(|f| f.rule.clone()))
            .collect();
        rules.sort();
        rules.dedup();
        rules
    }
}

/// A double that acts off the link (fake-device: a person at its terminal, its settings);
/// `act` steps use it.
pub trait Actor: Send + Sync {
    /// Does the step's one action, `{name: value}` with every `${...}` in it substituted, within
    /// `timeout`: the double reads it as its own action type. Gives the action's result for
    /// `capture`, or why it could not be done (or does not apply).
    fn act<'a>(
        &'a self,
        action: Value,
        timeout: Duration,
    ) -> Pin<Box<dyn Future<Output = Result<Value, ActError>> + Send + 'a>>;
}

/// Runs one scenario in one cell.
pub struct Runner {
    hub: Arc<Hub>,
    cell: Cell,
    default_timeout: Duration,
    dialer: Option<Arc<dyn Dialer>>,
    actor: Option<Arc<dyn Actor>>,
    process: Option<Arc<dyn super::process::PeerProcess>>,
    /// The last output line an `expect_output` step matched: the next looks past it.
    output_seen: std::sync::atomic::AtomicU64,
    verdicts: Vec<StepVerdict>,
    /// A step failed, erred or did not apply: the rest are skipped.
    stopped: bool,
    /// Why the run does not apply to the peer, once a step found it does not.
    not_applicable: Option<String>,
    /// Set-up the scenario needs that nothing arranged: the run does not apply from the start.
    unarranged: Option<String>,
    /// The link the scenario last talked on (0: none yet): what the peer sent a step, or a step
    /// sent on. `expect_close` watches it, so a peer that closes one link and dials the next at
    /// once is judged on the link the scenario was using, not on the new one.
    focus: std::sync::atomic::AtomicU32,
    /// Whether this is the run's scenario, whose steps watchers follow (`--events`, the control
    /// API): the background steps of a peer's set-up are not.
    reports_progress: bool,
    /// The link each captured message came on, by variable: a `reply` answers on that link
    /// (a redialled peer starts its ids again, so an id alone does not say which request).
    origins: std::sync::Mutex<std::collections::HashMap<String, u32>>,
    /// Requests sent by `start`, by name: their method, deadline and answer to come.
    started: std::sync::Mutex<std::collections::HashMap<String, Started>>,
    /// The inbox's newest arrival when each `start` sent its request, or each named `send` its
    /// message, by name: an `expect` with `after` looks only past it.
    start_marks: std::sync::Mutex<std::collections::HashMap<String, u64>>,
    /// The rule whose first finding ends the run (see [`Runner::ending_at_finding`]).
    end_at: Option<String>,
}

/// A request sent by `start`: its method, its deadline, and the task that waits for its answer.
type Started = (
    String,
    Duration,
    tokio::task::JoinHandle<Result<Result<Value, RpcError>, crate::jsonrpc::RequestError>>,
);

/// The rule a step checks, for its verdict.
fn rule_of(step: &Step) -> Option<String> {
    step.judges().flatten().map(str::to_string)
}

/// How a step ended, before it becomes a verdict.
enum Outcome {
    Passed,
    Failed(Box<Failure>),
    Error(String),
    NotApplicable(String),
    /// The finding the run waited for came while the step ran: it and the rest are skipped.
    Ended,
}

impl Outcome {
    fn failed(failure: Failure) -> Outcome {
        Outcome::Failed(Box::new(failure))
    }
}

impl Runner {
    /// A runner over a hub whose links the double feeds.
    pub fn new(
        hub: Arc<Hub>,
        cell: Cell,
        default_timeout: Option<Duration>,
        dialer: Option<Arc<dyn Dialer>>,
    ) -> Self {
        Self {
            hub,
            cell,
            default_timeout: default_timeout.unwrap_or(DEFAULT_TIMEOUT),
            dialer,
            actor: None,
            process: None,
            output_seen: std::sync::atomic::AtomicU64::new(0),
            verdicts: Vec::new(),
            stopped: false,
            not_applicable: None,
            unarranged: None,
            focus: std::sync::atomic::AtomicU32::new(0),
            reports_progress: false,
            origins: Default::default(),
            started: Default::default(),
            start_marks: Default::default(),
            end_at: None,
        }
    }

    /// Ends the run at the first finding under `rule`, skipping the steps left: the
    /// self-test's misbehaviour cases know by then that the check caught the break, and the
    /// steps after it would only wait out deadlines the break makes them miss.
    pub fn ending_at_finding(mut self, rule: Option<String>) -> Self {
        self.end_at = rule;
        self
    }

    /// The double's actions, for `act` steps.
    pub fn with_actor(mut self, actor: Arc<dyn Actor>) -> Self {
        self.actor = Some(actor);
        self
    }

    /// The peer's process, for `expect_exit`, `expect_output` and `restart_peer` steps.
    pub fn with_process(mut self, process: Option<Arc<dyn super::process::PeerProcess>>) -> Self {
        self.process = process;
        self
    }

    /// Tells the hub's watchers of each step (`--events`, the control API's current step): for
    /// the run's scenario, not for steps run in the background.
    pub fn reporting_progress(mut self) -> Self {
        self.reports_progress = true;
        self
    }

    /// Set-up the scenario needs and nothing arranges (see
    /// [`applicability::unarranged`](super::applicability::unarranged)): the run will not apply,
    /// and runs no step.
    pub fn unarranged(mut self, why: Option<String>) -> Self {
        self.unarranged = why;
        self
    }

    /// Runs every step; the first failure, or the first step that does not apply to the peer,
    /// skips the rest.
    pub async fn run(mut self, scenario: &Scenario) -> RunOutcome {
        let started = Instant::now();
        if let Some(why) = self.unarranged.take() {
            self.stopped = true;
            self.not_applicable = Some(why);
        }
        self.steps(&scenario.steps, "").await;
        RunOutcome {
            scenario: scenario.name.clone(),
            cell: self.cell.clone(),
            steps: self.verdicts,
            findings: self.hub.findings().all(),
            not_applicable: self.not_applicable,
            elapsed_ms: started.elapsed().as_secs_f64() * 1000.0,
            process: None,
            hooks: Vec::new(),
            listed_rules: scenario.rules.clone(),
        }
    }

    fn steps<'a>(
        &'a mut self,
        steps: &'a [Spanned<Step>],
        prefix: &'a str,
    ) -> Pin<Box<dyn Future<Output = ()> + Send + 'a>> {
        Box::pin(async move {
            for (i, step) in steps.iter().enumerate() {
                let index = format!("{prefix}{}", i + 1);
                if let Step::When(when) = &step.value {
                    let in_cell = when.protocol.is_none_or(|p| p == self.cell.protocol)
                        && when
                            .spec
                            .as_ref()
                            .is_none_or(|s| s == self.cell.spec.as_str());
                    let mut holds = match (in_cell && !self.stopped, &when.that, &when.matches) {
                        (true, Some(that), Some(matches)) => self.holds(that, matches),
                        (in_cell, _, _) => Ok(in_cell),
                    };
                    if matches!(holds, Ok(true)) && !when.needs.is_empty() {
                        let intent = Intent::Claims { needs: &when.needs };
                        let deadline = Instant::now() + self.default_timeout;
                        holds = Ok(self.admit(intent, deadline).await.is_ok());
                    }
                    match holds {
                        Ok(true) if !self.stopped => {
                            self.steps(&when.steps, &format!("{index}.")).await;
                        }
                        Ok(_) => self.skip_all(&when.steps, &format!("{index}.")),
                        Err(message) => {
                            self.stopped = true;
                            self.verdicts.push(StepVerdict {
                                index,
                                line: step.referenced.line(),
                                title: title(&step.value),
                                status: StepStatus::Error,
                                elapsed_ms: 0.0,
                                started_ms: self.hub.journal().elapsed_ms(),
                                failure: Some(Failure {
                                    summary: message,
                                    ..Failure::default()
                                }),
                                not_applicable: None,
                                rule: None,
                            });
                        }
                    }
                    continue;
                }
                let line = step.referenced.line();
                let title = title(&step.value);
                if let Some(rule) = &self.end_at
                    && self.hub.findings().has(rule)
                {
                    self.stopped = true;
                }
                if self.stopped {
                    self.verdicts.push(StepVerdict {
                        index,
                        line,
                        title,
                        status: StepStatus::Skipped,
                        elapsed_ms: 0.0,
                        started_ms: self.hub.journal().elapsed_ms(),
                        failure: None,
                        not_applicable: None,
                        rule: rule_of(&step.value),
                    });
                    continue;
                }
                let started = Instant::now();
                let started_ms = self.hub.journal().elapsed_ms();
                tracing::debug!(step = %index, line, "{title}");
                if self.reports_progress {
                    self.hub.progress().step_started(&index, &title, line);
                }
                // What the whole scenario relies on, as far as the double knows by now.
                let outcome = match self.hub.applies(Intent::Step) {
                    Applies::No(why) => Outcome::NotApplicable(why),
                    Applies::Yes | Applies::NotYet => match self.end_at.clone() {
                        None => self.step(&step.value).await,
                        Some(rule) => {
                            let hub = self.hub.clone();
                            tokio::select! {
                                outcome = self.step(&step.value) => outcome,
                                () = found(&hub, &rule) => Outcome::Ended,
                            }
                        }
                    },
                };
                let elapsed_ms = started.elapsed().as_secs_f64() * 1000.0;
                let (status, failure, not_applicable) = match outcome {
                    Outcome::Passed => (StepStatus::Passed, None, None),
                    Outcome::Failed(f) => (StepStatus::Failed, Some(*f), None),
                    Outcome::Error(message) => (
                        StepStatus::Error,
                        Some(Failure {
                            summary: message,
                            ..Failure::default()
                        }),
                        None,
                    ),
                    Outcome::NotApplicable(why) => {
                        self.not_applicable = Some(why.clone());
                        (StepStatus::NotApplicable, None, Some(why))
                    }
                    Outcome::Ended => (StepStatus::Skipped, None, None),
                };
                self.stopped |= status != StepStatus::Passed;
                let verdict = StepVerdict {
                    index,
                    line,
                    title,
                    status,
                    elapsed_ms,
                    started_ms,
                    failure,
                    not_applicable,
                    rule: rule_of(&step.value),
                };
                if self.reports_progress {
                    self.hub.progress().step_ended(&verdict);
                }
                self.verdicts.push(verdict);
            }
        })
    }

    fn skip_all(&mut self, steps: &[Spanned<Step>], prefix: &str) {
        for (i, step) in steps.iter().enumerate() {
            let index = format!("{prefix}{}", i + 1);
            if let Step::When(when) = &step.value {
                self.skip_all(&when.steps, &format!("{index}."));
                continue;
            }
            let (line, title) = (step.referenced.line(), title(&step.value));
            self.verdicts.push(StepVerdict {
                index,
                line,
                title,
                status: StepStatus::Skipped,
                elapsed_ms: 0.0,
                started_ms: self.hub.journal().elapsed_ms(),
                failure: None,
                not_applicable: None,
                rule: rule_of(&step.value),
            });
        }
    }

    /// Asks the double whether the peer claimed what `intent` needs. A message about to be sent
    /// waits (up to `deadline`) for a peer that has not said its capabilities yet: a client
    /// never calls before it knows what it may call.
    async fn admit(&self, intent: Intent<'_>, deadline: Instant) -> Result<(), Unadmitted> {
        loop {
            match self.hub.applies(intent) {
                Applies::Yes => return Ok(()),
                Applies::No(why) => return Err(Unadmitted::NotClaimed(why)),
                Applies::NotYet if Instant::now() >= deadline => return Err(Unadmitted::Unsaid),
                Applies::NotYet => tokio::time::sleep(ADMIT_POLL).await,
            }
        }
    }

    /// Whether a message a `notify` or `start` step is about to send may go (always, when the
    /// step says `unlisted: true`); the step's outcome when not.
    async fn admit_send(
        &self,
        method: &str,
        params: &Value,
        unlisted: bool,
        deadline: Instant,
    ) -> Result<(), Outcome> {
        if unlisted {
            return Ok(());
        }
        self.admit(Intent::Send { method, params }, deadline)
            .await
            .map_err(|unadmitted| unadmitted.outcome(&None, method))
    }

    /// Whether a message that did not come was one the peer never claimed to send, or whether
    /// the peer never did what would make it: then the run does not apply, and says why.
    fn missed_applies(&self, pattern: &Value) -> Option<String> {
        // The other side's project does not do what its set-up was to make the peer do.
        if let Some(why) = self.hub.set_up_undone() {
            return Some(why);
        }
        for intent in [Intent::Await { pattern }, Intent::Missed { pattern }] {
            if let Applies::No(why) = self.hub.applies(intent) {
                return Some(why);
            }
        }
        None
    }

    /// The scenario talked on this link. Only forward: a message taken late from an older link
    /// does not make a link the peer closed long ago the one `expect_close` watches. (Links
    /// count from 1; a message that came on no link is on 0 and moves nothing.)
    fn focus_on(&self, link: u32) {
        self.focus
            .fetch_max(link, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether a `when`'s value matches its pattern now. A `that` naming a field the peer left
    /// out of a value it did send (`${init._meta.lembas.connection}`, `init` captured) is
    /// absent, which `$none` matches: a `when` branches on what the peer said, and leaving an
    /// optional field out is saying something. A variable never set is still the scenario's
    /// mistake.
    fn holds(&self, that: &Value, matches: &Value) -> Result<bool, String> {
        let that = match self.render(that) {
            Ok(value) => value,
            Err(_) if self.names_an_absent_field(that) => Value::Null,
            Err(e) => return Err(e),
        };
        let wanted = self.render(matches)?;
        let pattern = Pattern::compile(&wanted).map_err(|e| format!("bad pattern: {e}"))?;
        Ok(pattern.matches(&that).is_match())
    }

    /// Whether `that` is exactly `${var.path}` with `var` set and the path leading nowhere.
    fn names_an_absent_field(&self, that: &Value) -> bool {
        let Some(path) = that
            .as_str()
            .and_then(|s| s.strip_prefix("${"))
            .and_then(|s| s.strip_suffix('}'))
        else {
            return false;
        };
        let root = &path[..path.find(['.', '[']).unwrap_or(path.len())];
        root != path && {
            let vars = self.vars();
            vars.lookup(root).is_some() && vars.lookup(path).is_none()
        }
    }

    fn timeout(&self, own: Option<Dur>) -> Duration {
        own.map(|d| d.0).unwrap_or(self.default_timeout)
    }

    fn vars(&self) -> Vars {
        self.hub.vars.lock().map(|v| v.clone()).unwrap_or_default()
    }

    fn render(&self, value: &Value) -> Result<Value, String> {
        substitute(value, &self.vars()).map_err(|e| format!("cannot substitute: {e}"))
    }

    fn capture(
        &self,
        message: &Value,
        outcome: &MatchOutcome,
        paths: &Captures,
        link: Option<u32>,
    ) -> Result<(), String> {
        if let (Some(link), Ok(mut origins)) = (link, self.origins.lock()) {
            for name in outcome.captures.keys().chain(paths.keys()) {
                origins.insert(name.clone(), link);
            }
        }
        let mut scope = Vars::default();
        scope.set("$", message.clone());
        if let Value::Object(fields) = message {
            for (key, value) in fields {
                scope.set(key, value.clone());
            }
        }
        let mut vars = self
            .hub
            .vars
            .lock()
            .map_err(|_| "variables are unavailable".to_string())?;
        for (name, value) in &outcome.captures {
            vars.set(name, value.clone());
        }
        for (name, path) in paths {
            let value = scope.lookup(path).cloned().ok_or_else(|| {
                format!("cannot capture `{name}`: the message has nothing at `{path}`")
            })?;
            vars.set(name, value);
        }
        Ok(())
    }

    async fn link(&self, deadline: Instant) -> Result<Arc<Peer>, Failure> {
        self.hub
            .wait_current(deadline)
            .await
            .ok_or_else(|| Failure {
                summary: "no link from the peer".into(),
                awaited: Some("an open link".into()),
                ..Failure::default()
            })
    }

    async fn step(&mut self, step: &Step) -> Outcome {
        match step {
            Step::Notify(n) => self.notify(n).await,
            Step::Request(r) => self.request(r).await,
            Step::Start(st) => self.start(st).await,
            Step::Await(a) => self.await_answer(a).await,
            Step::Expect(e) => self.expect(e).await,
            Step::ExpectNone(e) => self.expect_none(e).await,
            Step::Check(c) => self.check(c),
            Step::ExpectLink(e) => self.expect_link(e).await,
            Step::AnyOrder(group) => self.any_order(group).await,
            Step::Reply(r) => self.reply(r).await,
            Step::Send(s) => self.send(s).await,
            Step::Wait(d) => {
                tokio::time::sleep(d.0).await;
                Outcome::Passed
            }
            Step::Close(c) => self.close(c).await,
            Step::Stall(pause) => match self.link(Instant::now() + self.default_timeout).await {
                Ok(peer) => {
                    peer.stall(pause.0);
                    Outcome::Passed
                }
                Err(f) => Outcome::failed(f),
            },
            Step::ExpectClose(e) => self.expect_close(e).await,
            Step::ExpectReconnect(e) => self.expect_reconnect(e).await,
            Step::ExpectNoReconnect(e) => self.expect_no_reconnect(e).await,
            Step::Dial(d) => self.dial(d).await,
            Step::Act(a) => self.act(a).await,
            // `when` is unfolded by `steps`.
            Step::When(_) => Outcome::Passed,
            Step::ExpectExit(e) => self.expect_exit(e).await,
            Step::ExpectOutput(e) => self.expect_output(e).await,
            Step::RestartPeer(_) => self.restart_peer().await,
            Step::WaitForSignal(w) => self.wait_for_signal(w).await,
        }
    }

    /// A signal that never came is the test program's doing, not the peer's: a scenario error
    /// that says what was awaited.
    async fn wait_for_signal(&self, step: &WaitForSignalStep) -> Outcome {
        let within = self.timeout(step.within);
        let deadline = Instant::now() + within;
        if self
            .hub
            .progress()
            .wait_signal(&step.name, deadline.into_std())
            .await
        {
            Outcome::Passed
        } else {
            Outcome::Error(format!(
                "no signal `{}` within {} (raise it with POST /v1/signals/{} on the control API)",
                step.name,
                humantime::format_duration(within),
                step.name
            ))
        }
    }

    async fn notify(&self, n: &NotifyStep) -> Outcome {
        let params = match self.render(n.params.as_ref().unwrap_or(&json!({}))) {
            Ok(p) => p,
            Err(e) => return Outcome::Error(e),
        };
        let deadline = Instant::now() + self.default_timeout;
        if let Err(outcome) = self
            .admit_send(&n.method, &params, n.unlisted, deadline)
            .await
        {
            return outcome;
        }
        match self.link(deadline).await {
            Ok(peer) => {
                peer.notify(&n.method, params);
                Outcome::Passed
            }
            Err(f) => Outcome::failed(f),
        }
    }

    async fn send(&self, s: &SendStep) -> Outcome {
        let peer = match self.link(Instant::now() + self.default_timeout).await {
            Ok(peer) => peer,
            Err(f) => return Outcome::failed(f),
        };
        if let Some(name) = &s.name
            && let Ok(mut marks) = self.start_marks.lock()
        {
            marks.insert(name.clone(), self.hub.inbox.last_seq());
        }
        match (&s.message, &s.text) {
            (Some(message), _) => match self.render(message) {
                Ok(m) => peer.send_value(m),
                Err(e) => return Outcome::Error(e),
            },
            (None, Some(text)) => peer.send_text(text.clone(), None),
            (None, None) => return Outcome::Error("`send` needs `message` or `text`".into()),
        }
        Outcome::Passed
    }

    async fn request(&self, r: &RequestStep) -> Outcome {
        let timeout = self.timeout(r.timeout);
        let deadline = Instant::now() + timeout;
        let params = match self.render(r.params.as_ref().unwrap_or(&json!({}))) {
            Ok(p) => p,
            Err(e) => return Outcome::Error(e),
        };
        if !r.unlisted
            && let Err(unadmitted) = self
                .admit_request(&r.method, &params, &r.result, &r.answer, deadline)
                .await
        {
            return unadmitted.outcome(&r.rule, &r.method);
        }
        let peer = match self.link(deadline).await {
            Ok(peer) => peer,
            Err(f) => {
                return Outcome::failed(Failure {
                    rule: r.rule.clone(),
                    ..f
                });
            }
        };
        let remaining = deadline.saturating_duration_since(Instant::now());
        self.focus_on(peer.link());
        let answer = match peer.request(&r.method, params, remaining).await {
            Ok(answer) => answer,
            Err(e) => {
                return Outcome::failed(Failure {
                    rule: r.rule.clone(),
                    summary: e.to_string(),
                    awaited: Some(format!(
                        "the answer to `{}`, for {}",
                        r.method,
                        Dur(timeout)
                    )),
                    ..Failure::default()
                });
            }
        };
        let expected = Expected::of(&r.result, &r.error, &r.answer);
        self.judge_answer(&r.method, answer, expected, &r.capture, &r.rule)
    }

    /// Whether the peer claimed what a request needs: its method and params, and the fields
    /// its result pattern names.
    async fn admit_request(
        &self,
        method: &str,
        params: &Value,
        result: &Option<Value>,
        answer: &Option<Value>,
        deadline: Instant,
    ) -> Result<(), Unadmitted> {
        self.admit(Intent::Send { method, params }, deadline)
            .await?;
        self.admit_answer(method, result, answer, deadline).await
    }

    /// Whether the peer claimed what the fields an answer's pattern names need: the `result`
    /// pattern, or the `result` of an `answer` pattern (each alternative of a `$one_of`).
    async fn admit_answer(
        &self,
        method: &str,
        result: &Option<Value>,
        answer: &Option<Value>,
        deadline: Instant,
    ) -> Result<(), Unadmitted> {
        let mut results = Vec::new();
        if let Some(result) = result {
            results.push(result.clone());
        }
        if let Some(answer) = answer {
            let alternatives = match answer.get("$one_of").and_then(Value::as_array) {
                Some(alternatives) => alternatives.clone(),
                None => vec![answer.clone()],
            };
            results.extend(alternatives.iter().filter_map(|a| a.get("result").cloned()));
        }
        for result in results {
            // A pattern that does not render is the judge's to report.
            if let Ok(result) = self.render(&result) {
                let intent = Intent::Answer {
                    method,
                    result: &result,
                };
                self.admit(intent, deadline).await?;
            }
        }
        Ok(())
    }

    /// Judges a request's answer against the step's `result`, `error` or `answer` pattern, and
    /// captures.
    fn judge_answer(
        &self,
        method: &str,
        answer: Result<Value, RpcError>,
        expected: Expected<'_>,
        capture: &Captures,
        rule: &Option<String>,
    ) -> Outcome {
        let response = match &answer {
            Ok(result) => json!({ "result": result }),
            Err(error) => json!({ "error": error.to_value() }),
        };
        let wanted = match expected {
            Expected::Answer(whole) => whole.clone(),
            Expected::Error(error) => json!({ "error": error }),
            Expected::Result(result) => json!({ "result": result }),
            Expected::AnyResult => json!({ "result": "$any" }),
        };
        let wanted = match self.render(&wanted) {
            Ok(w) => w,
            Err(e) => return Outcome::Error(e),
        };
        let pattern = match Pattern::compile(&wanted) {
            Ok(p) => p,
            Err(e) => return Outcome::Error(format!("bad pattern: {e}")),
        };
        let outcome = pattern.matches(&response);
        if !outcome.is_match() {
            return Outcome::failed(Failure {
                rule: rule.clone(),
                summary: answer_summary(method, &answer, expected),
                awaited: Some(format!("the answer to `{method}`")),
                diff: Some(render_diff(&wanted, &response, &outcome)),
                expected: Some(wanted),
                nearest: Some(response),
            });
        }
        match self.capture(&response, &outcome, capture, None) {
            Ok(()) => Outcome::Passed,
            Err(e) => Outcome::failed(Failure {
                rule: rule.clone(),
                summary: e,
                ..Failure::default()
            }),
        }
    }

    async fn start(&self, st: &StartStep) -> Outcome {
        let params = match self.render(st.params.as_ref().unwrap_or(&json!({}))) {
            Ok(p) => p,
            Err(e) => return Outcome::Error(e),
        };
        let deadline = Instant::now() + self.default_timeout;
        if let Err(outcome) = self
            .admit_send(&st.method, &params, st.unlisted, deadline)
            .await
        {
            return outcome;
        }
        let peer = match self.link(deadline).await {
            Ok(peer) => peer,
            Err(f) => return Outcome::failed(f),
        };
        let (method, timeout) = (st.method.clone(), self.timeout(st.timeout));
        self.focus_on(peer.link());
        if let Ok(mut marks) = self.start_marks.lock() {
            marks.insert(st.name.clone(), self.hub.inbox.last_seq());
        }
        // Sent now, in step order; only the wait for the answer runs on its own.
        let answer = tokio::spawn(peer.begin_request(&method, params, timeout));
        match self.started.lock() {
            Ok(mut started) => {
                started.insert(st.name.clone(), (st.method.clone(), timeout, answer));
                Outcome::Passed
            }
            Err(_) => Outcome::Error("started requests are unavailable".into()),
        }
    }

    async fn await_answer(&self, a: &AwaitStep) -> Outcome {
        let Some((method, timeout, answer)) = self
            .started
            .lock()
            .ok()
            .and_then(|mut s| s.remove(&a.request))
        else {
            return Outcome::Error(format!(
                "`await.request`: no request started `as: {}` before this step",
                a.request
            ));
        };
        if let Some(quiet) = a.none_for {
            return self
                .await_silence(a, method, timeout, answer, quiet.0)
                .await;
        }
        // The request carries its own deadline from `start`; this step may shorten it.
        let wait = a.timeout.map(|d| d.0).unwrap_or(timeout);
        let deadline = Instant::now() + wait;
        if let Err(unadmitted) = self
            .admit_answer(&method, &a.result, &a.answer, deadline)
            .await
        {
            answer.abort();
            return unadmitted.outcome(&a.rule, &method);
        }
        let wait = deadline.saturating_duration_since(Instant::now());
        let awaited = Some(format!(
            "the answer to `{method}` (started as `{}`), for {}",
            a.request,
            Dur(wait)
        ));
        match tokio::time::timeout(wait, answer).await {
            Err(_) => Outcome::failed(Failure {
                rule: a.rule.clone(),
                summary: format!("no answer to `{method}` within {}", Dur(wait)),
                awaited,
                ..Failure::default()
            }),
            Ok(Err(e)) => Outcome::Error(format!("the request task failed: {e}")),
            Ok(Ok(Err(e))) => Outcome::failed(Failure {
                rule: a.rule.clone(),
                summary: e.to_string(),
                awaited,
                ..Failure::default()
            }),
            Ok(Ok(Ok(answer))) => {
                let expected = Expected::of(&a.result, &a.error, &a.answer);
                self.judge_answer(&method, answer, expected, &a.capture, &a.rule)
            }
        }
    }

    /// `await` with `none_for`: the peer must not answer for that long.
    async fn await_silence(
        &self,
        a: &AwaitStep,
        method: String,
        timeout: Duration,
        mut answer: tokio::task::JoinHandle<
            Result<Result<Value, RpcError>, crate::jsonrpc::RequestError>,
        >,
        quiet: Duration,
    ) -> Outcome {
        match tokio::time::timeout(quiet, &mut answer).await {
            Err(_) => {
                // Still unanswered, as it should be: a later `await` may take the answer.
                if let Ok(mut started) = self.started.lock() {
                    started.insert(
                        a.request.clone(),
                        (method, timeout.saturating_sub(quiet), answer),
                    );
                }
                Outcome::Passed
            }
            Ok(Err(e)) => Outcome::Error(format!("the request task failed: {e}")),
            // Its own deadline passed, or the link ended: no answer came, which is what was asked.
            Ok(Ok(Err(_))) => Outcome::Passed,
            Ok(Ok(Ok(answered))) => {
                let got = match answered {
                    Ok(result) => json!({ "result": result }),
                    Err(error) => json!({ "error": error.to_value() }),
                };
                Outcome::failed(Failure {
                    rule: a.rule.clone(),
                    summary: format!(
                        "`{method}` (started as `{}`) was answered, but should not have been within {}",
                        a.request,
                        Dur(quiet)
                    ),
                    awaited: Some(format!("no answer to `{method}` for {}", Dur(quiet))),
                    nearest: Some(got),
                    ..Failure::default()
                })
            }
        }
    }

    fn expect_pattern(
        &self,
        method: &Option<String>,
        params: &Option<Value>,
        message: &Option<Value>,
    ) -> Result<(Value, Pattern), String> {
        // `method` and `params` are merged into `message` when it is a mapping; a `message` that
        // is not one (`$any`) stands alone, and the loader refuses it beside `method`/`params`.
        let wanted = match message {
            Some(whole) if !whole.is_object() => whole.clone(),
            _ => {
                let mut wanted = match message {
                    Some(Value::Object(m)) => m.clone(),
                    _ => Map::new(),
                };
                if let Some(method) = method {
                    wanted.insert("method".into(), json!(method));
                }
                if let Some(params) = params {
                    wanted.insert("params".into(), params.clone());
                }
                Value::Object(wanted)
            }
        };
        let wanted = self.render(&wanted)?;
        let pattern = Pattern::compile(&wanted).map_err(|e| format!("bad pattern: {e}"))?;
        Ok((wanted, pattern))
    }

    /// The matched message with `answer` beside its fields when a capture reads it (`capture:
    /// { chat: answer.result.sessionId }`): what this double answered the request, waited for
    /// until the step's deadline.
    async fn with_answer(
        &self,
        message: &Value,
        link: u32,
        paths: &Captures,
        deadline: Instant,
    ) -> Result<Value, String> {
        let wants_answer = paths
            .values()
            .any(|p| p == "answer" || p.starts_with("answer.") || p.starts_with("answer["));
        let Some(id) = message.get("id").filter(|_| wants_answer) else {
            return Ok(message.clone());
        };
        match self.hub.wait_answer(link, id, deadline).await {
            Some(answer) => {
                let mut message = message.clone();
                message["answer"] = answer;
                Ok(message)
            }
            None => Err(format!(
                "this double did not answer request {id} before the step's deadline, so `answer` cannot be captured (a request held by a handler is answered by a `reply`)"
            )),
        }
    }

    /// The inbox's newest arrival when the `start` named `after` sent its request (0: every
    /// message counts).
    fn after_start(&self, after: &Option<String>) -> Result<u64, String> {
        let Some(name) = after else {
            return Ok(0);
        };
        self.start_marks
            .lock()
            .ok()
            .and_then(|marks| marks.get(name).copied())
            .ok_or_else(|| {
                format!(
                    "`after: {name}`: no `start` or `send` step named `as: {name}` ran before this step"
                )
            })
    }

    /// Where the run stands now, so a timed-out wait can say what came during it.
    fn mark(&self) -> Mark {
        Mark {
            seq: self.hub.inbox.last_seq(),
            ms: self.hub.journal().elapsed_ms(),
        }
    }

    /// The failure of a wait for a message that did not come. The nearest message shown is one
    /// of the same method only (another method is no near miss, only noise); with none, it
    /// says so and what did come during the wait.
    fn missing(
        &self,
        rule: &Option<String>,
        wanted: &Value,
        pattern: &Pattern,
        what: &str,
        timeout: Duration,
        since: Mark,
    ) -> Failure {
        let method = wanted.get("method").and_then(Value::as_str);
        let candidates: Vec<_> = self
            .hub
            .inbox
            .unconsumed()
            .into_iter()
            .filter(|e| {
                method.is_none_or(|m| e.message.get("method").and_then(Value::as_str) == Some(m))
            })
            .collect();
        let near = nearest(pattern, candidates.iter().map(|e| &e.message));
        let (nearest_message, diff) = match near {
            Some((message, outcome)) => (
                Some(message.clone()),
                Some(render_diff(wanted, message, &outcome)),
            ),
            None => (None, None),
        };
        let mut summary = format!("{what} did not come within {}", Dur(timeout));
        if nearest_message.is_none() {
            let ever = method.is_some_and(|m| {
                self.hub
                    .inbox
                    .all()
                    .iter()
                    .any(|e| e.message.get("method").and_then(Value::as_str) == Some(m))
            });
            summary.push_str(match (method, ever) {
                (Some(_), false) => ", and none came in the whole run",
                (Some(_), true) => ": none came that an earlier step had not taken",
                (None, _) => ", and nothing like it came",
            });
            summary.push_str(&format!("; {}", self.meanwhile(since)));
        }
        Failure {
            rule: rule.clone(),
            summary,
            awaited: Some(format!("{what}, for {}", Dur(timeout))),
            expected: Some(wanted.clone()),
            nearest: nearest_message,
            diff,
        }
    }

    /// What the peer sent since `since`, in a few words: each method with how often it came,
    /// and the answers to this double's requests.
    fn meanwhile(&self, since: Mark) -> String {
        let mut counts: Vec<(String, usize)> = Vec::new();
        for entry in self.hub.inbox.all().iter().filter(|e| e.seq > since.seq) {
            let method = entry
                .message
                .get("method")
                .and_then(Value::as_str)
                .unwrap_or("a message")
                .to_string();
            match counts.iter_mut().find(|(m, _)| *m == method) {
                Some((_, n)) => *n += 1,
                None => counts.push((method, 1)),
            }
        }
        let recent = self.hub.journal().recent(200);
        let answers: Vec<String> = recent
            .iter()
            .filter(|e| e.t_ms >= since.ms && e.dir == crate::journal::Direction::In)
            .filter(|e| e.msg.get("method").is_none())
            .filter_map(|e| {
                let id = e.msg.get("id")?;
                let asked = recent.iter().rev().find(|o| {
                    o.dir == crate::journal::Direction::Out
                        && o.link == e.link
                        && o.msg.get("id") == Some(id)
                        && o.msg.get("method").is_some()
                })?;
                let method = asked.msg.get("method")?.as_str()?;
                Some(match (e.msg.get("result"), e.msg.get("error")) {
                    (Some(result), _) => format!("the answer to `{method}`: {}", clip(result)),
                    (None, Some(error)) => {
                        format!("the error answering `{method}`: {}", clip(error))
                    }
                    (None, None) => format!("an answer to `{method}`"),
                })
            })
            .collect();
        let mut parts: Vec<String> = counts
            .into_iter()
            .map(|(method, n)| match n {
                1 => format!("`{method}`"),
                n => format!("{n} × `{method}`"),
            })
            .collect();
        parts.extend(answers);
        if parts.is_empty() {
            "nothing came from the peer during the wait".to_string()
        } else {
            format!("during the wait came {}", parts.join(", "))
        }
    }

    async fn expect(&self, e: &ExpectStep) -> Outcome {
        let timeout = self.timeout(e.timeout);
        let (wanted, pattern) = match self.expect_pattern(&e.method, &e.params, &e.message) {
            Ok(p) => p,
            Err(err) => return Outcome::Error(err),
        };
        let what = describe(&e.method);
        if let Applies::No(why) = self.hub.applies(Intent::Await { pattern: &wanted }) {
            return Outcome::NotApplicable(why);
        }
        let after = match self.after_start(&e.after) {
            Ok(after) => after,
            Err(why) => return Outcome::Error(why),
        };
        let since = self.mark();
        let deadline = Instant::now() + timeout;
        match self.hub.inbox.wait_take(&pattern, after, deadline).await {
            Some((entry, outcome)) => {
                self.focus_on(entry.link);
                let message = match self
                    .with_answer(&entry.message, entry.link, &e.capture, deadline)
                    .await
                {
                    Ok(message) => message,
                    // Our own answer is missing (a held request): the scenario's doing.
                    Err(why) => return Outcome::Error(why),
                };
                match self.capture(&message, &outcome, &e.capture, Some(entry.link)) {
                    Ok(()) => Outcome::Passed,
                    Err(err) => Outcome::failed(Failure {
                        rule: e.rule.clone(),
                        summary: err,
                        ..Failure::default()
                    }),
                }
            }
            None => match self.missed_applies(&wanted) {
                Some(why) => Outcome::NotApplicable(why),
                None => {
                    Outcome::failed(self.missing(&e.rule, &wanted, &pattern, &what, timeout, since))
                }
            },
        }
    }

    async fn any_order(&self, group: &[Spanned<Step>]) -> Outcome {
        let mut expects = Vec::new();
        for step in group {
            let Step::Expect(e) = &step.value else {
                return Outcome::Error("only `expect` steps can be in `any_order`".into());
            };
            match self.expect_pattern(&e.method, &e.params, &e.message) {
                Ok((wanted, pattern)) => expects.push((e, wanted, pattern)),
                Err(err) => return Outcome::Error(err),
            }
        }
        let timeout = expects
            .iter()
            .filter_map(|(e, _, _)| e.timeout)
            .map(|d| d.0)
            .max()
            .unwrap_or(self.default_timeout);
        let deadline = Instant::now() + timeout;
        let since = self.mark();
        for (_, wanted, _) in &expects {
            if let Applies::No(why) = self.hub.applies(Intent::Await { pattern: wanted }) {
                return Outcome::NotApplicable(why);
            }
        }
        // One deadline for the group: each is waited for in turn, but any order of arrival
        // passes, since every one looks at the whole inbox.
        for (e, wanted, pattern) in &expects {
            match self.hub.inbox.wait_take(pattern, 0, deadline).await {
                Some((entry, outcome)) => {
                    self.focus_on(entry.link);
                    let message = match self
                        .with_answer(&entry.message, entry.link, &e.capture, deadline)
                        .await
                    {
                        Ok(message) => message,
                        Err(why) => return Outcome::Error(why),
                    };
                    if let Err(err) = self.capture(&message, &outcome, &e.capture, Some(entry.link))
                    {
                        return Outcome::failed(Failure {
                            rule: e.rule.clone(),
                            summary: err,
                            ..Failure::default()
                        });
                    }
                }
                None => {
                    if let Some(why) = self.missed_applies(wanted) {
                        return Outcome::NotApplicable(why);
                    }
                    return Outcome::failed(self.missing(
                        &e.rule,
                        wanted,
                        pattern,
                        &describe(&e.method),
                        timeout,
                        since,
                    ));
                }
            }
        }
        Outcome::Passed
    }

    fn check(&self, c: &CheckStep) -> Outcome {
        let (that, wanted) = match (self.render(&c.that), self.render(&c.matches)) {
            (Ok(that), Ok(wanted)) => (that, wanted),
            (Err(e), _) | (_, Err(e)) => return Outcome::Error(e),
        };
        let pattern = match Pattern::compile(&wanted) {
            Ok(p) => p,
            Err(e) => return Outcome::Error(format!("bad pattern: {e}")),
        };
        let outcome = pattern.matches(&that);
        if outcome.is_match() {
            return match self.capture(&that, &outcome, &Captures::new(), None) {
                Ok(()) => Outcome::Passed,
                Err(e) => Outcome::Error(e),
            };
        }
        Outcome::failed(Failure {
            rule: c.rule.clone(),
            summary: format!("{} is not what the spec says", describe_value(&c.that)),
            awaited: None,
            diff: Some(render_diff(&wanted, &that, &outcome)),
            expected: Some(wanted),
            nearest: Some(that),
        })
    }

    /// Waits for `wait`, unless the peer's process ends first (a CLI that could not start):
    /// then gives how it ended, and the step need not wait out its deadline.
    async fn unless_exited<T>(
        &self,
        wait: impl Future<Output = T>,
        deadline: Instant,
    ) -> Result<T, crate::process::Exited> {
        let Some(process) = &self.process else {
            return Ok(wait.await);
        };
        tokio::select! {
            // What the step waited for wins when both are ready by the time this task runs (a
            // link that opened just before its process ended on a 4400): select! would
            // otherwise pick one at random.
            biased;
            value = wait => Ok(value),
            Some(exit) = process.wait_exit(deadline.into_std()) => Err(exit),
        }
    }

    /// The failure of a step whose wait the peer's process ended.
    fn exited(
        &self,
        rule: &Option<String>,
        exit: crate::process::Exited,
        awaited: String,
    ) -> Outcome {
        let output = self
            .process
            .as_ref()
            .and_then(|p| p.output())
            .map(|o| output_tail(&o).to_string())
            .unwrap_or_default();
        // The shell's own codes for a command it could not find or run: the test's command
        // line is wrong, and no rule of the peer's is broken.
        if matches!(exit.code, Some(126 | 127)) {
            return Outcome::Error(format!(
                "the command that starts the peer could not run ({exit}: not found or not executable); its output: {output}"
            ));
        }
        Outcome::failed(Failure {
            rule: rule.clone(),
            summary: format!("the peer's process ended ({exit}) while the step waited"),
            awaited: Some(awaited),
            nearest: self
                .process
                .as_ref()
                .and_then(|p| p.output())
                .map(|o| output_tail(&o)),
            ..Failure::default()
        })
    }

    async fn expect_link(&self, e: &ExpectLinkStep) -> Outcome {
        let deadline = Instant::now() + e.within.0;
        let waited = self
            .unless_exited(self.hub.wait_current(deadline), deadline)
            .await;
        let waited = match waited {
            Ok(waited) => waited,
            Err(exit) => {
                return self.exited(&e.rule, exit, format!("an open link, for {}", e.within));
            }
        };
        match waited {
            Some(peer) => {
                self.focus_on(peer.link());
                Outcome::Passed
            }
            None => Outcome::failed(Failure {
                rule: e.rule.clone(),
                summary: format!("the peer did not link within {}", e.within),
                awaited: Some(format!("an open link, for {}", e.within)),
                ..Failure::default()
            }),
        }
    }

    async fn expect_none(&self, e: &ExpectNoneStep) -> Outcome {
        let (wanted, pattern) = match self.expect_pattern(&e.method, &e.params, &e.message) {
            Ok(p) => p,
            Err(err) => return Outcome::Error(err),
        };
        let after = match self.after_start(&e.after) {
            Ok(after) => after,
            Err(why) => return Outcome::Error(why),
        };
        // Whatever earlier steps did not consume counts too: a message that came during the
        // previous step (a repeated event while a request was answered) is just as unwanted.
        match self.hub.inbox.watch(&pattern, after, e.duration.0).await {
            None => Outcome::Passed,
            Some(entry) => Outcome::failed(Failure {
                rule: e.rule.clone(),
                summary: format!(
                    "{} came, though nothing like it should for {}",
                    describe(&e.method),
                    e.duration
                ),
                awaited: Some(format!("silence for {}", e.duration)),
                expected: Some(json!({ "$not": wanted })),
                nearest: Some(entry.message),
                diff: None,
            }),
        }
    }

    async fn reply(&self, r: &ReplyStep) -> Outcome {
        let Some(request) = self.vars().get(&r.to).cloned() else {
            return Outcome::Error(format!(
                "`reply.to`: no variable `{}` (capture the request with `$`)",
                r.to
            ));
        };
        let Some(id) = request.get("id").cloned() else {
            return Outcome::Error(format!(
                "`{}` is not a captured request: it has no `id`",
                r.to
            ));
        };
        let origin = self.origins.lock().ok().and_then(|o| o.get(&r.to).copied());
        let Some(link) = self.hub.take_held(&id, origin) else {
            return Outcome::Error(format!(
                "request {id} was not held: add a handler with `hold: true` for its method, or the default behaviour answers it first"
            ));
        };
        let Some(peer) = self.hub.link(link) else {
            return Outcome::Error(format!("link {link} is gone"));
        };
        let incoming = crate::jsonrpc::IncomingRequest {
            id: id.clone(),
            method: request
                .get("method")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            params: request.get("params").cloned().unwrap_or(Value::Null),
            raw: request.clone(),
        };
        let template = match (&r.result, &r.error) {
            (Some(result), _) => Ok(result.clone()),
            (None, Some(error)) => Err(error.clone()),
            (None, None) => return Outcome::Error("`reply` needs `result` or `error`".into()),
        };
        let outcome: Result<Value, RpcError> = self.hub.render_answer(&incoming, template);
        peer.respond(&id, outcome);
        Outcome::Passed
    }

    async fn close(&self, c: &CloseStep) -> Outcome {
        match self.link(Instant::now() + self.default_timeout).await {
            Ok(peer) if c.drop => {
                peer.drop_link();
                Outcome::Passed
            }
            Ok(peer) if c.half => {
                peer.half_close();
                Outcome::Passed
            }
            Ok(peer) => {
                peer.close(
                    c.code.unwrap_or(CLOSE_NORMAL),
                    c.reason.as_deref().unwrap_or(""),
                );
                Outcome::Passed
            }
            Err(f) => Outcome::failed(f),
        }
    }

    async fn expect_close(&self, e: &ExpectCloseStep) -> Outcome {
        let timeout = self.timeout(e.timeout);
        let deadline = Instant::now() + timeout;
        // The link the scenario last talked on, open or not: a peer may close it (say with 4400
        // right after a `dial`) before this step starts, and that close is what the step is
        // about, even when the peer has already dialled a new one. Before any, the newest.
        let focus = self.focus.load(std::sync::atomic::Ordering::Relaxed);
        let watched = self
            .hub
            .link(focus)
            .or_else(|| self.hub.links().last().map(|l| l.peer.clone()));
        let peer = match watched {
            Some(peer) => peer,
            None => match self.link(deadline).await {
                Ok(peer) => peer,
                Err(f) => {
                    return Outcome::failed(Failure {
                        rule: e.rule.clone(),
                        ..f
                    });
                }
            },
        };
        let wanted = match e.code {
            Some(code) => format!("the peer to close link {} with code {code}", peer.link()),
            None => format!("the peer to close link {}", peer.link()),
        };
        let closed = tokio::time::timeout_at(deadline, peer.closed()).await;
        let fail = |summary: String| {
            Outcome::failed(Failure {
                rule: e.rule.clone(),
                summary,
                awaited: Some(format!("{wanted}, for {}", Dur(timeout))),
                ..Failure::default()
            })
        };
        match closed {
            Err(_) => fail(format!("link {} stayed open", peer.link())),
            Ok(_) if peer.closed_by_us() => fail("we closed the link, not the peer".into()),
            Ok(info) => match (e.code, info) {
                (None, _) => Outcome::Passed,
                (Some(code), Some(info)) if info.code == code => Outcome::Passed,
                (Some(code), Some(info)) => fail(format!(
                    "closed with {} ({:?}), not {code}",
                    info.code, info.reason
                )),
                (Some(code), None) => fail(format!(
                    "vanished without a close frame, not a close with {code}"
                )),
            },
        }
    }

    /// The link a reconnect is measured from: the newest one that has ended or that we have
    /// asked to close (its close handshake may still be in flight), else the newest.
    fn reconnect_baseline(&self) -> u32 {
        let links = self.hub.links();
        links
            .iter()
            .rev()
            .find(|l| l.closed.is_some() || l.peer.closed_by_us())
            .or(links.last())
            .map(|l| l.peer.link())
            .unwrap_or(0)
    }

    async fn expect_reconnect(&self, e: &ExpectReconnectStep) -> Outcome {
        let baseline = self.reconnect_baseline();
        let deadline = Instant::now() + e.within.0;
        let waited = self.hub.wait_links(deadline, |links| {
            links
                .iter()
                .find(|l| l.peer.link() > baseline)
                .map(|l| l.peer.link())
        });
        let found = match self.unless_exited(waited, deadline).await {
            Ok(found) => found,
            Err(exit) => {
                return self.exited(
                    &e.rule,
                    exit,
                    format!("a new link after link {baseline}, for {}", e.within),
                );
            }
        };
        match found {
            Some(link) => {
                self.focus_on(link);
                Outcome::Passed
            }
            None => Outcome::failed(Failure {
                rule: e.rule.clone(),
                summary: format!("the peer did not link again within {}", e.within),
                awaited: Some(format!(
                    "a new link after link {baseline}, for {}",
                    e.within
                )),
                ..Failure::default()
            }),
        }
    }

    async fn expect_no_reconnect(&self, e: &ExpectNoReconnectStep) -> Outcome {
        let baseline = self.reconnect_baseline();
        let found = self
            .hub
            .wait_links(Instant::now() + e.duration.0, |links| {
                links
                    .iter()
                    .find(|l| l.peer.link() > baseline)
                    .map(|l| l.peer.link())
            })
            .await;
        match found {
            None => Outcome::Passed,
            Some(link) => Outcome::failed(Failure {
                rule: e.rule.clone(),
                summary: format!(
                    "the peer linked again (link {link}) though it should not for {}",
                    e.duration
                ),
                awaited: Some(format!(
                    "no new link after link {baseline}, for {}",
                    e.duration
                )),
                ..Failure::default()
            }),
        }
    }

    async fn act(&self, a: &ActStep) -> Outcome {
        let Some(actor) = &self.actor else {
            return Outcome::Error("this double has no actions".into());
        };
        // Substituted across the whole action, whatever its keys: the engine does not know
        // which of a double's fields may hold a variable, so every one may.
        let action = match self.render(&a.action()) {
            Ok(action) => action,
            Err(e) => return Outcome::Error(e),
        };
        let result = match actor.act(action, self.timeout(a.timeout)).await {
            Ok(result) => result,
            Err(ActError::NotApplicable(why)) => return Outcome::NotApplicable(why),
            // The double could not do what the scenario asked: the scenario's fault, not the peer's.
            Err(ActError::Failed(why) | ActError::Unknown(why)) => {
                return Outcome::Error(format!("act: {why}"));
            }
        };
        match self.capture(&result, &MatchOutcome::default(), &a.capture, None) {
            Ok(()) => Outcome::Passed,
            Err(e) => Outcome::Error(e),
        }
    }

    async fn expect_exit(&self, e: &ExpectExitStep) -> Outcome {
        let Some(process) = &self.process else {
            return Outcome::NotApplicable(super::process::NO_PROCESS.into());
        };
        let within = self.timeout(e.within);
        let fail = |summary: String| {
            Outcome::failed(Failure {
                rule: e.rule.clone(),
                summary,
                awaited: Some(format!("the process to exit within {}", Dur(within))),
                expected: e.code.map(|c| json!({ "exit code": c })),
                nearest: process.output().map(|o| output_tail(&o)),
                diff: None,
            })
        };
        match process
            .wait_exit((Instant::now() + within).into_std())
            .await
        {
            None => fail(format!("the process still ran after {}", Dur(within))),
            Some(exit) => match e.code {
                Some(code) if exit.code != Some(code) => fail(format!(
                    "the process ended with {exit}, not exit code {code}"
                )),
                _ => Outcome::Passed,
            },
        }
    }

    async fn expect_output(&self, e: &ExpectOutputStep) -> Outcome {
        let Some(output) = self.process.as_ref().and_then(|p| p.output()) else {
            return Outcome::NotApplicable(super::process::NO_PROCESS.into());
        };
        let pattern = match regex::Regex::new(&e.pattern) {
            Ok(p) => p,
            Err(err) => return Outcome::Error(format!("`{}` is not a regex: {err}", e.pattern)),
        };
        let within = self.timeout(e.within);
        let deadline = Instant::now() + within;
        let after = self.output_seen.load(std::sync::atomic::Ordering::SeqCst);
        let matches = |line: &crate::process::OutputLine| {
            e.stream.is_none_or(|s| s == line.stream) && pattern.is_match(&line.text)
        };
        loop {
            // Registered before looking, so a line pushed in between wakes the wait.
            let changed = output.changed();
            if let Some(line) = output.find(after, matches) {
                self.output_seen
                    .fetch_max(line.seq, std::sync::atomic::Ordering::SeqCst);
                return Outcome::Passed;
            }
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                break;
            }
        }
        let stream = e
            .stream
            .map(|s| s.to_string())
            .unwrap_or("stdout or stderr".into());
        Outcome::failed(Failure {
            rule: e.rule.clone(),
            summary: format!("no line of {stream} matched `{}`", e.pattern),
            awaited: Some(format!(
                "a line matching `{}` within {}",
                e.pattern,
                Dur(within)
            )),
            expected: Some(json!({ "pattern": e.pattern, "stream": stream })),
            nearest: Some(output_tail(&output)),
            diff: None,
        })
    }

    async fn restart_peer(&self) -> Outcome {
        let Some(process) = &self.process else {
            return Outcome::NotApplicable(super::process::NO_PROCESS.into());
        };
        match process.restart().await {
            Ok(()) => Outcome::Passed,
            // The process would not start again: the set-up's fault, not a broken rule.
            Err(why) => Outcome::Error(format!("restart_peer: {why}")),
        }
    }

    async fn dial(&self, d: &DialStep) -> Outcome {
        let Some(dialer) = &self.dialer else {
            return Outcome::Error("this double does not dial".into());
        };
        let token = match &d.token {
            Some(t) => match self.render(&json!(t)) {
                Ok(Value::String(s)) => Some(s),
                Ok(other) => Some(other.to_string()),
                Err(e) => return Outcome::Error(e),
            },
            None => None,
        };
        let timeout = self.timeout(d.timeout);
        let result = dialer
            .dial(DialRequest {
                token,
                protocol: d.protocol,
                timeout,
            })
            .await;
        let fail = |summary: String| {
            Outcome::failed(Failure {
                rule: d.rule.clone(),
                summary,
                ..Failure::default()
            })
        };
        match (d.refused, result) {
            (None, DialResult::Linked(peer)) => {
                self.focus_on(peer.link());
                Outcome::Passed
            }
            (Some(status), DialResult::Refused(got)) if got == status => Outcome::Passed,
            (Some(status), DialResult::Linked(peer)) => {
                peer.close(CLOSE_NORMAL, "this dial should have been refused");
                fail(format!(
                    "the instance accepted a link it should have refused with {status}"
                ))
            }
            (Some(status), DialResult::Refused(got)) => {
                fail(format!("refused with {got}, not {status}"))
            }
            (None, DialResult::Refused(got)) => {
                fail(format!("the instance refused the link with {got}"))
            }
            (_, DialResult::Failed(why)) => fail(format!("the dial failed: {why}")),
        }
    }
}

/// The process's last lines, as a report shows what came instead.
/// Resolves once the hub holds a finding under `rule`. Findings have one observer (the control
/// API's), so this looks every 20 ms instead of taking it.
async fn found(hub: &Hub, rule: &str) {
    while !hub.findings().has(rule) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn output_tail(output: &crate::process::OutputLog) -> Value {
    let lines: Vec<String> = output
        .tail(20)
        .iter()
        .map(|l| format!("{}: {}", l.stream, l.text))
        .collect();
    if lines.is_empty() {
        json!("(the process printed nothing)")
    } else {
        json!({ "last output": lines })
    }
}

/// Why a message a step is about to send was not sent.
enum Unadmitted {
    /// The peer did not claim what it needs: the run does not apply.
    NotClaimed(String),
    /// The peer had not said what it claims by the step's deadline (no answer to initialize):
    /// nothing it might not have listed is sent, and the step fails.
    Unsaid,
}

impl Unadmitted {
    fn outcome(self, rule: &Option<String>, method: &str) -> Outcome {
        match self {
            Unadmitted::NotClaimed(why) => Outcome::NotApplicable(why),
            Unadmitted::Unsaid => Outcome::failed(Failure {
                rule: rule.clone(),
                summary: format!(
                    "`{method}` was not sent: by the step's deadline the peer had not said what it supports (its answer to initialize), and nothing it may not have listed is sent"
                ),
                awaited: Some("the peer's capabilities".into()),
                ..Failure::default()
            }),
        }
    }
}

/// A point in the run: the newest inbox message and the journal's clock.
#[derive(Debug, Clone, Copy)]
struct Mark {
    seq: u64,
    ms: f64,
}

/// A value in at most a line.
fn clip(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() <= 120 {
        return text;
    }
    format!("{}…", text.chars().take(120).collect::<String>())
}

/// What a step expects of an answer.
#[derive(Debug, Clone, Copy)]
enum Expected<'a> {
    /// A result matching this.
    Result(&'a Value),
    /// An error matching this.
    Error(&'a Value),
    /// `{result}` or `{error}` matching this (a `$one_of` of readings).
    Answer(&'a Value),
    /// Any result.
    AnyResult,
}

impl<'a> Expected<'a> {
    fn of(result: &'a Option<Value>, error: &'a Option<Value>, answer: &'a Option<Value>) -> Self {
        match (answer, error, result) {
            (Some(whole), _, _) => Expected::Answer(whole),
            (None, Some(error), _) => Expected::Error(error),
            (None, None, Some(result)) => Expected::Result(result),
            (None, None, None) => Expected::AnyResult,
        }
    }
}

/// The headline of an answer that is not what the spec says: what came (a result, or which
/// error), against what kind of answer the step wanted, never implying a particular error was
/// expected when a result was.
fn answer_summary(
    method: &str,
    answer: &Result<Value, RpcError>,
    expected: Expected<'_>,
) -> String {
    let refused = |e: &RpcError| {
        format!(
            "`{method}` was refused with error {} ({})",
            e.code, e.message
        )
    };
    match (answer, expected) {
        (Err(e), Expected::Result(_) | Expected::AnyResult) => {
            format!("{} where the spec wants a result", refused(e))
        }
        (Err(e), Expected::Error(_)) => format!("{}, not the error the spec wants", refused(e)),
        (Err(e), Expected::Answer(_)) => {
            format!("{}, which is no answer the spec allows", refused(e))
        }
        (Ok(_), Expected::Error(_)) => {
            format!("`{method}` was answered with a result where the spec wants it refused")
        }
        (Ok(_), Expected::Answer(_)) => {
            format!("the result of `{method}` is no answer the spec allows")
        }
        (Ok(_), _) => format!("the result of `{method}` is not what the spec says"),
    }
}

/// How a checked value is named in a failure: the variable it came from, when it is one.
fn describe_value(that: &Value) -> String {
    match that.as_str() {
        Some(text) if text.starts_with("${") => {
            format!("`{}`", text.trim_start_matches("${").trim_end_matches('}'))
        }
        _ => "the value".into(),
    }
}

fn describe(method: &Option<String>) -> String {
    match method {
        Some(m) => format!("`{m}`"),
        None => "a matching message".into(),
    }
}

/// A few words saying what a step does, for the report.
pub fn title(step: &Step) -> String {
    match step {
        Step::Notify(n) => format!("notify {}", n.method),
        Step::Request(r) => format!("request {}", r.method),
        Step::Start(st) => format!("start {} as {}", st.method, st.name),
        Step::Await(a) => match a.none_for {
            Some(quiet) => format!("expect no answer to {} for {quiet}", a.request),
            None => format!("await {}", a.request),
        },
        Step::Expect(e) => format!("expect {}", e.method.as_deref().unwrap_or("message")),
        Step::ExpectNone(e) => format!(
            "expect no {} for {}",
            e.method.as_deref().unwrap_or("message"),
            e.duration
        ),
        Step::AnyOrder(g) => format!("any order of {} expects", g.len()),
        Step::Check(c) => format!("check {}", describe_value(&c.that).trim_matches('`')),
        Step::ExpectLink(e) => format!("expect a link within {}", e.within),
        Step::Reply(r) => format!("reply to {}", r.to),
        Step::Send(_) => "send a raw message".into(),
        Step::Wait(d) => format!("wait {d}"),
        Step::Close(c) if c.drop => "drop the link (no close frame)".into(),
        Step::Close(c) if c.half => "half-close the link (end our direction, go on reading)".into(),
        Step::Close(c) => format!("close with {}", c.code.unwrap_or(CLOSE_NORMAL)),
        Step::Stall(d) => format!("stall the link for {d}"),
        Step::ExpectClose(e) => match e.code {
            Some(code) => format!("expect the peer to close with {code}"),
            None => "expect the peer to close".into(),
        },
        Step::ExpectReconnect(e) => format!("expect a reconnect within {}", e.within),
        Step::ExpectNoReconnect(e) => format!("expect no reconnect for {}", e.duration),
        Step::Dial(d) => match d.refused {
            Some(status) => format!("dial, expecting refusal {status}"),
            None => "dial".into(),
        },
        Step::Act(a) => format!("act: {}", a.name),
        Step::ExpectExit(e) => match e.code {
            Some(code) => format!("expect the process to exit with {code}"),
            None => "expect the process to exit".into(),
        },
        Step::ExpectOutput(e) => format!("expect output matching `{}`", e.pattern),
        Step::RestartPeer(_) => "restart the peer".into(),
        Step::WaitForSignal(w) => format!("wait for signal {}", w.name),
        Step::When(w) => match &w.that {
            Some(that) => format!("when {}", describe_value(that).trim_matches('`')),
            None => "when".into(),
        },
    }
}
