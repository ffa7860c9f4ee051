//! The HTTP side: discovery, the link's WebSocket upgrade behind the device token, and the API
//! the CLI uses ([`crate::http`]).

use std::net::SocketAddr;
use std::sync::{Arc, RwLock};

use axum::Router;
use axum::extract::ws::{WebSocketUpgrade, rejection::WebSocketUpgradeRejection};
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use harness::engine::Hub;
use harness::lembas::{DISCOVERY_PATH, Discovery, LINK_PATH};
use harness::rules::Misbehaviours;
use harness::rules::ids;
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
    Router::new()
        .route(DISCOVERY_PATH, get(discovery))
        .route(LINK_PATH, get(link))
        .with_state(state.clone())
        .merge(http::router(state.http))
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
    http::discovery::answer(&state.http, body).await
}

async fn link(
    State(state): State<ServerState>,
    ConnectInfo(remote): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Response {
    let token_ok = bearer(&headers).is_some_and(|t| state.tokens.iter().any(|known| known == t));
    if !token_ok && !state.misbehave.breaks(ids::INSTANCE_LINK_TOKEN) {
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
