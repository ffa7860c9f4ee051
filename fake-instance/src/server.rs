//! The HTTP side: discovery, the link's WebSocket upgrade behind the device token, and the API
//! the CLI uses ([`crate::http`]).

use std::sync::{Arc, RwLock};

use axum::Router;
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use harness::engine::Hub;
use harness::lembas::{DISCOVERY_PATH, Discovery, LINK_PATH};
use harness::rules::Misbehaviours;
use harness::rules::ids;
use harness::shapes::ShapeWatch;
use harness::transport::ws_server::LinkUpgrade;
use harness::transport::{FrameLimits, ws_server};
use serde_json::json;

use crate::http::{self, HttpState, bearer};

/// What the routes share.
#[derive(Clone)]
pub struct ServerState {
    /// Where links go.
    pub hub: Arc<Hub>,
    /// The device tokens that may link (each device has its own).
    pub tokens: Arc<Vec<String>>,
    /// What discovery says now (a scenario may change it between dials).
    pub discovery: Arc<RwLock<Discovery>>,
    /// The rules to break.
    pub misbehave: Misbehaviours,
    /// Frame limits of each link.
    pub limits: FrameLimits,
    /// The HTTP API the CLI uses, beside the link.
    pub http: HttpState,
    /// The chats, told which device each link is.
    pub chats: Arc<crate::chats::Chats>,
}

/// The instance's routes.
pub fn router(state: ServerState) -> Router {
    let routes = Router::new()
        .route(DISCOVERY_PATH, get(discovery))
        .route(LINK_PATH, get(link))
        .with_state(state.clone())
        .merge(http::router(state.http));
    // Only the bends matter here (the device checks the answers); no side is judged. A run
    // breaking no rule bends nothing, and does not read the catalogue to learn so: its start
    // stays a few milliseconds.
    if state.misbehave.iter().next().is_none() {
        return routes;
    }
    let shapes = Arc::new(ShapeWatch::new(
        harness::rules::catalogue(),
        harness::rules::Binds::Both,
        &state.misbehave,
        "",
    ));
    routes.layer(axum::middleware::from_fn_with_state(shapes, bend_answers))
}

/// The largest answer a shape misbehaviour rewrites (the API's JSON answers are small).
const BENT_ANSWER_MAX: usize = 4 << 20;

/// Bends the JSON body of a successful answer whose shape rule this instance was told to
/// break; every other answer passes untouched, unbuffered.
async fn bend_answers(
    State(shapes): State<Arc<ShapeWatch>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let route = harness::shapes::route(request.method().as_str(), request.uri().path());
    let response = next.run(request).await;
    if !shapes.bends_response(&route) || !response.status().is_success() {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, BENT_ANSWER_MAX).await else {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    let Ok(mut value) = serde_json::from_slice::<serde_json::Value>(&bytes) else {
        return Response::from_parts(parts, axum::body::Body::from(bytes));
    };
    shapes.bend_response(&route, &mut value);
    parts.headers.remove(axum::http::header::CONTENT_LENGTH);
    Response::from_parts(parts, axum::body::Body::from(value.to_string()))
}

async fn discovery(State(state): State<ServerState>) -> Response {
    let mut body = state
        .discovery
        .read()
        .map(|d| d.to_value())
        .unwrap_or_else(|_| json!({}));
    if state.misbehave.breaks(ids::INSTANCE_DISCOVERY_SHAPE) {
        body["protocol"] = json!(2);
    }
    // Misbehaving: a list without protocol 1, which a protocol-1 device still speaks.
    if state
        .misbehave
        .breaks_way(ids::INSTANCE_DISCOVERY_SHAPE, "without_1")
    {
        body["protocols"] = json!([2]);
    }
    http::discovery::answer(&state.http, body).await
}

async fn link(
    State(state): State<ServerState>,
    ConnectInfo(remote): ConnectInfo<harness::transport::guarded::RemoteAddr>,
    headers: HeaderMap,
    upgrade: Result<LinkUpgrade, Response>,
) -> Response {
    let token_ok = bearer(&headers).is_some_and(|t| state.tokens.iter().any(|known| known == t));
    // Misbehaving: a link with no token (or an empty one) let in, a wrong one still refused.
    let unguarded = bearer(&headers).is_none_or(str::is_empty)
        && state
            .misbehave
            .breaks_way(ids::INSTANCE_LINK_TOKEN, "missing_accepted");
    if !token_ok && !unguarded && !state.misbehave.breaks(ids::INSTANCE_LINK_TOKEN) {
        // The token itself is never logged: only whether one came.
        tracing::info!(%remote, has_token = bearer(&headers).is_some(), "link refused: unknown device token");
        return (
            StatusCode::UNAUTHORIZED,
            axum::Json(json!({"detail": "unknown or missing device token"})),
        )
            .into_response();
    }
    let upgrade = match upgrade {
        Ok(upgrade) => upgrade,
        Err(rejection) => return rejection.into_response(),
    };
    // A device is known by which of the tokens it linked with (`device-2`), never by the token.
    let device = bearer(&headers)
        .and_then(|t| state.tokens.iter().position(|known| known == t))
        .map_or_else(|| "device-?".to_string(), |i| format!("device-{}", i + 1));
    let (hub, chats) = (state.hub.clone(), state.chats.clone());
    ws_server::accept(
        upgrade,
        state.limits,
        remote.to_string(),
        move |connection| {
            let peer = hub.attach(connection);
            chats.set_device(peer.link(), &device);
        },
    )
}
