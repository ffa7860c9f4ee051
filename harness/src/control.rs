//! The control API (`--control ADDR`): an HTTP API on either double for tests written in other
//! languages. A test program reads the run's state and journal, acts as the double's own side
//! would (every action a scenario's `act` can take), injects raw messages for fault tests, and
//! raises the signals `wait_for_signal` steps wait on. Every route needs the control token of
//! its own (`Authorization: Bearer …`), never a device token. `docs/control-api.yaml` describes
//! it; a test holds the two to each other.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::engine::{ActError, Actor, Cell, Hub};

/// Every route, as `(method, path)`: what the OpenAPI file must describe, no more, no less.
pub const ROUTES: &[(&str, &str)] = &[
    ("GET", "/v1/state"),
    ("GET", "/v1/journal"),
    ("POST", "/v1/act"),
    ("POST", "/v1/inject"),
    ("POST", "/v1/signals/{name}"),
];

/// The longest a journal read may wait for an entry.
pub const JOURNAL_WAIT_MAX: Duration = Duration::from_secs(30);

/// How many entries a journal page holds unless the request says fewer: a page is a copy of
/// messages the peer chose the size of.
pub const JOURNAL_PAGE_MAX: usize = 50;

/// How long an action waits for the peer unless the request says.
const ACT_WITHIN: Duration = Duration::from_secs(10);

/// The longest an action may be given.
const ACT_WITHIN_MAX: Duration = Duration::from_secs(300);

/// The largest request body.
const BODY_BYTES_MAX: usize = 4 * 1024 * 1024;

/// The double-specific part of `/v1/state`: its sessions or chats, turns, pending cards and
/// deletes, as JSON.
pub type PeerState = Arc<dyn Fn() -> Value + Send + Sync>;

/// What the control API reads and drives.
#[derive(Clone)]
pub struct ControlTarget {
    /// `fake-instance` or `fake-device`.
    pub double: &'static str,
    /// The run's protocol and spec.
    pub cell: Cell,
    /// The scenario's name, when one runs.
    pub scenario: Option<String>,
    /// The run's links, journal, findings and progress.
    pub hub: Arc<Hub>,
    /// The double's own side, for actions.
    pub actor: Arc<dyn Actor>,
    /// The double's own state.
    pub peer_state: PeerState,
}

/// Where the control API listens, and its token.
#[derive(Debug, Clone)]
pub struct ControlConfig {
    /// The address (loopback by default: the API drives the double).
    pub listen: SocketAddr,
    /// The token every request must bear.
    pub token: String,
}

impl ControlConfig {
    /// Loopback on `port` (0: any free one), with a fresh random token.
    pub fn loopback(port: u16) -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], port)),
            token: fresh_token(),
        }
    }
}

/// A random token of 32 hex digits.
pub fn fresh_token() -> String {
    use std::fmt::Write as _;
    let mut token = String::with_capacity(32);
    for byte in rand::random::<[u8; 16]>() {
        let _ = write!(token, "{byte:02x}");
    }
    token
}

/// A control API that is up: where, and its task (aborted when dropped).
#[derive(Debug)]
pub struct ControlServer {
    /// Where it listens.
    pub addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl ControlServer {
    /// Its base URL, `http://ADDR`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for ControlServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Binds and serves the control API until the returned server is dropped.
pub async fn serve(
    config: &ControlConfig,
    target: ControlTarget,
) -> Result<ControlServer, std::io::Error> {
    let listener = tokio::net::TcpListener::bind(config.listen).await?;
    let addr = listener.local_addr()?;
    let app = router(Arc::new(Served {
        target,
        token: config.token.clone(),
    }));
    let task = tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::warn!("the control API stopped: {e}");
        }
    });
    Ok(ControlServer { addr, task })
}

struct Served {
    target: ControlTarget,
    token: String,
}

fn router(served: Arc<Served>) -> Router {
    Router::new()
        .route("/v1/state", get(state))
        .route("/v1/journal", get(journal))
        .route("/v1/act", post(act))
        .route("/v1/inject", post(inject))
        .route("/v1/signals/{name}", post(signal))
        .route_layer(axum::middleware::from_fn_with_state(
            served.clone(),
            require_token,
        ))
        .layer(axum::extract::DefaultBodyLimit::max(BODY_BYTES_MAX))
        .with_state(served)
}

/// A JSON error answer.
fn error(status: StatusCode, why: impl Into<String>) -> Response {
    (status, axum::Json(json!({ "error": why.into() }))).into_response()
}

/// Every route needs the control token: anything else is a 401 that says what to send.
async fn require_token(
    State(served): State<Arc<Served>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    // The token is compared in constant time.
    let bearer = request
        .headers()
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(crate::transport::bearer_token);
    match bearer {
        Some(token) if same_token(token, &served.token) => next.run(request).await,
        Some(_) => error(StatusCode::UNAUTHORIZED, "not the control token"),
        None => error(
            StatusCode::UNAUTHORIZED,
            "say the control token as `Authorization: Bearer TOKEN`",
        ),
    }
}

/// Whether two tokens are equal, taking as long whatever their first difference.
fn same_token(given: &str, expected: &str) -> bool {
    let (given, expected) = (given.as_bytes(), expected.as_bytes());
    given.len() == expected.len()
        && given
            .iter()
            .zip(expected)
            .fold(0u8, |differs, (a, b)| differs | (a ^ b))
            == 0
}

async fn state(State(served): State<Arc<Served>>) -> Response {
    let target = &served.target;
    let progress = target.hub.progress();
    let links: Vec<Value> = target
        .hub
        .links()
        .iter()
        .map(|record| {
            json!({
                "link": record.peer.link(),
                "open": record.closed.is_none(),
                "close_code": record.closed.as_ref().and_then(|c| c.as_ref().map(|c| c.code)),
            })
        })
        .collect();
    let body = json!({
        "double": target.double,
        "cell": target.cell,
        "scenario": {
            "name": target.scenario,
            "step": progress.current(),
            "steps_ended": progress.steps_ended(),
        },
        "links": links,
        "findings": target.hub.findings().all(),
        "signals": progress.signals(),
        "peer": (target.peer_state)(),
    });
    axum::Json(body).into_response()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JournalQuery {
    #[serde(default)]
    after: u64,
    #[serde(default)]
    wait_ms: u64,
    #[serde(default)]
    limit: Option<usize>,
}

async fn journal(
    State(served): State<Arc<Served>>,
    query: Result<Query<JournalQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let Ok(Query(query)) = query else {
        return error(
            StatusCode::BAD_REQUEST,
            "the query takes `after` (a sequence number) and `wait_ms`",
        );
    };
    let wait = Duration::from_millis(query.wait_ms).min(JOURNAL_WAIT_MAX);
    let limit = query
        .limit
        .unwrap_or(JOURNAL_PAGE_MAX)
        .clamp(1, JOURNAL_PAGE_MAX);
    let journal = served.target.hub.journal();
    let newest = journal.last_seq();
    if query.after > newest {
        // A reader ahead of this journal (one of an earlier run) is told where it stands now.
        return axum::Json(json!({ "entries": [], "last": newest })).into_response();
    }
    let mut entries = journal.wait_after(query.after, Instant::now() + wait).await;
    entries.truncate(limit);
    let last = entries.last().map_or(query.after, |e| e.seq);
    axum::Json(json!({ "entries": entries, "last": last })).into_response()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ActQuery {
    #[serde(default)]
    within_ms: Option<u64>,
}

async fn act(
    State(served): State<Arc<Served>>,
    query: Result<Query<ActQuery>, axum::extract::rejection::QueryRejection>,
    body: Bytes,
) -> Response {
    let Ok(Query(query)) = query else {
        return error(StatusCode::BAD_REQUEST, "the query takes `within_ms`");
    };
    let action: Value = match serde_json::from_slice(&body) {
        Ok(Value::Object(action)) if action.len() == 1 => Value::Object(action),
        Ok(_) => {
            return error(
                StatusCode::BAD_REQUEST,
                "an action is one key, as in a scenario's `act` step: {\"open_chat\": {}}",
            );
        }
        Err(e) => return error(StatusCode::BAD_REQUEST, format!("not JSON: {e}")),
    };
    let within = query
        .within_ms
        .map_or(ACT_WITHIN, Duration::from_millis)
        .min(ACT_WITHIN_MAX);
    match served.target.actor.act(action, within).await {
        Ok(result) => axum::Json(json!({ "result": result })).into_response(),
        Err(ActError::NotApplicable(why)) => (
            StatusCode::CONFLICT,
            axum::Json(json!({ "error": why, "not_applicable": true })),
        )
            .into_response(),
        Err(ActError::Failed(why)) => error(StatusCode::UNPROCESSABLE_ENTITY, why),
        Err(ActError::Unknown(why)) => error(StatusCode::BAD_REQUEST, why),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Injection {
    /// The link (default: the current one).
    #[serde(default)]
    link: Option<u32>,
    /// Raw text, sent as is (malformed JSON too).
    #[serde(default)]
    text: Option<String>,
    /// A JSON message, sent as one.
    #[serde(default)]
    message: Option<Value>,
}

async fn inject(State(served): State<Arc<Served>>, body: Bytes) -> Response {
    let injection: Injection = match serde_json::from_slice(&body) {
        Ok(injection) => injection,
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                format!("say {{link?, text}} or {{link?, message}}: {e}"),
            );
        }
    };
    let hub = &served.target.hub;
    let peer = match injection.link {
        Some(link) => hub.link(link),
        None => hub.current(),
    };
    let Some(peer) = peer.filter(|p| !p.is_closed()) else {
        return error(StatusCode::CONFLICT, "no such link is open");
    };
    match (injection.text, injection.message) {
        (Some(text), None) => peer.send_text(text, None),
        (None, Some(message)) => peer.send_value(message),
        _ => return error(StatusCode::BAD_REQUEST, "say one of `text` and `message`"),
    }
    (
        StatusCode::ACCEPTED,
        axum::Json(json!({ "link": peer.link() })),
    )
        .into_response()
}

async fn signal(State(served): State<Arc<Served>>, Path(name): Path<String>) -> Response {
    match served.target.hub.progress().signal(&name) {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(why) => error(StatusCode::BAD_REQUEST, why.to_string()),
    }
}
