//! Reading the link: each frame read, journaled and classified, handed to the dispatch as an
//! event; a response settles the request it answers; what is not JSON-RPC becomes a finding
//! (and, where JSON-RPC says so, an error answer).

use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::pending::Pending;
use super::{IncomingRequest, LinkEvent, Peer, id_key, rules};
use crate::finding::Finding;
use crate::journal::Direction;
use crate::jsonrpc::message::{Malformed, Message, RpcError, classify};
use crate::jsonrpc::watch::Part;
use crate::transport::Incoming;

impl Peer {
    /// Reads the link until it ends, then tells whoever waits that it has.
    pub(super) async fn read_loop(self: Arc<Self>, mut incoming: mpsc::Receiver<Incoming>) {
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

    /// Reads a frame of a typed family: a JSON object naming its kind, handed on as a
    /// notification of that kind whose `raw` is the whole frame (and whose `params` is null:
    /// the frame has no params of its own, and a big one is not copied for nothing).
    fn on_typed(self: &Arc<Self>, text: &str, typed: &crate::jsonrpc::framing::TypedFrames) {
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

    /// Reads one text frame: journaled first, then handed on as the event it is, or found
    /// wrong.
    fn on_text(self: &Arc<Self>, text: &str) {
        if let crate::jsonrpc::framing::Framing::Typed(typed) = &self.framing {
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
            Err(bad) => return self.on_malformed(text, bad),
        };
        let event = match message {
            Message::Request { id, method, params } => {
                if !self.take_request(text, &id, &method) {
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
            Message::Response { id, outcome } => return self.on_response(text, id, outcome, raw),
        };
        self.dispatch.on_event(self, event);
    }

    /// A frame that is not JSON, or not JSON-RPC: a finding, and the error answer JSON-RPC
    /// gives it.
    fn on_malformed(self: &Arc<Self>, text: &str, bad: Malformed) {
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
            None => Some((Value::Null, crate::jsonrpc::message::PARSE_ERROR)),
            // An id that is no string or integer is not one to echo: JSON-RPC says
            // null when the request's id cannot be made out.
            Some(v) if v.get("method").is_some() => Some((
                v.get("id")
                    .filter(|id| id.is_string() || id.is_i64() || id.is_u64())
                    .cloned()
                    .unwrap_or(Value::Null),
                crate::jsonrpc::message::INVALID_REQUEST,
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
    }

    /// Takes the peer's request `id` as waiting for our answer; false (with a finding and an
    /// error answer) when a request of that id still waits.
    fn take_request(self: &Arc<Self>, text: &str, id: &Value, method: &str) -> bool {
        let reused = self.unanswered.lock().is_ok_and(|mut unanswered| {
            let key = id_key(id);
            let reused = unanswered.contains_key(&key);
            if !reused {
                unanswered.insert(key, method.to_string());
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
                    id: id.clone(),
                    outcome: Err(RpcError::new(
                        crate::jsonrpc::message::INVALID_REQUEST,
                        "the id is that of a request not yet answered",
                    )),
                }
                .into_value(),
            );
        }
        !reused
    }

    /// A response: settles the request of ours it answers (the monitors and the dispatch see
    /// it first), or is a finding when it answers none still waiting.
    fn on_response(
        self: &Arc<Self>,
        text: &str,
        id: Value,
        outcome: Result<Value, RpcError>,
        raw: Value,
    ) {
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
                Finding::new(
                    rules::UNKNOWN_RESPONSE,
                    format!(
                        "a response with id {id}, which answers no request of ours still waiting"
                    ),
                )
                .with_detail(truncate(text, 2000)),
            );
            return;
        };
        // Monitors see the answer before the waiter wakes, so a finding about it is
        // recorded before a scenario that waited for it can finish.
        if let Ok(result) = &outcome {
            self.watch_incoming(Part::Result, &method, Some(result));
        }
        let opens = outcome.is_ok() && self.gate.as_ref().is_some_and(|g| g.opener() == method);
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
    }
}

/// `text` cut to at most `max` bytes (at a character boundary), saying how long it was: a
/// finding's detail shows the start of a huge frame, not all of it.
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
