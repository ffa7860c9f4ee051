//! The GitLab a daemon's GitLab routes talk to (spec, "GitLab": the daemon validates a
//! personal access token and lists its user's projects). Both doubles know the same one: the
//! fake daemon answers for it in-process, and a daemon under test is pointed at [`url`], a
//! small fake of GitLab's REST API v4 (`GET /api/v4/user`, `GET /api/v4/projects`) served once
//! a process, so a scenario can check that a token is validated, projects listed, and the
//! token never given back. It answers the calls a daemon may validate a token with (`/user`,
//! `/personal_access_tokens/self`, `/version`) and lists projects as GitLab does.

use std::sync::{Arc, OnceLock};

use axum::Json;
use axum::Router;
use axum::extract::Query;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};

/// The one personal access token the GitLab accepts.
pub const TOKEN: &str = "glpat-lvmh-test";

/// Whose token it is.
pub const USERNAME: &str = "alice";

/// One project of the GitLab.
#[derive(Debug, Clone, Copy)]
pub struct Project {
    /// GitLab's id (higher: created later).
    pub id: u64,
    /// `group/project`.
    pub path: &'static str,
    /// When it last saw activity (ISO 8601).
    pub last_activity_at: &'static str,
    /// When it was created.
    pub created_at: &'static str,
    /// Whether the token's user is a member.
    pub member: bool,
}

/// The GitLab's projects. The member ones' order by activity (`group/newer` first) is not
/// their order by creation (GitLab's default), and one public project is not the user's: a
/// daemon that lists its user's projects by activity has to ask for both.
pub const PROJECTS: [Project; 3] = [
    Project {
        id: 11,
        path: "group/newer",
        last_activity_at: "2026-12-01T09:00:00Z",
        created_at: "2026-01-10T08:00:00Z",
        member: true,
    },
    Project {
        id: 12,
        path: "group/project",
        last_activity_at: "2026-11-30T12:00:00Z",
        created_at: "2026-03-02T08:00:00Z",
        member: true,
    },
    Project {
        id: 13,
        path: "other/public-thing",
        last_activity_at: "2026-12-02T10:00:00Z",
        created_at: "2026-05-05T08:00:00Z",
        member: false,
    },
];

/// The user's projects as the spec's `GET /api/gitlab/repos` lists them (`{path, name,
/// namespace, lastActivityAt, webUrl, defaultBranch}`), most recent activity first, on a
/// GitLab at `base_url`.
pub fn member_repos(base_url: &str) -> Vec<Value> {
    let mut members: Vec<&Project> = PROJECTS.iter().filter(|p| p.member).collect();
    members.sort_by(|a, b| b.last_activity_at.cmp(a.last_activity_at));
    members
        .into_iter()
        .map(|p| {
            let (namespace, name) = p.path.rsplit_once('/').unwrap_or(("", p.path));
            json!({
                "path": p.path,
                "name": name,
                "namespace": namespace,
                "lastActivityAt": p.last_activity_at,
                "webUrl": format!("{}/{}", base_url.trim_end_matches('/'), p.path),
                "defaultBranch": "main",
            })
        })
        .collect()
}

/// The finding for the GitLab token where a daemon shows it (`what`: where), which it must
/// never do (spec, "GitLab": the token is returned by no API).
pub fn token_shown(value: &Value, what: &str) -> Option<crate::finding::Finding> {
    value.to_string().contains(TOKEN).then(|| {
        crate::finding::Finding::new(
            super::rules::GITLAB_TOKEN_HIDDEN,
            format!("{what} gives the GitLab token back"),
        )
    })
}

/// Why this process's fake GitLab is not there: the step of its start that failed, and what the
/// system said (shared: the first start's outcome is every later call's).
#[derive(Debug, Clone, thiserror::Error)]
pub enum GitLabError {
    /// No port to listen on.
    #[error("the fake GitLab cannot listen: {0}")]
    Listen(#[source] Arc<std::io::Error>),
    /// Its socket has no address.
    #[error("the fake GitLab has no address: {0}")]
    NoAddress(#[source] Arc<std::io::Error>),
    /// No runtime for it.
    #[error("the fake GitLab cannot run: {0}")]
    Runtime(#[source] Arc<std::io::Error>),
    /// No thread for it.
    #[error("the fake GitLab cannot start: {0}")]
    Thread(#[source] Arc<std::io::Error>),
}

/// The address of this process's fake GitLab (`http://127.0.0.1:PORT`), started at the
/// first call on a thread of its own, so it outlives any one run and runtime.
pub fn url() -> Result<String, GitLabError> {
    static URL: OnceLock<Result<String, GitLabError>> = OnceLock::new();
    URL.get_or_init(start).clone()
}

fn start() -> Result<String, GitLabError> {
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0))
        .and_then(|l| l.set_nonblocking(true).map(|()| l))
        .map_err(|e| GitLabError::Listen(Arc::new(e)))?;
    let addr = listener
        .local_addr()
        .map_err(|e| GitLabError::NoAddress(Arc::new(e)))?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| GitLabError::Runtime(Arc::new(e)))?;
    std::thread::Builder::new()
        .name("fake-gitlab".into())
        .spawn(move || {
            runtime.block_on(async move {
                let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
                    return;
                };
                if let Err(e) = axum::serve(listener, router()).await {
                    tracing::error!("the fake GitLab stopped: {e}");
                }
            });
        })
        .map_err(|e| GitLabError::Thread(Arc::new(e)))?;
    Ok(format!("http://{addr}"))
}

fn router() -> Router {
    Router::new()
        .route("/api/v4/user", get(user))
        .route("/api/v4/personal_access_tokens/self", get(token_self))
        .route("/api/v4/version", get(version))
        .route("/api/v4/projects", get(projects))
        .fallback(|| async { gitlab_error(StatusCode::NOT_FOUND, "404 Not Found") })
}

fn gitlab_error(status: StatusCode, message: &str) -> Response {
    (status, Json(json!({ "message": message }))).into_response()
}

/// GitLab takes a token as `PRIVATE-TOKEN` or as a bearer.
fn authorized(headers: &HeaderMap) -> bool {
    let private = headers
        .get("private-token")
        .and_then(|v| v.to_str().ok())
        .map(str::trim);
    let bearer = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(crate::transport::bearer_token);
    private == Some(TOKEN) || bearer == Some(TOKEN)
}

async fn user(headers: HeaderMap) -> Response {
    if !authorized(&headers) {
        return gitlab_error(StatusCode::UNAUTHORIZED, "401 Unauthorized");
    }
    Json(json!({
        "id": 7,
        "username": USERNAME,
        "name": "Alice Example",
        "state": "active",
        "web_url": format!("https://gitlab.example.com/{USERNAME}"),
    }))
    .into_response()
}

async fn token_self(headers: HeaderMap) -> Response {
    if !authorized(&headers) {
        return gitlab_error(StatusCode::UNAUTHORIZED, "401 Unauthorized");
    }
    Json(json!({
        "id": 3,
        "name": "lvmh",
        "revoked": false,
        "active": true,
        "scopes": ["api", "read_repository"],
        "user_id": 7,
        "created_at": "2026-11-01T08:00:00Z",
        "expires_at": null,
    }))
    .into_response()
}

async fn version(headers: HeaderMap) -> Response {
    if !authorized(&headers) {
        return gitlab_error(StatusCode::UNAUTHORIZED, "401 Unauthorized");
    }
    Json(json!({ "version": "17.6.0-ee", "revision": "lvmhtest" })).into_response()
}

/// `GET /api/v4/projects`: `membership=true` (or `owned=true`, or a `min_access_level`) keeps
/// the user's own; `order_by` is
/// `last_activity_at` or (GitLab's default) `created_at`, `sort` `desc` unless `asc`; pages of
/// `per_page` (20 by default, at most 100) with GitLab's paging headers.
async fn projects(headers: HeaderMap, Query(query): Query<Vec<(String, String)>>) -> Response {
    if !authorized(&headers) {
        return gitlab_error(StatusCode::UNAUTHORIZED, "401 Unauthorized");
    }
    let asked = |key: &str| {
        query
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    };
    let members_only = asked("membership") == Some("true")
        || asked("owned") == Some("true")
        || asked("min_access_level").is_some();
    let mut listed: Vec<&Project> = PROJECTS
        .iter()
        .filter(|p| !members_only || p.member)
        .collect();
    match asked("order_by") {
        Some("last_activity_at") => listed.sort_by_key(|p| p.last_activity_at),
        Some("id") => listed.sort_by_key(|p| p.id),
        _ => listed.sort_by_key(|p| p.created_at),
    }
    if asked("sort") != Some("asc") {
        listed.reverse();
    }
    let per_page = asked("per_page")
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(20)
        .clamp(1, 100);
    let page = asked("page")
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(1)
        .max(1);
    let total = listed.len();
    let shown: Vec<Value> = listed
        .into_iter()
        .skip((page - 1).saturating_mul(per_page))
        .take(per_page)
        .map(project)
        .collect();
    let next = match page.saturating_mul(per_page) < total {
        true => (page + 1).to_string(),
        false => String::new(),
    };
    (
        [
            ("x-page", page.to_string()),
            ("x-per-page", per_page.to_string()),
            ("x-total", total.to_string()),
            ("x-next-page", next),
        ],
        Json(Value::Array(shown)),
    )
        .into_response()
}

fn project(p: &Project) -> Value {
    let (namespace, name) = p.path.rsplit_once('/').unwrap_or(("", p.path));
    json!({
        "id": p.id,
        "name": name,
        "path": name,
        "path_with_namespace": p.path,
        "name_with_namespace": format!("{namespace} / {name}"),
        "namespace": { "name": namespace, "path": namespace, "full_path": namespace, "kind": "group" },
        "default_branch": "main",
        "web_url": format!("https://gitlab.example.com/{}", p.path),
        "created_at": p.created_at,
        "last_activity_at": p.last_activity_at,
        "visibility": if p.member { "private" } else { "public" },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_fake_gitlab_knows_one_token_and_lists_members_by_activity_when_asked() {
        let base = url().unwrap();
        let http = crate::transport::http_client();
        let user = http
            .get(format!("{base}/api/v4/user"))
            .header("PRIVATE-TOKEN", TOKEN)
            .send()
            .await
            .unwrap();
        assert_eq!(user.status(), 200);
        let wrong = http
            .get(format!("{base}/api/v4/user"))
            .bearer_auth("nope")
            .send()
            .await
            .unwrap();
        assert_eq!(wrong.status(), 401);
        let paths = |url: String| {
            let http = http.clone();
            async move {
                let list: Vec<Value> = http
                    .get(url)
                    .bearer_auth(TOKEN)
                    .send()
                    .await
                    .unwrap()
                    .json()
                    .await
                    .unwrap();
                list.iter()
                    .map(|p| p["path_with_namespace"].as_str().unwrap().to_string())
                    .collect::<Vec<_>>()
            }
        };
        assert_eq!(
            paths(format!(
                "{base}/api/v4/projects?membership=true&order_by=last_activity_at"
            ))
            .await,
            ["group/newer", "group/project"]
        );
        assert_eq!(
            paths(format!("{base}/api/v4/projects")).await,
            ["other/public-thing", "group/project", "group/newer"]
        );
        let repos: Vec<String> = member_repos("https://gitlab.example.com")
            .iter()
            .map(|r| r["path"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(repos, ["group/newer", "group/project"]);
    }
}
