//! One JSON-RPC 2.0 peer over one [`Connection`]: ids, the table of pending requests with their
//! deadlines, the journal, and findings for whatever the peer sends that is not JSON-RPC.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot, watch};

use super::gate::{Gate, Passage};
use super::message::{Malformed, Message, RpcError, classify};
use super::watch::{MessageWatch, Part};
use crate::finding::{Finding, Findings};
use crate::journal::{Direction, Journal};
use crate::size::approx_bytes;
use crate::transport::{CloseInfo, Connection, Incoming, Outbox, Outgoing};

/// Rule ids for what any JSON-RPC peer must not do; they bind both sides.
pub mod rules {
    /// Every message is JSON.
    pub const NOT_JSON: &str = "jsonrpc.json";
    /// Every message is a JSON-RPC 2.0 object.
    pub const ENVELOPE: &str = "jsonrpc.envelope";
    /// A response answers a request that was sent and not yet answered.
    pub const UNKNOWN_RESPONSE: &str = "jsonrpc.response.id";
    /// A request's id is not that of another request of its sender still waiting for an answer.
    pub const REQUEST_ID: &str = "jsonrpc.request.id";
    /// Messages are text frames.
    pub const BINARY: &str = "jsonrpc.text";
}

/// A request the peer sent us, waiting for an answer.
#[derive(Debug, Clone)]
pub struct IncomingRequest {
    /// The peer's id.
    pub id: Value,
    /// The method.
    pub method: String,
    /// The params, or `null`.
    pub params: Value,
    /// The whole message as received.
    pub raw: Value,
}

/// Something that happened on a link, handed to the [`Dispatch`] in arrival order.
#[derive(Debug, Clone)]
pub enum LinkEvent {
    /// The peer sent a request.
    Request(IncomingRequest),
    /// The peer sent a notification.
    Notification {
        /// The method.
        method: String,
        /// The params, or `null`.
        params: Value,
        /// The whole message as received.
        raw: Value,
    },
    /// The peer answered one of our requests (already delivered to whoever waits for it).
    Response {
        /// The method of the request it answers.
        method: String,
        /// What we sent as params (with strings over 64 KiB cut, when they held over 1 MiB).
        request_params: Value,
        /// The result or the error.
        outcome: Result<Value, RpcError>,
        /// The whole message as received.
        raw: Value,
    },
    /// The link ended: `Some` with the peer's close code, `None` when it vanished.
    Closed(Option<CloseInfo>),
}

/// Where a peer's traffic goes: the scenario engine, the protocol model, the monitors.
pub trait Dispatch: Send + Sync + 'static {
    /// Called for every event, in order, from the link's reader task. Must not block: spawn
    /// anything slow.
    fn on_event(&self, peer: &Arc<Peer>, event: LinkEvent);

    /// Called for every message this side sends, after it went out.
    fn on_sent(&self, _peer: &Arc<Peer>, _message: &Value) {}
}

/// Why an outgoing request got no answer.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RequestError {
    /// The deadline passed.
    #[error("no answer to `{method}` within {after:?}")]
    Timeout {
        /// The method asked.
        method: String,
        /// How long we waited.
        after: Duration,
    },
    /// The link closed before the answer came.
    #[error("the link closed before `{method}` was answered")]
    Closed {
        /// The method asked.
        method: String,
    },
    /// The request was never sent: the link's opening request had not been answered with a
    /// result when its deadline passed.
    #[error(
        "`{method}` was never sent: `{opener}` was not answered with a result within {after:?}"
    )]
    Held {
        /// The method asked.
        method: String,
        /// The request that opens the link.
        opener: String,
        /// How long it waited.
        after: Duration,
    },
}

/// Settings of one peer.
#[derive(Clone, Default)]
pub struct PeerConfig {
    /// The link's number in this run, counting from 1.
    pub link: u32,
    /// Sees every message read and sent (the protocol's always-on checks, misbehaviours).
    pub watch: Option<Arc<dyn MessageWatch>>,
    /// How the link's frames are read (JSON-RPC unless the family says otherwise).
    pub framing: super::framing::Framing,
    /// The request that opens the link: until it is answered with a result, every other
    /// request and notification this side sends is held, in order, and sent once it is.
    pub opener: Option<&'static str>,
}

impl std::fmt::Debug for PeerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerConfig")
            .field("link", &self.link)
            .field("watch", &self.watch.is_some())
            .field("framing", &self.framing)
            .field("opener", &self.opener)
            .finish()
    }
}

struct Pending {
    method: String,
    params: Value,
    reply: oneshot::Sender<Result<Value, RpcError>>,
}

/// How many timed-out request ids are remembered, so a late answer is not taken for a stray one.
const EXPIRED_KEPT: usize = 1024;

/// Our requests waiting for answers, and what the table knows besides.
#[derive(Default)]
struct PendingTable {
    waiting: HashMap<String, Pending>,
    /// Ids we stopped waiting for (timed out), newest last.
    expired: std::collections::VecDeque<String>,
    /// The link ended: nothing will be answered any more.
    closed: bool,
}

/// One JSON-RPC peer on one link.
pub struct Peer {
    link: u32,
    remote: String,
    out: Outbox,
    next_id: AtomicI64,
    pending: Mutex<PendingTable>,
    /// The peer's requests not yet answered, with their methods (an id may come again once
    /// answered).
    unanswered: Mutex<HashMap<String, String>>,
    watch: Option<Arc<dyn MessageWatch>>,
    framing: super::framing::Framing,
    gate: Option<Gate>,
    journal: Arc<Journal>,
    findings: Arc<Findings>,
    dispatch: Arc<dyn Dispatch>,
    closed_tx: watch::Sender<Option<Option<CloseInfo>>>,
    we_closed: AtomicBool,
}

impl std::fmt::Debug for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Peer")
            .field("link", &self.link)
            .field("remote", &self.remote)
            .finish()
    }
}

/// Ids are compared by their JSON text so that `1` and `"1"` stay different, as the spec wants.
fn id_key(id: &Value) -> String {
    id.to_string()
}

impl Peer {
    /// Starts a peer on a connection: spawns the reader task and returns the handle.
    pub fn start(
        connection: Connection,
        config: PeerConfig,
        journal: Arc<Journal>,
        findings: Arc<Findings>,
        dispatch: Arc<dyn Dispatch>,
    ) -> Arc<Peer> {
        Self::start_after(connection, config, journal, findings, dispatch, |_| {})
    }

    /// Like [`Peer::start`], running `before_reading` before the first message is read: whoever
    /// tracks the link is ready for its messages (a peer may speak the moment the link opens).
    pub fn start_after(
        connection: Connection,
        config: PeerConfig,
        journal: Arc<Journal>,
        findings: Arc<Findings>,
        dispatch: Arc<dyn Dispatch>,
        before_reading: impl FnOnce(&Arc<Peer>),
    ) -> Arc<Peer> {
        let Connection {
            outgoing,
            incoming,
            peer: remote,
        } = connection;
        let (closed_tx, _) = watch::channel(None);
        let peer = Arc::new(Peer {
            link: config.link,
            remote,
            out: outgoing,
            next_id: AtomicI64::new(1),
            pending: Mutex::new(PendingTable::default()),
            unanswered: Mutex::new(HashMap::new()),
            watch: config.watch,
            framing: config.framing,
            gate: config.opener.map(Gate::new),
            journal,
            findings,
            dispatch,
            closed_tx,
            we_closed: AtomicBool::new(false),
        });
        peer.journal.record(
            peer.link,
            Direction::Event,
            json!({"event": "open", "peer": peer.remote}),
        );
        before_reading(&peer);
        tokio::spawn(Arc::clone(&peer).read_loop(incoming));
        peer
    }

    /// This link's number in the run.
    pub fn link(&self) -> u32 {
        self.link
    }

    /// Who the peer is (its address).
    pub fn remote(&self) -> &str {
        &self.remote
    }

    /// Whether the link has ended.
    pub fn is_closed(&self) -> bool {
        self.closed_tx.borrow().is_some()
    }

    /// Waits until the link ends; gives the peer's close code (`None` if it vanished).
    pub async fn closed(&self) -> Option<CloseInfo> {
        let mut rx = self.closed_tx.subscribe();
        loop {
            if let Some(info) = rx.borrow_and_update().clone() {
                return info;
            }
            if rx.changed().await.is_err() {
                return None;
            }
        }
    }

    /// Whether this side closed the link (so its end is not the peer's doing).
    pub fn closed_by_us(&self) -> bool {
        self.we_closed.load(Ordering::Relaxed)
    }

    /// Sends a notification.
    pub fn notify(self: &Arc<Self>, method: &str, mut params: Value) {
        self.bend(Part::Params, method, &mut params);
        let msg = Message::Notification {
            method: method.into(),
            params: Some(params),
        };
        self.send_value(msg.into_value());
    }

    /// Sends any JSON value as one message, as is (for scenarios that send raw or broken text).
    pub fn send_value(self: &Arc<Self>, value: Value) {
        crate::heavy::run(approx_bytes(&value), || {
            let text = value.to_string();
            self.send_out(text, &value);
        });
    }

    /// Sends a frame of a typed family as the protocol's own message: the watch may bend it
    /// first (a shape misbehaviour), as it does a JSON-RPC double's notifications. A frame
    /// that names no kind goes as it is.
    pub fn send_frame(self: &Arc<Self>, mut frame: Value) {
        if let super::framing::Framing::Typed(typed) = &self.framing
            && let Some(kind) = frame.get(typed.kind_key).and_then(Value::as_str)
        {
            let kind = kind.to_string();
            self.bend(Part::Params, &kind, &mut frame);
        }
        self.send_value(frame);
    }

    /// Sends a raw text message; `parsed`, when the caller has it, is what the journal and the
    /// dispatch see of it (else the text is parsed, or kept as a string when it is not JSON).
    pub fn send_text(self: &Arc<Self>, text: String, parsed: Option<&Value>) {
        crate::heavy::run(text.len(), || match parsed {
            Some(value) => self.send_out(text, value),
            None => {
                let value =
                    serde_json::from_str(&text).unwrap_or_else(|_| Value::String(text.clone()));
                self.send_out(text, &value);
            }
        });
    }

    /// Journals `value` (the message as a value: parsing its text back would cost a second
    /// parse), sends `text`, and lets the dispatch see what went; or holds it at a closed gate,
    /// to be journaled and sent when the gate opens.
    fn send_out(self: &Arc<Self>, text: String, value: &Value) {
        let text = match &self.gate {
            Some(gate) => {
                let id = value.get("method").and(value.get("id")).map(id_key);
                match gate.pass(text, value, id) {
                    Passage::Go(text) => text,
                    Passage::Held => return,
                }
            }
            None => text,
        };
        self.journal.record_ref(self.link, Direction::Out, value);
        if self.out.send(Outgoing::Text(text)).is_err() {
            tracing::debug!(link = self.link, "send on a closed link dropped");
            return;
        }
        self.dispatch.on_sent(self, value);
    }

    /// Sends a request and waits for its answer, at most `timeout`.
    pub async fn request(
        self: &Arc<Self>,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Result<Value, RpcError>, RequestError> {
        self.begin_request(method, params, timeout).await
    }

    /// Sends a request now, and gives the wait for its answer (at most `timeout`) to run
    /// later: a scenario that sends requests in a row gets them on the wire in that order.
    pub fn begin_request(
        self: &Arc<Self>,
        method: &str,
        mut params: Value,
        timeout: Duration,
    ) -> impl std::future::Future<Output = Result<Result<Value, RpcError>, RequestError>> + Send + 'static
    {
        self.bend(Part::Params, method, &mut params);
        let id = json!(self.next_id.fetch_add(1, Ordering::Relaxed));
        let (tx, rx) = oneshot::channel();
        // What the answer is judged against (ids, paths, modes, a chat's context): kept whole,
        // but for a request of over a mebibyte, whose long strings are kept cut rather than
        // copying the whole of it.
        let kept_params = match approx_bytes(&params) < crate::heavy::HEAVY_BYTES {
            true => params.clone(),
            false => crate::size::cut_clone(&params),
        };
        match self.pending.lock() {
            Ok(mut pending) if !pending.closed => {
                pending.waiting.insert(
                    id_key(&id),
                    Pending {
                        method: method.into(),
                        params: kept_params,
                        reply: tx,
                    },
                );
            }
            // On a link that has ended the answer can never come: `tx` is dropped when this
            // returns, so the wait below ends at once with `Closed`, not at the deadline.
            _ => {}
        }
        let msg = Message::Request {
            id: id.clone(),
            method: method.into(),
            params: Some(params),
        };
        self.send_value(msg.into_value());
        let (peer, method) = (Arc::clone(self), method.to_string());
        async move {
            match tokio::time::timeout(timeout, rx).await {
                Ok(Ok(outcome)) => Ok(outcome),
                Ok(Err(_)) => Err(RequestError::Closed { method }),
                Err(_) => {
                    let never_sent = peer.gate.as_ref().is_some_and(|g| g.withdraw(&id_key(&id)));
                    if let Ok(mut pending) = peer.pending.lock() {
                        pending.waiting.remove(&id_key(&id));
                        pending.expired.push_back(id_key(&id));
                        if pending.expired.len() > EXPIRED_KEPT {
                            pending.expired.pop_front();
                        }
                    }
                    match (never_sent, &peer.gate) {
                        (true, Some(gate)) => Err(RequestError::Held {
                            method,
                            opener: gate.opener().into(),
                            after: timeout,
                        }),
                        _ => Err(RequestError::Timeout {
                            method,
                            after: timeout,
                        }),
                    }
                }
            }
        }
    }

    /// How many of the peer's requests are not answered yet.
    pub fn unanswered(&self) -> usize {
        self.unanswered.lock().map(|u| u.len()).unwrap_or(0)
    }

    /// Whether the peer's request `id` came and is not answered yet.
    pub fn is_unanswered(&self, id: &Value) -> bool {
        self.unanswered
            .lock()
            .map(|u| u.contains_key(&id_key(id)))
            .unwrap_or(false)
    }

    /// Answers a request of the peer's. Returns false (and sends nothing) when no request with
    /// this id is waiting (answered already, or never asked), so a scenario that replies to a
    /// request the default behaviour took can say so.
    pub fn respond(self: &Arc<Self>, id: &Value, mut outcome: Result<Value, RpcError>) -> bool {
        let method = self
            .unanswered
            .lock()
            .ok()
            .and_then(|mut u| u.remove(&id_key(id)));
        let Some(method) = method else {
            return false;
        };
        if let Ok(result) = &mut outcome {
            self.bend(Part::Result, &method, result);
        }
        let msg = Message::Response {
            id: id.clone(),
            outcome,
        };
        self.send_value(msg.into_value());
        true
    }

    /// Closes the link with a code and reason.
    pub fn close(&self, code: u16, reason: &str) {
        self.we_closed.store(true, Ordering::Relaxed);
        self.journal.record(
            self.link,
            Direction::Event,
            json!({"event": "close_sent", "code": code, "reason": reason}),
        );
        let _ = self.out.send(Outgoing::Close(CloseInfo {
            code,
            reason: reason.into(),
        }));
    }

    /// Ends the link without a close frame, as a crashed process or a lost network does.
    pub fn drop_link(&self) {
        self.we_closed.store(true, Ordering::Relaxed);
        self.journal
            .record(self.link, Direction::Event, json!({"event": "dropped"}));
        let _ = self.out.send(Outgoing::Drop);
    }

    /// Ends only our sending direction, without a close frame, and goes on reading: the peer
    /// reads the end of the stream while what it sends still arrives.
    pub fn half_close(&self) {
        self.we_closed.store(true, Ordering::Relaxed);
        self.journal
            .record(self.link, Direction::Event, json!({"event": "half_closed"}));
        let _ = self.out.send(Outgoing::HalfClose);
    }

    /// Sends the peer nothing for `pause`: what is sent meanwhile waits, then goes in order.
    pub fn stall(&self, pause: std::time::Duration) {
        self.journal.record(
            self.link,
            Direction::Event,
            json!({"event": "stalled", "ms": pause.as_millis()}),
        );
        let _ = self.out.send(Outgoing::Stall(pause));
    }

    /// Returns once what is queued for the peer is down to a little (at once when it is): a
    /// producer of its own output (a terminal's reader) waits for this before it makes more, so
    /// a peer that stops reading holds it back instead of filling our memory.
    pub async fn writable(&self) {
        self.out.writable().await;
    }

    async fn read_loop(self: Arc<Self>, mut incoming: mpsc::Receiver<Incoming>) {
        let close = loop {
            // Backpressure: while what we owe the peer piles up unread, read nothing more from
            // it (each request would add an answer); TCP then holds the peer back. The writer
            // ends a connection whose peer reads nothing for long, which frees this.
            if self.out.is_full() {
                self.journal.record(
                    self.link,
                    Direction::Event,
                    json!({"event": "reading_paused", "queued_bytes": self.out.queued_bytes()}),
                );
                self.out.writable().await;
            }
            match incoming.recv().await {
                Some(Incoming::Text(text)) => {
                    crate::heavy::run(text.len(), || self.on_text(&text));
                }
                Some(Incoming::Binary(bytes)) => {
                    self.journal.record(
                        self.link,
                        Direction::In,
                        json!({"binary_frame_bytes": bytes.len()}),
                    );
                    self.find(Finding::new(
                        self.framing.not_text_rule().unwrap_or(rules::BINARY),
                        format!("a binary frame of {} bytes", bytes.len()),
                    ));
                }
                Some(Incoming::NotUtf8(why)) => {
                    self.journal.record(
                        self.link,
                        Direction::In,
                        json!({"text_frame_not_utf8": why}),
                    );
                    self.find(Finding::new(
                        self.framing.not_text_rule().unwrap_or(rules::BINARY),
                        format!(
                            "a text frame that is not UTF-8 ({why}); the link is closed with 1007"
                        ),
                    ));
                }
                Some(Incoming::Closed(info)) => break info,
                None => break None,
            }
        };
        self.journal.record(
            self.link,
            Direction::Event,
            json!({"event": "closed", "code": close.as_ref().map(|c| c.code), "reason": close.as_ref().map(|c| c.reason.clone())}),
        );
        // Whoever still waits for an answer learns the link is gone: dropping the senders.
        if let Ok(mut pending) = self.pending.lock() {
            pending.closed = true;
            pending.waiting.clear();
        }
        self.closed_tx.send_replace(Some(close.clone()));
        self.dispatch.on_event(&self, LinkEvent::Closed(close));
    }

    /// Sends what the gate held, in order: the link's opening request has its answer.
    fn open_gate(self: &Arc<Self>) {
        let Some(gate) = &self.gate else {
            return;
        };
        let mut went = Vec::new();
        gate.open(|held| {
            self.journal
                .record_ref(self.link, Direction::Out, &held.value);
            if self.out.send(Outgoing::Text(held.text)).is_ok() {
                went.push(held.value);
            }
        });
        for value in &went {
            self.dispatch.on_sent(self, value);
        }
    }

    /// Lets the watch change what this side is about to send (a misbehaviour).
    fn bend(&self, part: Part, method: &str, value: &mut Value) {
        if let Some(watch) = &self.watch {
            watch.outgoing(part, method, value);
        }
    }

    /// Lets the watch check what the other side sent.
    fn watch_incoming(&self, part: Part, method: &str, value: Option<&Value>) {
        if let Some(watch) = &self.watch {
            for finding in watch.incoming(part, method, value.unwrap_or(&Value::Null)) {
                self.find(finding);
            }
        }
    }

    fn find(&self, finding: Finding) {
        self.findings.push(finding.on_link(self.link));
    }

    /// Reads a frame of a typed family: a JSON object naming its kind, handed on as a
    /// notification of that kind whose `raw` is the whole frame (and whose `params` is null:
    /// the frame has no params of its own, and a big one is not copied for nothing).
    fn on_typed(self: &Arc<Self>, text: &str, typed: &super::framing::TypedFrames) {
        let parsed: Value = match serde_json::from_str(text) {
            Ok(value) => value,
            Err(e) => {
                self.journal.record_text(self.link, Direction::In, text);
                self.find(
                    Finding::new(typed.not_json, format!("a frame that is not JSON: {e}"))
                        .with_detail(truncate(text, 2000)),
                );
                return;
            }
        };
        self.journal.record_ref(self.link, Direction::In, &parsed);
        let Some(kind) = parsed
            .get(typed.kind_key)
            .and_then(Value::as_str)
            .map(str::to_string)
        else {
            let what = match &parsed {
                Value::Object(_) => format!("an object without a string `{}`", typed.kind_key),
                _ => "JSON that is not an object".to_string(),
            };
            self.find(
                Finding::new(typed.not_typed, format!("a frame of {what}"))
                    .with_detail(truncate(text, 2000)),
            );
            return;
        };
        self.watch_incoming(Part::Params, &kind, Some(&parsed));
        self.dispatch.on_event(
            self,
            LinkEvent::Notification {
                method: kind,
                params: Value::Null,
                raw: parsed,
            },
        );
    }

    fn on_text(self: &Arc<Self>, text: &str) {
        if let super::framing::Framing::Typed(typed) = &self.framing {
            return self.on_typed(text, typed);
        }
        let classified = classify(text);
        // Journaled before anything it leads to, from the value already parsed.
        match &classified {
            Ok((raw, _)) => self.journal.record_ref(self.link, Direction::In, raw),
            Err(_) => self.journal.record_text(self.link, Direction::In, text),
        }
        let (raw, message) = match classified {
            Ok(ok) => ok,
            Err(bad) => {
                let rule = match bad {
                    Malformed::NotJson(_) => rules::NOT_JSON,
                    Malformed::NotJsonRpc(_) => rules::ENVELOPE,
                };
                self.find(Finding::new(rule, bad.to_string()).with_detail(truncate(text, 2000)));
                // JSON-RPC answers what is not JSON (id null) and a broken request (its id); a
                // broken *response* gets no answer, which could otherwise settle one of the
                // peer's own requests.
                let parsed = serde_json::from_str::<Value>(text).ok();
                let answer = match &parsed {
                    None => Some((Value::Null, super::message::PARSE_ERROR)),
                    // An id that is no string or integer is not one to echo: JSON-RPC says
                    // null when the request's id cannot be made out.
                    Some(v) if v.get("method").is_some() => Some((
                        v.get("id")
                            .filter(|id| id.is_string() || id.is_i64() || id.is_u64())
                            .cloned()
                            .unwrap_or(Value::Null),
                        super::message::INVALID_REQUEST,
                    )),
                    Some(_) => None,
                };
                if let Some((id, code)) = answer {
                    self.send_value(
                        Message::Response {
                            id,
                            outcome: Err(RpcError::new(code, bad.to_string())),
                        }
                        .into_value(),
                    );
                }
                return;
            }
        };
        let event = match message {
            Message::Request { id, method, params } => {
                let reused = self.unanswered.lock().is_ok_and(|mut unanswered| {
                    let key = id_key(&id);
                    let reused = unanswered.contains_key(&key);
                    if !reused {
                        unanswered.insert(key, method.clone());
                    }
                    reused
                });
                if reused {
                    // Its answer could not be told from the first one's: it is refused, and
                    // the first is still answered.
                    self.find(
                        Finding::new(
                            rules::REQUEST_ID,
                            format!("request `{method}` has id {id}, which a request not yet answered has"),
                        )
                        .with_detail(truncate(text, 2000)),
                    );
                    self.send_value(
                        Message::Response {
                            id,
                            outcome: Err(RpcError::new(
                                super::message::INVALID_REQUEST,
                                "the id is that of a request not yet answered",
                            )),
                        }
                        .into_value(),
                    );
                    return;
                }
                self.watch_incoming(Part::Params, &method, params.as_ref());
                LinkEvent::Request(IncomingRequest {
                    id,
                    method,
                    params: params.unwrap_or(Value::Null),
                    raw,
                })
            }
            Message::Notification { method, params } => {
                self.watch_incoming(Part::Params, &method, params.as_ref());
                LinkEvent::Notification {
                    method,
                    params: params.unwrap_or(Value::Null),
                    raw,
                }
            }
            Message::Response { id, outcome } => {
                let (waiting, expired) = match self.pending.lock() {
                    Ok(mut p) => {
                        let key = id_key(&id);
                        let expired = p.expired.contains(&key);
                        (p.waiting.remove(&key), expired)
                    }
                    Err(_) => (None, false),
                };
                let Some(Pending {
                    method,
                    params,
                    reply,
                }) = waiting
                else {
                    if expired {
                        // JSON-RPC does not forbid a late answer: we had stopped waiting, that is all.
                        tracing::debug!(link = self.link, %id, "an answer after its request timed out");
                        return;
                    }
                    self.find(
                        Finding::new(rules::UNKNOWN_RESPONSE, format!("a response with id {id}, which answers no request of ours still waiting"))
                            .with_detail(truncate(text, 2000)),
                    );
                    return;
                };
                // Monitors see the answer before the waiter wakes, so a finding about it is
                // recorded before a scenario that waited for it can finish.
                if let Ok(result) = &outcome {
                    self.watch_incoming(Part::Result, &method, Some(result));
                }
                let opens =
                    outcome.is_ok() && self.gate.as_ref().is_some_and(|g| g.opener() == method);
                self.dispatch.on_event(
                    self,
                    LinkEvent::Response {
                        method,
                        request_params: params,
                        outcome: outcome.clone(),
                        raw,
                    },
                );
                if opens {
                    self.open_gate();
                }
                let _ = reply.send(outcome);
                return;
            }
        };
        self.dispatch.on_event(self, event);
    }
}

fn truncate(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes in all)", &text[..end], text.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Quiet;

    impl Dispatch for Quiet {
        fn on_event(&self, _: &Arc<Peer>, _: LinkEvent) {}
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_on_a_closed_link_fails_at_once_not_at_its_deadline() {
        let (outgoing, _sent) = crate::transport::outbox();
        let (to_peer, incoming) = mpsc::channel(4);
        let peer = Peer::start(
            Connection {
                outgoing,
                incoming,
                peer: "test".into(),
            },
            PeerConfig {
                link: 1,
                ..Default::default()
            },
            Arc::new(Journal::in_memory()),
            Arc::new(Findings::default()),
            Arc::new(Quiet),
        );
        to_peer
            .send(Incoming::Closed(None))
            .await
            .expect("the reader takes it");
        peer.closed().await;
        let started = tokio::time::Instant::now();
        let answer = peer.request("m", json!({}), Duration::from_secs(5)).await;
        assert_eq!(answer, Err(RequestError::Closed { method: "m".into() }));
        assert!(started.elapsed() < Duration::from_millis(1));
    }

    #[tokio::test]
    async fn a_broken_request_is_answered_with_its_id_only_when_that_is_an_id() {
        let (outgoing, mut sent) = crate::transport::outbox();
        let (to_peer, incoming) = mpsc::channel(16);
        let _peer = Peer::start(
            Connection {
                outgoing,
                incoming,
                peer: "test".into(),
            },
            PeerConfig::default(),
            Arc::new(Journal::in_memory()),
            Arc::new(Findings::default()),
            Arc::new(Quiet),
        );
        // Each is broken by its `jsonrpc`, so the peer answers it -32600.
        for (id, echoed) in [
            (json!(7), json!(7)),
            (json!("a"), json!("a")),
            (json!(1.5), Value::Null),
            (json!({"n": 1}), Value::Null),
            (json!([1]), Value::Null),
            (json!(true), Value::Null),
        ] {
            let text = json!({"jsonrpc": "1.0", "id": id, "method": "m"}).to_string();
            to_peer.send(Incoming::Text(text)).await.expect("read");
            let Some(Outgoing::Text(answer)) = sent.recv().await else {
                panic!("no answer to id {id}");
            };
            let (_, message) = classify(&answer).expect("the answer is JSON-RPC");
            assert!(
                matches!(&message, Message::Response { id, outcome: Err(e) } if *id == echoed && e.code == super::super::message::INVALID_REQUEST),
                "id {id}: {answer}"
            );
        }
    }
}
