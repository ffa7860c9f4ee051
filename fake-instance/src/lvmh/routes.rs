//! The fake daemon's HTTP side: the plugin's WebSocket (`/agent/ws`), the browser's (`/ws`),
//! and the REST API under `/api` (spec, "Auth", "Transport 2", "Transport 3"). Every route
//! wants the token: a header on the agent link and the API, `?token=` on the browser's link.

use axum::Json;
use axum::Router;
use axum::extract::{ConnectInfo, Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use harness::lvmh::{AGENT_PATH, BROWSER_PATH, rules};
use harness::transport::ws_server;
use harness::transport::ws_server::LinkUpgrade;
use serde_json::{Value, json};
use std::collections::HashMap;

use super::daemon::BROWSER_PREFIX;
use super::state::{DaemonState, error};

/// The most events one `GET …/events` gives (the spec's example asks for 1000).
pub const EVENTS_LIMIT_MAX: usize = 1000;

/// The daemon's routes.
pub fn router(state: DaemonState) -> Router {
    let api = Router::new()
        .route("/api/sessions", get(sessions))
        .route("/api/sessions/{id}/events", get(events))
        .route("/api/sessions/{id}/prompt", post(prompt))
        .route("/api/sessions/{id}/abort", post(abort))
        .route("/api/sessions/{id}/container", delete(stop_container))
        .route("/api/spawn", post(super::api::spawn))
        .route("/api/spawn/status", get(super::api::spawn_status))
        .route(
            "/api/gitlab/connect",
            post(super::api::connect).delete(super::api::disconnect),
        )
        .route("/api/gitlab/status", get(super::api::gitlab_status))
        .route("/api/gitlab/repos", get(super::api::repos))
        .fallback(|| async { error(StatusCode::NOT_FOUND, "no such route") })
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            bearer_only,
        ))
        // Outermost, so the answers of the token check are bent too.
        .layer(axum::middleware::from_fn_with_state(state.clone(), answers));
    Router::new()
        .route(AGENT_PATH, get(agent_link))
        .route(BROWSER_PATH, get(browser_link))
        .with_state(state.clone())
        .merge(api.with_state(state))
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(axum::http::header::AUTHORIZATION)?
        .to_str()
        .ok()
        .and_then(harness::transport::bearer_token)
}

/// Every API route wants the token (a daemon told to break `lvmh.daemon.auth` lets the
/// session list through without one).
async fn bearer_only(
    State(state): State<DaemonState>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let allowed = bearer(request.headers()) == Some(state.token.as_str())
        || (state.daemon.misbehave().breaks(rules::AUTH)
            && request.uri().path() == "/api/sessions");
    if !allowed {
        return error(StatusCode::UNAUTHORIZED, "missing or wrong token");
    }
    next.run(request).await
}

/// The largest answer a misbehaving daemon rewrites (its own answers are far smaller).
const BENT_ANSWER_MAX: usize = 64 << 20;

/// The largest error body read to be worded as the spec's.
const ERROR_BODY_MAX: usize = 64 << 10;

/// Every error is the spec's `{"error": …}`, those axum makes too (a wrong method, a body that
/// is not JSON); a daemon told to break `lvmh.daemon.errors` words them in plain text, and
/// one told to break a shape rule of the API bends those answers. Successes of a daemon
/// keeping every rule go untouched (nothing is buffered).
async fn answers(
    State(state): State<DaemonState>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let route = harness::lvmh::api_route(request.method().as_str(), request.uri().path());
    let plain_errors = state.daemon.misbehave().breaks(rules::ERRORS);
    let bends = state.daemon.shapes().bends_response(&route);
    let response = next.run(request).await;
    let status = response.status();
    if plain_errors && !status.is_success() {
        return (status, format!("error: {}", status.as_u16())).into_response();
    }
    if !status.is_success()
        && state
            .daemon
            .misbehave()
            .breaks_way(rules::ERRORS, "error_object")
    {
        // Misbehaving: `error` is an object, not the message's string.
        let body = json!({"error": {"status": status.as_u16(), "message": "refused"}});
        return (status, Json(body)).into_response();
    }
    if !status.is_success() {
        return worded(response).await;
    }
    if !bends {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, BENT_ANSWER_MAX).await else {
        return error(StatusCode::INTERNAL_SERVER_ERROR, "the answer was too big");
    };
    let Ok(mut value) = serde_json::from_slice::<Value>(&bytes) else {
        return (parts, bytes).into_response();
    };
    state.daemon.shapes().bend_response(&route, &mut value);
    parts.headers.remove(axum::http::header::CONTENT_LENGTH);
    (parts, Json(value)).into_response()
}

/// An error answer as the spec words it: a body that is not `{"error": …}` already (axum's
/// own rejections are plain text) becomes one.
async fn worded(response: Response) -> Response {
    let (parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, ERROR_BODY_MAX).await else {
        return error(parts.status, "the error could not be read");
    };
    let spec_shaped = serde_json::from_slice::<Value>(&bytes)
        .is_ok_and(|v| v.get("error").is_some_and(Value::is_string));
    if spec_shaped {
        return (parts, bytes).into_response();
    }
    let text = String::from_utf8_lossy(&bytes);
    let message = match text.trim() {
        "" => parts
            .status
            .canonical_reason()
            .unwrap_or("error")
            .to_string(),
        text => text.to_string(),
    };
    error(parts.status, &message)
}

async fn agent_link(
    State(state): State<DaemonState>,
    ConnectInfo(remote): ConnectInfo<harness::transport::guarded::RemoteAddr>,
    headers: HeaderMap,
    upgrade: Result<LinkUpgrade, Response>,
) -> Response {
    if bearer(&headers) != Some(state.token.as_str()) {
        tracing::info!(%remote, "agent link refused: missing or wrong token");
        return error(StatusCode::UNAUTHORIZED, "missing or wrong token");
    }
    if state.daemon.refusing() {
        return error(StatusCode::SERVICE_UNAVAILABLE, "the daemon is down");
    }
    let upgrade = match upgrade {
        Ok(upgrade) => upgrade,
        Err(rejection) => return rejection.into_response(),
    };
    let hub = state.hub.clone();
    ws_server::accept(
        upgrade,
        state.limits,
        remote.to_string(),
        move |connection| {
            hub.attach(connection);
        },
    )
}

async fn browser_link(
    State(state): State<DaemonState>,
    ConnectInfo(remote): ConnectInfo<harness::transport::guarded::RemoteAddr>,
    headers: axum::http::HeaderMap,
    Query(query): Query<HashMap<String, String>>,
    upgrade: Result<LinkUpgrade, Response>,
) -> Response {
    let misbehave = state.daemon.misbehave();
    // Misbehaving: the token only as a bearer header, which a browser's socket cannot send.
    let token = match misbehave.breaks_way(rules::AUTH, "header_only") {
        true => bearer(&headers),
        false => query.get("token").map(String::as_str),
    };
    // Misbehaving: any browser at all.
    let open = misbehave.breaks_way(rules::AUTH, "browser_open");
    if token != Some(state.token.as_str()) && !open {
        tracing::info!(%remote, "browser link refused: missing or wrong token");
        return error(StatusCode::UNAUTHORIZED, "missing or wrong token");
    }
    let upgrade = match upgrade {
        Ok(upgrade) => upgrade,
        Err(rejection) => return rejection.into_response(),
    };
    let hub = state.hub.clone();
    // The daemon tells a browser's link from a plugin's by this name.
    let name = format!("{BROWSER_PREFIX}{remote}");
    ws_server::accept(upgrade, state.limits, name, move |connection| {
        hub.attach(connection);
    })
}

async fn sessions(State(state): State<DaemonState>) -> Response {
    Json(Value::Array(state.daemon.session_list())).into_response()
}

async fn events(
    State(state): State<DaemonState>,
    Path(id): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let number = |key: &str| query.get(key).map(|v| v.parse::<u64>());
    let after = match number("after") {
        None => 0,
        // Misbehaving: the event numbered `after` is served again.
        Some(Ok(after))
            if state
                .daemon
                .misbehave()
                .breaks_way(rules::EVENTS_PAGED, "after_inclusive") =>
        {
            after.saturating_sub(1)
        }
        Some(Ok(after)) => after,
        Some(Err(_)) => return error(StatusCode::BAD_REQUEST, "`after` is not a whole number"),
    };
    let limit = match number("limit") {
        None => EVENTS_LIMIT_MAX,
        Some(Ok(_)) if state.daemon.misbehave().breaks(rules::EVENTS_PAGED) => EVENTS_LIMIT_MAX,
        Some(Ok(limit)) => usize::try_from(limit)
            .unwrap_or(usize::MAX)
            .min(EVENTS_LIMIT_MAX),
        Some(Err(_)) => return error(StatusCode::BAD_REQUEST, "`limit` is not a whole number"),
    };
    let events = state.daemon.events(&id, after, limit);
    state.daemon.web().fetched(&id, after, &events);
    Json(Value::Array(events)).into_response()
}

async fn prompt(
    State(state): State<DaemonState>,
    Path(id): Path<String>,
    body: Option<Json<Value>>,
) -> Response {
    let Some(message) = body
        .as_ref()
        .and_then(|Json(b)| b.get("message"))
        .and_then(Value::as_str)
    else {
        return error(StatusCode::BAD_REQUEST, "the body needs a `message` string");
    };
    match state.daemon.prompt(&id, message) {
        Some(_) => Json(json!({"ok": true})).into_response(),
        // Offline: nothing would deliver it (a daemon told to break the rule says it did).
        None if state.daemon.misbehave().breaks(rules::PROMPT_OFFLINE) => {
            Json(json!({"ok": true})).into_response()
        }
        // Misbehaving: refused, but with a status other than the spec's 409.
        None if state
            .daemon
            .misbehave()
            .breaks_way(rules::PROMPT_OFFLINE, "wrong_status") =>
        {
            error(StatusCode::SERVICE_UNAVAILABLE, "the session is offline")
        }
        None => error(StatusCode::CONFLICT, "the session is offline"),
    }
}

async fn abort(State(state): State<DaemonState>, Path(id): Path<String>) -> Response {
    match state.daemon.abort(&id) {
        true => Json(json!({"ok": true})).into_response(),
        false => error(StatusCode::CONFLICT, "the session is offline"),
    }
}

async fn stop_container(State(state): State<DaemonState>, Path(id): Path<String>) -> Response {
    if state.daemon.misbehave().breaks(rules::CONTAINER_STOP) {
        // Says it stopped what it leaves running.
        return Json(json!({"ok": true})).into_response();
    }
    match state.spawns.stop(&id) {
        true => {
            state.daemon.spawn_status_changed(state.spawns.jobs());
            // Misbehaving: stopped, but answered with an empty object.
            match state
                .daemon
                .misbehave()
                .breaks_way(rules::CONTAINER_STOP, "no_ok")
            {
                true => Json(json!({})).into_response(),
                false => Json(json!({"ok": true})).into_response(),
            }
        }
        false => error(
            StatusCode::NOT_FOUND,
            "no spawned container runs that session",
        ),
    }
}
