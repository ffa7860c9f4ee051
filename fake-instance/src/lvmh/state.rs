//! What the fake daemon's routes share, and the spec's error body (spec, "Transport 2").

use std::sync::Arc;

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use harness::engine::Hub;
use harness::transport::FrameLimits;
use serde_json::json;

use super::daemon::Daemon;
use super::spawn::Spawns;

/// What the routes share.
#[derive(Clone)]
pub struct DaemonState {
    /// Where links go.
    pub hub: Arc<Hub>,
    /// The daemon's model.
    pub daemon: Arc<Daemon>,
    /// `LVMH_TOKEN`.
    pub token: Arc<String>,
    /// Each link's frame limits.
    pub limits: FrameLimits,
    /// The spawned sessions.
    pub spawns: Arc<Spawns>,
    /// The GitLab the daemon's `connect` validates tokens against.
    pub gitlab: Arc<super::gitlab::GitLab>,
}

/// The spec's error body: `{"error": "message"}`.
pub fn error(status: StatusCode, message: &str) -> Response {
    (status, Json(json!({ "error": message }))).into_response()
}
