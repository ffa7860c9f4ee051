//! The hub: where every link's traffic meets the scenario and the double's model.

use std::sync::{Arc, Mutex, Weak};

use serde_json::{Value, json};
use tokio::sync::Notify;
use tokio::time::Instant;

use super::applicability::{Applies, Intent};
use super::handlers::{Answer, HandlerError, HandlerSet};
use super::inbox::Inbox;
use super::progress::{Progress, RunEvent};
use crate::finding::Findings;
use crate::journal::{Direction, Journal};
use crate::jsonrpc::{
    Dispatch, IncomingRequest, LinkEvent, METHOD_NOT_FOUND, Peer, PeerConfig, RpcError,
};
use crate::pattern::{Vars, substitute};
use crate::transport::{CloseInfo, Connection};

/// Why a run's hub cannot be made: the scenario's variables or handlers do not compile.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HubError {
    /// A variable's value names one that is not known before it.
    #[error("vars.{name}: {source}")]
    Var {
        /// The variable.
        name: String,
        /// What the substitution found.
        source: crate::pattern::SubstError,
    },
    /// A handler does not compile.
    #[error("handlers: {0}")]
    Handlers(#[source] HandlerError),
}
/// A double's protocol model, as the hub sees it. Every method has a default that does nothing,
/// so a double implements only what its side of the protocol needs.
pub trait Behaviour: Send + Sync + 'static {
    /// A link opened (a device dialled in, or we dialled out).
    fn on_open(&self, _hub: &Arc<Hub>, _peer: &Arc<Peer>) {}

    /// Every event of every link, before steps and handlers see it: monitors check the peer
    /// here, and the model follows the conversation.
    fn observe(&self, _hub: &Arc<Hub>, _peer: &Arc<Peer>, _event: &LinkEvent) {}

    /// Every message this side sent.
    fn observe_sent(&self, _hub: &Arc<Hub>, _peer: &Arc<Peer>, _message: &Value) {}

    /// A request no handler took. Answer it (now, or later from a task) and return true; return
    /// false and the hub answers `-32601`.
    fn answer(&self, _hub: &Arc<Hub>, _peer: &Arc<Peer>, _request: &IncomingRequest) -> bool {
        false
    }

    /// Whether the peer claimed what a step is about to do needs (see [`Intent`]); a double
    /// that cannot tell says [`Applies::Yes`].
    fn applies(&self, _hub: &Arc<Hub>, _intent: Intent<'_>) -> Applies {
        Applies::Yes
    }

    /// What sees every message of each new link (the always-on shape checks, and the
    /// misbehaviours that bend what this side sends); none by default.
    fn watch(&self) -> Option<Arc<dyn crate::jsonrpc::MessageWatch>> {
        None
    }

    /// How this double's links read their frames: JSON-RPC, or the typed frames of another
    /// protocol family.
    fn framing(&self) -> crate::jsonrpc::Framing {
        crate::jsonrpc::Framing::JsonRpc
    }

    /// The request that opens each link, when this side's protocol says nothing else may be
    /// sent before it is answered: every other request and notification then waits for that
    /// answer (see [`PeerConfig::opener`]). None by default.
    fn opener(&self) -> Option<&'static str> {
        None
    }
}

/// One link of the run.
#[derive(Debug, Clone)]
#[allow(missing_docs)] // fields whose names say it all go undocumented
pub struct LinkRecord {
    pub peer: Arc<Peer>,
    /// When it opened.
    pub opened: Instant,
    /// `Some` once it ended: the peer's close code, or `None` when the peer vanished.
    pub closed: Option<Option<CloseInfo>>,
}

/// How many of its own answers a hub keeps for captures (the oldest go first).
const ANSWERS_KEPT: usize = 256;

/// The largest answer kept for captures, serialized (256 of them: at most 16 MiB).
const ANSWER_BYTES_KEPT: usize = 64 * 1024;

/// The largest request id whose answer is kept, serialized.
const ANSWER_ID_BYTES_KEPT: usize = 256;

/// The meeting point of links, scenario and model.
pub struct Hub {
    journal: Arc<Journal>,
    findings: Arc<Findings>,
    behaviour: Arc<dyn Behaviour>,
    handlers: HandlerSet,
    /// The scenario's variables (captures and built-ins), shared with handlers' answers.
    pub vars: Mutex<Vars>,
    /// Requests and notifications from the peer, for expect steps.
    pub inbox: Inbox,
    links: Mutex<Vec<LinkRecord>>,
    links_changed: Notify,
    held: Mutex<Vec<(u32, Value)>>,
    /// The answers this double sent, newest last (link, request id, `{result}` or `{error}`),
    /// for a step that captures what the double answered a request it expected.
    answers: Mutex<std::collections::VecDeque<(u32, Value, Value)>>,
    answers_changed: Notify,
    /// Whether the answers are kept (see [`Hub::keep_nothing`]).
    answers_kept: std::sync::atomic::AtomicBool,
    /// The last link number given out (links may open at once: numbers are reserved here).
    next_link: std::sync::atomic::AtomicU32,
    /// How the run is getting on, for watchers (`--events`, the control API).
    progress: Arc<Progress>,
    /// Why a set-up action the peer's project was to do is not done at all (its hook said it
    /// does not implement it): what the steps waited for from then on does not apply.
    undone: Mutex<Option<String>>,
    me: Weak<Hub>,
}

impl std::fmt::Debug for Hub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hub").finish_non_exhaustive()
    }
}

/// The hub as each peer's dispatch; weak, so links do not keep a finished run alive.
struct HubDispatch(Weak<Hub>);

impl Dispatch for HubDispatch {
    fn on_event(&self, peer: &Arc<Peer>, event: LinkEvent) {
        if let Some(hub) = self.0.upgrade() {
            hub.on_event(peer, event);
        }
    }

    fn on_sent(&self, peer: &Arc<Peer>, message: &Value) {
        if let Some(hub) = self.0.upgrade() {
            hub.behaviour.observe_sent(&hub, peer, message);
            hub.answered(peer.link(), message);
        }
    }
}

impl Hub {
    /// A hub for one run.
    pub fn new(
        behaviour: Arc<dyn Behaviour>,
        handlers: HandlerSet,
        vars: Vars,
        journal: Arc<Journal>,
        findings: Arc<Findings>,
    ) -> Arc<Hub> {
        let progress = Arc::new(Progress::default());
        let watched = progress.clone();
        findings.observe(Arc::new(move |finding| {
            watched.tell(RunEvent::found(finding));
        }));
        Arc::new_cyclic(|me| Hub {
            journal,
            findings,
            progress,
            behaviour,
            handlers,
            vars: Mutex::new(vars),
            inbox: Inbox::default(),
            links: Mutex::new(Vec::new()),
            links_changed: Notify::new(),
            held: Mutex::new(Vec::new()),
            answers: Mutex::new(std::collections::VecDeque::new()),
            answers_changed: Notify::new(),
            answers_kept: std::sync::atomic::AtomicBool::new(true),
            next_link: std::sync::atomic::AtomicU32::new(0),
            undone: Mutex::new(None),
            me: me.clone(),
        })
    }

    /// A hub for a run of `scenario` (or of the default behaviour alone): the scenario's
    /// variables over the built-ins, and its handlers compiled.
    pub fn for_scenario(
        behaviour: Arc<dyn Behaviour>,
        scenario: Option<&crate::scenario::Scenario>,
        mut vars: Vars,
        journal: Arc<Journal>,
        findings: Arc<Findings>,
    ) -> Result<Arc<Hub>, HubError> {
        let handlers = match scenario {
            Some(s) => {
                for (name, value) in &s.vars {
                    let value = substitute(value, &vars).map_err(|source| HubError::Var {
                        name: name.clone(),
                        source,
                    })?;
                    vars.set(name.clone(), value);
                }
                HandlerSet::compile(&s.handlers, &vars).map_err(HubError::Handlers)?
            }
            None => HandlerSet::default(),
        };
        Ok(Hub::new(behaviour, handlers, vars, journal, findings))
    }

    /// Asks the double whether its peer claimed what a step is about to do needs.
    pub fn applies(&self, intent: Intent<'_>) -> Applies {
        match self.me.upgrade() {
            Some(me) => self.behaviour.applies(&me, intent),
            None => Applies::Yes,
        }
    }

    /// Notes that a set-up action is not done because the peer's project does not implement it
    /// (the first reason is kept).
    pub fn set_up_not_done(&self, why: String) {
        if let Ok(mut undone) = self.undone.lock() {
            undone.get_or_insert(why);
        }
    }

    /// Why a set-up action was not done, if one was not.
    pub fn set_up_undone(&self) -> Option<String> {
        self.undone.lock().ok().and_then(|u| u.clone())
    }

    /// How the run is getting on: the step running now, events, signals.
    pub fn progress(&self) -> &Arc<Progress> {
        &self.progress
    }

    /// The run's journal.
    pub fn journal(&self) -> &Arc<Journal> {
        &self.journal
    }

    /// The run's findings.
    pub fn findings(&self) -> &Arc<Findings> {
        &self.findings
    }

    /// Starts a JSON-RPC peer on a new connection and makes it the run's newest link.
    pub fn attach(&self, connection: Connection) -> Arc<Peer> {
        let Some(me) = self.me.upgrade() else {
            // Unreachable while a caller holds the hub; a peer without a hub still works.
            let dispatch = Arc::new(HubDispatch(Weak::new()));
            return Peer::start(
                connection,
                PeerConfig {
                    link: 0,
                    ..Default::default()
                },
                self.journal.clone(),
                self.findings.clone(),
                dispatch,
            );
        };
        let link = self
            .next_link
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            + 1;
        let dispatch = Arc::new(HubDispatch(self.me.clone()));
        // The link is recorded and the model has seen it open before its first message is read.
        Peer::start_after(
            connection,
            PeerConfig {
                link,
                watch: self.behaviour.watch(),
                framing: self.behaviour.framing(),
                opener: self.behaviour.opener(),
            },
            self.journal.clone(),
            self.findings.clone(),
            dispatch,
            |peer| {
                if let Ok(mut links) = self.links.lock() {
                    links.push(LinkRecord {
                        peer: peer.clone(),
                        opened: Instant::now(),
                        closed: None,
                    });
                }
                self.links_changed.notify_waiters();
                self.behaviour.on_open(&me, peer);
            },
        )
    }

    /// Reports `finding` on `peer`'s link when `done` still says no after `patience` and the link
    /// is still open: a peer that never sends what it owes would otherwise leave the double
    /// waiting in silence. With `close`, the link is then closed with that code and reason, so a
    /// silent peer does not hold it (and its socket) forever.
    pub fn watchdog(
        &self,
        peer: &Arc<Peer>,
        patience: std::time::Duration,
        finding: crate::finding::Finding,
        close: Option<(u16, &'static str)>,
        done: impl Fn() -> bool + Send + 'static,
    ) {
        let (findings, watched) = (self.findings.clone(), peer.clone());
        tokio::spawn(async move {
            tokio::time::sleep(patience).await;
            if !done() && !watched.is_closed() {
                findings.push(finding.on_link(watched.link()));
                if let Some((code, reason)) = close {
                    watched.close(code, reason);
                }
            }
        });
    }

    /// Every link so far, oldest first.
    pub fn links(&self) -> Vec<LinkRecord> {
        self.links.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// The newest link that is still open.
    pub fn current(&self) -> Option<Arc<Peer>> {
        let links = self.links.lock().ok()?;
        links
            .iter()
            .rev()
            .find(|l| l.closed.is_none())
            .map(|l| l.peer.clone())
    }

    /// The newest open link whose number `pick` takes.
    pub fn newest_open(&self, pick: impl Fn(u32) -> bool) -> Option<Arc<Peer>> {
        let links = self.links.lock().ok()?;
        links
            .iter()
            .rev()
            .find(|l| l.closed.is_none() && !l.peer.is_closed() && pick(l.peer.link()))
            .map(|l| l.peer.clone())
    }

    /// Waits until `ready` holds for the links, or the deadline passes; gives its value.
    pub async fn wait_links<T>(
        &self,
        deadline: Instant,
        mut ready: impl FnMut(&[LinkRecord]) -> Option<T>,
    ) -> Option<T> {
        loop {
            let changed = self.links_changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if let Some(value) = self.links.lock().ok().and_then(|l| ready(&l)) {
                return Some(value);
            }
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                return None;
            }
        }
    }

    /// Waits for an open link, at most until the deadline.
    pub async fn wait_current(&self, deadline: Instant) -> Option<Arc<Peer>> {
        self.wait_links(deadline, |links| {
            links
                .iter()
                .rev()
                .find(|l| l.closed.is_none())
                .map(|l| l.peer.clone())
        })
        .await
    }

    /// Where a held request came from, removing it from the held list. `link`: the link the
    /// request is known to have come on, when known (ids repeat across links).
    pub fn take_held(&self, id: &Value, link: Option<u32>) -> Option<u32> {
        let mut held = self.held.lock().ok()?;
        let at = held.iter().rposition(|(held_link, held_id)| {
            held_id == id && link.is_none_or(|l| l == *held_link)
        })?;
        Some(held.remove(at).0)
    }

    /// Keeps an answer this double sent (a response: an id, a result or an error, no method).
    fn answered(&self, link: u32, message: &Value) {
        if !self.answers_kept.load(std::sync::atomic::Ordering::Relaxed) {
            return;
        }
        let (Some(id), None) = (message.get("id"), message.get("method")) else {
            return;
        };
        // The id is the peer's: one too large to look up by is not kept either.
        if id.to_string().len() > ANSWER_ID_BYTES_KEPT {
            return;
        }
        let answer = match (message.get("result"), message.get("error")) {
            (Some(result), _) => json!({ "result": result }),
            (None, Some(error)) => json!({ "error": error }),
            (None, None) => return,
        };
        // What is kept is bounded in bytes, not only in number: an answer can carry what the
        // peer sent (a history of its prompts). A large one is kept as a note saying so.
        let answer = if answer.to_string().len() > ANSWER_BYTES_KEPT {
            json!({ "too_large_to_keep": ANSWER_BYTES_KEPT })
        } else {
            answer
        };
        if let Ok(mut answers) = self.answers.lock() {
            if answers.len() == ANSWERS_KEPT {
                answers.pop_front();
            }
            answers.push_back((link, id.clone(), answer));
        }
        self.answers_changed.notify_waiters();
    }

    /// Keeps neither the peer's messages (the inbox) nor this double's answers: for a run with
    /// no step to read them (a fleet's device, a double serving without a scenario or past its
    /// own steps), so a link, idle or closed, holds none of its messages.
    pub fn keep_nothing(&self) {
        self.inbox.keep_nothing();
        self.answers_kept
            .store(false, std::sync::atomic::Ordering::Relaxed);
        if let Ok(mut answers) = self.answers.lock() {
            answers.clear();
        }
    }

    /// Waits until this double has answered request `id` of `link`, at most until the deadline;
    /// gives its answer, `{result}` or `{error}`.
    pub async fn wait_answer(&self, link: u32, id: &Value, deadline: Instant) -> Option<Value> {
        loop {
            let changed = self.answers_changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let found = self.answers.lock().ok().and_then(|answers| {
                answers
                    .iter()
                    .rev()
                    .find(|(l, i, _)| *l == link && i == id)
                    .map(|(_, _, answer)| answer.clone())
            });
            if found.is_some() {
                return found;
            }
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                return None;
            }
        }
    }

    /// The link with this number.
    pub fn link(&self, number: u32) -> Option<Arc<Peer>> {
        let links = self.links.lock().ok()?;
        links
            .iter()
            .find(|l| l.peer.link() == number)
            .map(|l| l.peer.clone())
    }

    fn on_event(&self, peer: &Arc<Peer>, event: LinkEvent) {
        let Some(me) = self.me.upgrade() else { return };
        self.behaviour.observe(&me, peer, &event);
        match event {
            LinkEvent::Request(request) => {
                // Routed before any step can see it: a request a handler holds is held by the
                // time an `expect` takes it, so a `reply` right after always finds it.
                // Copied only for an inbox that keeps it: a big request is not copied for
                // nothing.
                let raw = self.inbox.keeps().then(|| request.raw.clone());
                self.route(&me, peer, request);
                // Counted all the same.
                self.inbox.push(peer.link(), raw.unwrap_or_default());
            }
            LinkEvent::Notification { raw, .. } => self.inbox.push(peer.link(), raw),
            LinkEvent::Response { .. } => {}
            LinkEvent::Closed(info) => {
                if let Ok(mut links) = self.links.lock()
                    && let Some(record) = links.iter_mut().find(|l| Arc::ptr_eq(&l.peer, peer))
                {
                    record.closed = Some(info);
                }
                self.links_changed.notify_waiters();
            }
        }
    }

    fn route(&self, me: &Arc<Hub>, peer: &Arc<Peer>, request: IncomingRequest) {
        let Some(taken) = self.handlers.take(&request) else {
            if !self.behaviour.answer(me, peer, &request) {
                peer.respond(
                    &request.id,
                    Err(RpcError::new(
                        METHOD_NOT_FOUND,
                        format!("method not found: {}", request.method),
                    )),
                );
            }
            return;
        };
        self.journal.record(
            peer.link(),
            Direction::Event,
            json!({"event": "handler", "line": taken.line, "method": request.method}),
        );
        let template = match taken.answer {
            Answer::Hold => {
                if let Ok(mut held) = self.held.lock() {
                    held.push((peer.link(), request.id.clone()));
                }
                return;
            }
            Answer::Result(t) => Ok(t),
            Answer::Error(t) => Err(t),
        };
        let outcome = self.render_answer(&request, template);
        let peer = peer.clone();
        match taken.delay {
            None => {
                peer.respond(&request.id, outcome);
            }
            Some(delay) => {
                tokio::spawn(async move {
                    tokio::time::sleep(delay).await;
                    peer.respond(&request.id, outcome);
                });
            }
        }
    }

    /// Renders a handler's or reply step's answer: `${...}` substituted, with the request's
    /// `params` and `id` in scope. A template that cannot be rendered answers `-32603` and says why
    /// in the journal, so the run goes on and the report shows it.
    pub fn render_answer(
        &self,
        request: &IncomingRequest,
        template: Result<Value, Value>,
    ) -> Result<Value, RpcError> {
        let mut vars = self.vars.lock().map(|v| v.clone()).unwrap_or_default();
        vars.set("params", request.params.clone());
        vars.set("id", request.id.clone());
        let (is_ok, template) = match template {
            Ok(t) => (true, t),
            Err(t) => (false, t),
        };
        match substitute(&template, &vars) {
            Ok(value) if is_ok => Ok(value),
            Ok(value) => Err(
                serde_json::from_value::<RpcError>(value.clone()).unwrap_or_else(|_| RpcError {
                    code: crate::jsonrpc::INTERNAL_ERROR,
                    message: "scenario error".into(),
                    data: Some(value),
                }),
            ),
            Err(e) => {
                tracing::error!("scenario answer could not be rendered: {e}");
                Err(RpcError::new(
                    crate::jsonrpc::INTERNAL_ERROR,
                    format!("scenario error: {e}"),
                ))
            }
        }
    }
}
