//! The routes of spawns and of GitLab (spec, "Spawn" and "GitLab"), over the fake daemon's
//! [`super::spawn`] and [`super::gitlab`].

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use harness::lvmh::rules;

use super::gitlab::TOKEN_KEY;
use super::spawn::Refused;
use super::state::{DaemonState, error};

/// `POST /api/spawn`.
pub async fn spawn(State(state): State<DaemonState>, body: Option<Json<Value>>) -> Response {
    let Some(repo) = body
        .as_ref()
        .and_then(|Json(b)| b.get("repo"))
        .and_then(Value::as_str)
        .filter(|r| r.contains('/') && r.len() <= 256)
        .map(str::to_string)
    else {
        return error(
            StatusCode::BAD_REQUEST,
            "the body needs `repo`, a `group/project` path",
        );
    };
    match state.spawns.start(repo, &state.token, state.limits) {
        Ok((session, container)) => {
            state.daemon.spawn_status_changed(state.spawns.jobs());
            let mut body = json!({"sessionId": session, "containerId": container});
            if state.daemon.misbehave().breaks(rules::SPAWN)
                && let Some(fields) = body.as_object_mut()
            {
                fields.remove("containerId");
            }
            Json(body).into_response()
        }
        Err(Refused::TooMany) => {
            error(StatusCode::TOO_MANY_REQUESTS, "too many spawns in this run")
        }
        Err(Refused::Failed(why)) => error(StatusCode::INTERNAL_SERVER_ERROR, &why),
    }
}

/// `GET /api/spawn/status`.
pub async fn spawn_status(State(state): State<DaemonState>) -> Response {
    Json(Value::Array(state.spawns.jobs())).into_response()
}

fn connected(state: &DaemonState) -> bool {
    state
        .daemon
        .with_store(|s| s.setting(TOKEN_KEY).is_some())
        .unwrap_or(false)
}

/// `GET /api/gitlab/status`.
pub async fn gitlab_status(State(state): State<DaemonState>) -> Response {
    let mut body = json!({"connected": connected(&state), "baseUrl": state.gitlab.base_url});
    if connected(&state) {
        body["username"] = json!(state.gitlab.username);
        if state.daemon.misbehave().breaks(rules::GITLAB_TOKEN_HIDDEN) {
            body["token"] = json!(state.gitlab.token);
        }
    }
    Json(body).into_response()
}

/// `POST /api/gitlab/connect`.
pub async fn connect(State(state): State<DaemonState>, body: Option<Json<Value>>) -> Response {
    let Some(token) = body
        .as_ref()
        .and_then(|Json(b)| b.get("token"))
        .and_then(Value::as_str)
    else {
        return error(StatusCode::BAD_REQUEST, "the body needs a `token` string");
    };
    // A daemon told to break the rule keeps whatever it is given.
    if token != state.gitlab.token && !state.daemon.misbehave().breaks(rules::GITLAB_CONNECT) {
        return error(StatusCode::BAD_REQUEST, "GitLab refused the token");
    }
    state
        .daemon
        .with_store(|s| s.set_setting(TOKEN_KEY, Some(token)));
    Json(json!({"username": state.gitlab.username})).into_response()
}

/// `DELETE /api/gitlab/connect`.
pub async fn disconnect(State(state): State<DaemonState>) -> Response {
    // Misbehaving: answers ok and keeps the token.
    if !state
        .daemon
        .misbehave()
        .breaks_way(rules::GITLAB_CONNECT, "kept_after_delete")
    {
        state.daemon.with_store(|s| s.set_setting(TOKEN_KEY, None));
    }
    Json(json!({"ok": true})).into_response()
}

/// `GET /api/gitlab/repos`.
pub async fn repos(State(state): State<DaemonState>) -> Response {
    if !connected(&state) {
        return error(StatusCode::CONFLICT, "GitLab is not connected");
    }
    let mut repos = state.gitlab.listed();
    if state.daemon.misbehave().breaks(rules::GITLAB_REPOS) {
        // Oldest activity first.
        repos.reverse();
    }
    if state
        .daemon
        .misbehave()
        .breaks_way(rules::GITLAB_REPOS, "no_web_url")
    {
        // Misbehaving: the projects without their `webUrl`.
        for repo in &mut repos {
            repo.as_object_mut().map(|r| r.remove("webUrl"));
        }
    }
    Json(Value::Array(repos)).into_response()
}
