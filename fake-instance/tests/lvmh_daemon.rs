//! The fake lvmh daemon over real HTTP and WebSocket (`FakeInstance` with `--family lvmh`): the
//! routes no scenario of the self-test reaches (spawn, GitLab, container stop), its auth on each,
//! and its persistence across a restart.

use std::time::Duration;

use fake_instance::FakeInstance;
use fake_instance::Family;
use reqwest::StatusCode;
use serde_json::{Value, json};

const TOKEN: &str = "lembas-test-token";

async fn daemon() -> FakeInstance {
    FakeInstance::builder()
        .family(Family::Lvmh)
        .start()
        .await
        .expect("the daemon starts")
}

async fn call(
    url: &str,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
    token: Option<&str>,
) -> (StatusCode, Value) {
    let mut request = reqwest::Client::new()
        .request(method, format!("{url}{path}"))
        .timeout(Duration::from_secs(10));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.expect("the daemon answers");
    let status = response.status();
    let body = response.json().await.unwrap_or(Value::Null);
    (status, body)
}

/// `call` with the daemon's token: a GET of `path`.
async fn get(url: &str, path: &str) -> (StatusCode, Value) {
    call(url, reqwest::Method::GET, path, None, Some(TOKEN)).await
}

/// `call` with the daemon's token: a POST of `body` to `path`.
async fn post(url: &str, path: &str, body: Value) -> (StatusCode, Value) {
    call(url, reqwest::Method::POST, path, Some(body), Some(TOKEN)).await
}

/// `call` with the daemon's token: a DELETE of `path`.
async fn delete(url: &str, path: &str) -> (StatusCode, Value) {
    call(url, reqwest::Method::DELETE, path, None, Some(TOKEN)).await
}

/// Spawns an agent for `group/project`; the daemon's answer, which must be a success.
async fn spawn(url: &str) -> Value {
    let (status, body) = post(url, "/api/spawn", json!({"repo": "group/project"})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body
}

/// Polls the session list until `ready` holds for it, for at most 10 s.
async fn sessions_until(url: &str, ready: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let (_, body) = get(url, "/api/sessions").await;
        let list = body.as_array().cloned().unwrap_or_default();
        if ready(&list) || tokio::time::Instant::now() > deadline {
            return list;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spawn_starts_an_agent_session_for_its_repo_and_its_container_stops() {
    let daemon = daemon().await;
    let url = daemon.url();
    let body = spawn(&url).await;
    let session = body["sessionId"]
        .as_str()
        .expect("a session id")
        .to_string();
    assert!(body["containerId"].is_string(), "{body}");

    let list = sessions_until(&url, |l| {
        l.iter()
            .any(|s| s["id"] == session.as_str() && s["online"] == true)
    })
    .await;
    let spawned = list
        .iter()
        .find(|s| s["id"] == session.as_str())
        .unwrap_or_else(|| panic!("no session {session} in {list:?}"));
    assert_eq!(spawned["agent"], true);
    assert_eq!(spawned["repo"], "group/project");
    let (_, jobs) = get(&url, "/api/spawn/status").await;
    assert_eq!(jobs[0]["repo"], "group/project", "{jobs}");
    assert_eq!(jobs[0]["sessionId"], session.as_str(), "{jobs}");

    // A prompt to it runs in its agent, and its events are persisted.
    let path = format!("/api/sessions/{session}/prompt");
    let (status, _) = post(&url, &path, json!({"message": "hi"})).await;
    assert_eq!(status, StatusCode::OK);
    let events = format!("/api/sessions/{session}/events?after=0");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let (_, body) = get(&url, &events).await;
        if body
            .as_array()
            .is_some_and(|e| e.iter().any(|e| e["type"] == "agent_settled"))
        {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no agent_settled persisted: {body}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let container = format!("/api/sessions/{session}/container");
    let (status, _) = delete(&url, &container).await;
    assert_eq!(status, StatusCode::OK);
    let list = sessions_until(&url, |l| {
        l.iter()
            .any(|s| s["id"] == session.as_str() && s["online"] == false)
    })
    .await;
    assert!(
        list.iter()
            .any(|s| s["id"] == session.as_str() && s["online"] == false),
        "{list:?}"
    );
    let (status, _) = post(&url, &path, json!({"message": "hi"})).await;
    assert_eq!(
        status,
        StatusCode::CONFLICT,
        "a stopped container's session is offline"
    );
    let (status, body) = delete(&url, "/api/sessions/nobody/container").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(body["error"].is_string(), "{body}");
    daemon.verdict().await.strict().assert_passed();
}

/// A browser whose open crosses a spawn (it opens after the spawn was answered) still hears of
/// the job: the daemon tells a browser the jobs when it opens, as it tells the session list.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_browser_opened_after_a_spawn_is_told_its_job() {
    use futures_util::StreamExt;
    let daemon = daemon().await;
    let url = daemon.url();
    spawn(&url).await;
    let ws = format!("{}/ws?token={TOKEN}", url.replacen("http", "ws", 1));
    let (mut browser, _) = tokio_tungstenite::connect_async(ws)
        .await
        .expect("the browser link opens");
    let mut seen = Vec::new();
    let told = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(Ok(message)) = browser.next().await {
            let Ok(frame) = serde_json::from_str::<Value>(message.to_text().unwrap_or("")) else {
                continue;
            };
            seen.push(frame["type"].clone());
            if frame["type"] == "spawn_status" {
                return frame;
            }
        }
        Value::Null
    })
    .await
    .unwrap_or(Value::Null);
    assert_eq!(told["jobs"][0]["repo"], "group/project", "frames: {seen:?}");
}

#[tokio::test]
async fn gitlab_takes_only_its_token_and_never_gives_it_back() {
    let daemon = daemon().await;
    let url = daemon.url();
    let (_, status) = get(&url, "/api/gitlab/status").await;
    assert_eq!(status["connected"], false, "{status}");
    let (code, _) = get(&url, "/api/gitlab/repos").await;
    assert_eq!(code, StatusCode::CONFLICT, "no repos before a connect");
    let (code, body) = post(&url, "/api/gitlab/connect", json!({"token": "glpat-wrong"})).await;
    assert_eq!(code, StatusCode::BAD_REQUEST, "{body}");
    let (code, body) = post(
        &url,
        "/api/gitlab/connect",
        json!({"token": "glpat-lvmh-test"}),
    )
    .await;
    assert_eq!(
        (code, body["username"].clone()),
        (StatusCode::OK, json!("alice"))
    );
    let mut said = String::new();
    for path in [
        "/api/gitlab/status",
        "/api/gitlab/repos",
        "/api/sessions",
        "/api/spawn/status",
    ] {
        let (code, body) = get(&url, path).await;
        assert_eq!(code, StatusCode::OK, "{path}: {body}");
        said.push_str(&body.to_string());
    }
    assert!(said.contains("\"connected\":true"), "{said}");
    assert!(said.contains("group/project"), "{said}");
    assert!(
        !said.contains("glpat-lvmh-test"),
        "the token came back: {said}"
    );
    let (code, _) = delete(&url, "/api/gitlab/connect").await;
    assert_eq!(code, StatusCode::OK);
    let (_, status) = get(&url, "/api/gitlab/status").await;
    assert_eq!(status["connected"], false, "{status}");
    daemon.verdict().await.strict().assert_passed();
}

#[tokio::test]
async fn every_api_route_wants_the_token() {
    let daemon = daemon().await;
    let url = daemon.url();
    let routes = [
        (reqwest::Method::GET, "/api/sessions"),
        (reqwest::Method::GET, "/api/sessions/s/events"),
        (reqwest::Method::POST, "/api/sessions/s/prompt"),
        (reqwest::Method::POST, "/api/sessions/s/abort"),
        (reqwest::Method::DELETE, "/api/sessions/s/container"),
        (reqwest::Method::POST, "/api/spawn"),
        (reqwest::Method::GET, "/api/spawn/status"),
        (reqwest::Method::GET, "/api/gitlab/status"),
        (reqwest::Method::POST, "/api/gitlab/connect"),
        (reqwest::Method::DELETE, "/api/gitlab/connect"),
        (reqwest::Method::GET, "/api/gitlab/repos"),
        (reqwest::Method::GET, "/api/no-such-route"),
    ];
    for (method, path) in routes {
        for token in [None, Some("wrong")] {
            let (code, body) = call(&url, method.clone(), path, Some(json!({})), token).await;
            assert_eq!(
                code,
                StatusCode::UNAUTHORIZED,
                "{method} {path} with {token:?}"
            );
            assert!(body["error"].is_string(), "{method} {path}: {body}");
        }
    }
    daemon.verdict().await.strict().assert_passed();
}

#[tokio::test]
async fn every_error_is_the_specs_error_body_even_those_axum_makes() {
    let daemon = daemon().await;
    let url = daemon.url();
    // A wrong method, an unknown route, a refused token, a bad query: each `{"error": …}`.
    for (method, path, token) in [
        (reqwest::Method::PUT, "/api/sessions", Some(TOKEN)),
        (reqwest::Method::GET, "/api/nothing-here", Some(TOKEN)),
        (reqwest::Method::GET, "/api/sessions", None),
        (
            reqwest::Method::GET,
            "/api/sessions/s/events?after=-1",
            Some(TOKEN),
        ),
    ] {
        let (status, body) = call(&url, method.clone(), path, None, token).await;
        assert!(status.is_client_error(), "{method} {path}: {status}");
        assert!(body["error"].is_string(), "{method} {path}: {body}");
    }
    daemon.dismiss();
}
