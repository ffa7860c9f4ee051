//! The requests in flight, both ways: ours waiting for answers (each with its deadline, and
//! the ids that timed out, so a late answer is not a stray one), and the peer's waiting for
//! ours.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::oneshot;

use super::pending::{EXPIRED_KEPT, Pending};
use super::{Peer, RequestError, id_key};
use crate::jsonrpc::message::{Message, RpcError};
use crate::jsonrpc::watch::Part;
use crate::size::approx_bytes;

impl Peer {
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
}
