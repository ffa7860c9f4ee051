//! The recording proxy: sits between a real device and a real instance and passes everything
//! through unchanged (discovery and the rest of the HTTP API, and the link), keeping a journal
//! of the link's messages and of each HTTP exchange.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use harness::journal::{Direction, Journal};
use harness::lembas::LINK_PATH;
use harness::transport::ws_client::{ClientRequest, ConnectError, connect};
use harness::transport::ws_server::LinkUpgrade;
use harness::transport::{CloseInfo, Connection, FrameLimits, Incoming, Outgoing};
use serde_json::{Value, json};

use super::draft::Recorded;
use crate::RecordError;

/// How many link messages a recording keeps for its drafts (the journal file has them all).
pub const MESSAGES_KEPT: usize = 20_000;

/// How long the upstream instance may take to accept a link or a connection.
const UPSTREAM_PATIENCE: Duration = Duration::from_secs(30);

/// How long the upstream instance may go quiet within one answer (a streamed chat completion
/// pauses between its chunks).
const UPSTREAM_QUIET: Duration = Duration::from_secs(120);

/// The largest HTTP body passed through.
const BODY_BYTES_MAX: usize = 64 * 1024 * 1024;

/// Headers that belong to one hop, not passed on.
const HOP_HEADERS: [&str; 6] = [
    "connection",
    "content-length",
    "host",
    "keep-alive",
    "transfer-encoding",
    "upgrade",
];

/// A recording in progress.
pub struct Recorder {
    upstream: String,
    journal: Arc<Journal>,
    messages: Mutex<Vec<Recorded>>,
    dropped: AtomicU32,
    next_link: AtomicU32,
    http: reqwest::Client,
    limits: FrameLimits,
}

impl Recorder {
    /// A recorder in front of the instance at `upstream` (`http://host:port`), writing its
    /// journal to `journal`.
    pub fn new(upstream: &str, journal: Arc<Journal>) -> Result<Arc<Recorder>, RecordError> {
        // Passed through as they come: a redirect goes back to the device, and an answer streams
        // (its pacing is part of what is recorded), bounded by a pause, not by its length.
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(UPSTREAM_PATIENCE)
            .read_timeout(UPSTREAM_QUIET)
            .build()
            .map_err(RecordError::HttpClient)?;
        Ok(Arc::new(Recorder {
            upstream: upstream.trim_end_matches('/').to_string(),
            journal,
            messages: Mutex::new(Vec::new()),
            dropped: AtomicU32::new(0),
            next_link: AtomicU32::new(0),
            http,
            limits: FrameLimits::default(),
        }))
    }

    /// The link messages recorded so far, in order.
    pub fn messages(&self) -> Vec<Recorded> {
        self.messages
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// How many link messages were not kept for the drafts (past [`MESSAGES_KEPT`]).
    pub fn dropped(&self) -> u32 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// A binary frame: not passed on (the link carries text), but said in the journal.
    fn binary(&self, link: u32, from_device: bool, bytes: usize) {
        let by = if from_device { "device" } else { "instance" };
        self.journal.record(
            link,
            Direction::Event,
            json!({ "event": "binary_frame", "by": by, "bytes": bytes }),
        );
    }

    fn keep(&self, link: u32, from_device: bool, text: &str) {
        let direction = if from_device {
            Direction::In
        } else {
            Direction::Out
        };
        self.journal.record_text(link, direction, text);
        let Ok(msg) = serde_json::from_str::<Value>(text) else {
            return;
        };
        let mut messages = self.messages.lock().unwrap_or_else(PoisonError::into_inner);
        if messages.len() < MESSAGES_KEPT {
            messages.push(Recorded {
                link,
                from_device,
                msg,
            });
        } else {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// The proxy's routes: the link, and everything else passed through.
pub fn router(recorder: Arc<Recorder>) -> Router {
    Router::new()
        .route(LINK_PATH, get(link))
        .fallback(forward)
        .layer(axum::extract::DefaultBodyLimit::max(BODY_BYTES_MAX))
        .with_state(recorder)
}

/// The upstream link URL: `ws://` for `http://`, `wss://` for `https://`.
fn upstream_link(upstream: &str, uri: &Uri) -> String {
    let base = match upstream.split_once("://") {
        Some(("https", rest)) => format!("wss://{rest}"),
        Some((_, rest)) => format!("ws://{rest}"),
        None => format!("ws://{upstream}"),
    };
    let query = uri.query().map(|q| format!("?{q}")).unwrap_or_default();
    format!("{base}{LINK_PATH}{query}")
}

/// A device dials: the proxy dials the instance with the same headers first, and takes the
/// device's upgrade only once the instance took its own (a refusal is passed back as it came).
async fn link(
    State(recorder): State<Arc<Recorder>>,
    ConnectInfo(remote): ConnectInfo<SocketAddr>,
    uri: Uri,
    headers: HeaderMap,
    upgrade: Result<LinkUpgrade, Response>,
) -> Response {
    let Ok(upgrade) = upgrade else {
        return (
            StatusCode::BAD_REQUEST,
            "a WebSocket upgrade is expected here",
        )
            .into_response();
    };
    let passed: Vec<(String, String)> = headers
        .iter()
        .filter(|(name, _)| {
            let name = name.as_str();
            !HOP_HEADERS.contains(&name) && !name.starts_with("sec-websocket")
        })
        .filter_map(|(name, value)| {
            value
                .to_str()
                .ok()
                .map(|v| (name.to_string(), v.to_string()))
        })
        .collect();
    let request = ClientRequest {
        url: upstream_link(&recorder.upstream, &uri),
        bearer_token: None,
        headers: passed,
        timeout: UPSTREAM_PATIENCE,
    };
    let instance = match connect(request, recorder.limits).await {
        Ok(instance) => instance,
        Err(ConnectError::Refused { status, body }) => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY);
            return (status, body).into_response();
        }
        Err(e) => {
            return (StatusCode::BAD_GATEWAY, format!("the instance: {e}")).into_response();
        }
    };
    let link = recorder.next_link.fetch_add(1, Ordering::Relaxed) + 1;
    recorder.journal.record(
        link,
        Direction::Event,
        json!({ "event": "linked", "device": remote.to_string() }),
    );
    let limits = recorder.limits;
    harness::transport::ws_server::accept(upgrade, limits, remote.to_string(), move |device| {
        tokio::spawn(pump(recorder, link, device, instance));
    })
}

/// Passes each message both ways, recording it, until either side closes; the close goes on to
/// the other side as it came.
async fn pump(recorder: Arc<Recorder>, link: u32, device: Connection, instance: Connection) {
    let Connection {
        outgoing: to_device,
        incoming: mut from_device,
        ..
    } = device;
    let Connection {
        outgoing: to_instance,
        incoming: mut from_instance,
        ..
    } = instance;
    let closed = loop {
        tokio::select! {
            incoming = from_device.recv() => match incoming {
                Some(Incoming::Text(text)) => {
                    recorder.keep(link, true, &text);
                    let _ = to_instance.send(Outgoing::Text(text));
                }
                Some(Incoming::Binary(bytes)) => recorder.binary(link, true, bytes.len()),
                Some(Incoming::NotUtf8(_)) => recorder.binary(link, true, 0),
                Some(Incoming::Closed(info)) => {
                    let _ = to_instance.send(Outgoing::Close(close_of(info.as_ref())));
                    break ("device", info);
                }
                None => {
                    let _ = to_instance.send(Outgoing::Close(close_of(None)));
                    break ("device", None);
                }
            },
            incoming = from_instance.recv() => match incoming {
                Some(Incoming::Text(text)) => {
                    recorder.keep(link, false, &text);
                    let _ = to_device.send(Outgoing::Text(text));
                }
                Some(Incoming::Binary(bytes)) => recorder.binary(link, false, bytes.len()),
                Some(Incoming::NotUtf8(_)) => recorder.binary(link, false, 0),
                Some(Incoming::Closed(info)) => {
                    let _ = to_device.send(Outgoing::Close(close_of(info.as_ref())));
                    break ("instance", info);
                }
                None => {
                    let _ = to_device.send(Outgoing::Close(close_of(None)));
                    break ("instance", None);
                }
            },
        }
    };
    recorder.journal.record(
        link,
        Direction::Event,
        json!({ "event": "closed", "by": closed.0, "code": closed.1.map(|c| c.code) }),
    );
}

/// The close to pass on: the one that came, or a normal one when the side vanished. Codes a
/// close frame may not carry (1005 "no status", 1006 "abnormal") become a normal close.
fn close_of(info: Option<&CloseInfo>) -> CloseInfo {
    match info {
        Some(info) if !matches!(info.code, 1005 | 1006 | 1015) => info.clone(),
        Some(info) => CloseInfo {
            code: harness::transport::CLOSE_NORMAL,
            reason: info.reason.clone(),
        },
        None => CloseInfo {
            code: harness::transport::CLOSE_NORMAL,
            reason: String::new(),
        },
    }
}

/// Any other request: passed to the instance as it came, its answer passed back as it came.
async fn forward(
    State(recorder): State<Arc<Recorder>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri
        .path_and_query()
        .map_or_else(|| uri.path().to_string(), |p| p.as_str().to_string());
    let Ok(upstream_method) = reqwest::Method::from_bytes(method.as_str().as_bytes()) else {
        return (StatusCode::METHOD_NOT_ALLOWED, "not a method").into_response();
    };
    let mut request = recorder
        .http
        .request(upstream_method, format!("{}{path}", recorder.upstream))
        .body(body);
    for (name, value) in &headers {
        if !HOP_HEADERS.contains(&name.as_str()) {
            request = request.header(name.as_str(), value.as_bytes());
        }
    }
    let answer = match request.send().await {
        Ok(answer) => answer,
        Err(e) => {
            return (StatusCode::BAD_GATEWAY, format!("the instance: {e}")).into_response();
        }
    };
    let status = answer.status().as_u16();
    let mut passed = HeaderMap::new();
    for (name, value) in answer.headers() {
        if !HOP_HEADERS.contains(&name.as_str())
            && let (Ok(name), Ok(value)) = (
                header::HeaderName::from_bytes(name.as_str().as_bytes()),
                header::HeaderValue::from_bytes(value.as_bytes()),
            )
        {
            passed.append(name, value);
        }
    }
    recorder.journal.record(
        0,
        Direction::Event,
        json!({ "method": "http", "params": { "method": method.as_str(), "path": path, "status": status } }),
    );
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY);
    let body = axum::body::Body::from_stream(answer.bytes_stream());
    (status, passed, body).into_response()
}
