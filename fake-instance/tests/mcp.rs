//! The library at `/mcp`, over real loopback HTTP: driven by rmcp's client (the official MCP
//! SDK) for what a device does, and by plain reqwest for the refusals a client library hides.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use fake_instance::DEFAULT_TOKEN;
use fake_instance::http::{HttpConfig, HttpState};
use harness::lembas::Discovery;
use rmcp::model::{CallToolRequestParams, CallToolResult, ErrorCode};
use rmcp::service::{RoleClient, RunningService, ServiceError};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ServiceExt, model::JsonObject};
use serde_json::{Value, json};

mod common;

/// The longest any one exchange may take before the test fails rather than hangs.
const PATIENCE: Duration = Duration::from_secs(10);

/// A second device's token.
const OTHER_TOKEN: &str = "other-device-token";
/// A token without the `library` scope.
const NO_LIBRARY_TOKEN: &str = "chat-only-token";

/// A running HTTP API and the messages it told of (dropped: stopped).
struct Library {
    url: String,
    told: Arc<Mutex<Vec<(String, Value)>>>,
    _served: common::Served,
}

/// Two bases, a default group of the second, and chats: device-1 has `s-alpha` (scoped to
/// `kb-alpha`) and `s-all` (no bases named: the whole library); device-2 has `s-other`.
async fn start() -> Library {
    let http: HttpConfig = serde_json::from_value(json!({
        "library": {
            "bases": [
                {"id": "kb-alpha", "name": "Alpha", "documents": [{"title": "Colour", "text": "The brand colour is teal."}]},
                {"id": "kb-beta", "name": "Beta", "documents": [{"title": "Language", "text": "The doubles are written in Rust; teal is not a language."}]}
            ],
            "default_group": ["kb-beta"]
        },
        "token_scopes": { NO_LIBRARY_TOKEN: ["chat"] }
    }))
    .expect("a valid configuration");
    let chats: BTreeMap<String, BTreeMap<String, Vec<String>>> = BTreeMap::from([
        (
            "device-1".to_string(),
            BTreeMap::from([
                ("s-alpha".to_string(), vec!["kb-alpha".to_string()]),
                ("s-all".to_string(), vec![]),
            ]),
        ),
        (
            "device-2".to_string(),
            BTreeMap::from([("s-other".to_string(), vec![])]),
        ),
    ]);
    let tokens = [DEFAULT_TOKEN, OTHER_TOKEN, NO_LIBRARY_TOKEN].map(String::from);
    let state = HttpState::new(
        http,
        Arc::new(tokens.to_vec()),
        Arc::new(RwLock::new(Discovery::for_protocols(Some(vec![1, 2])))),
    )
    .with_scopes(Arc::new(chats));
    let told = Arc::new(Mutex::new(Vec::new()));
    let sink = told.clone();
    state.observe(Arc::new(move |method, params| {
        sink.lock()
            .expect("not poisoned")
            .push((method.to_string(), params));
    }));
    let served = common::serve(state).await;
    Library {
        url: format!("{}/mcp", served.url),
        told,
        _served: served,
    }
}

impl Library {
    /// An MCP client of the official SDK, with this device token.
    async fn client(&self, token: &str) -> RunningService<RoleClient, ()> {
        let transport = StreamableHttpClientTransport::from_config(
            StreamableHttpClientTransportConfig::with_uri(self.url.as_str()).auth_header(token),
        );
        tokio::time::timeout(PATIENCE, ().serve(transport))
            .await
            .expect("the MCP handshake in time")
            .expect("the MCP handshake")
    }

    /// The `http/mcp` messages told so far.
    fn calls(&self) -> Vec<Value> {
        self.told
            .lock()
            .expect("not poisoned")
            .iter()
            .filter(|(method, _)| method == fake_instance::HTTP_MCP)
            .map(|(_, params)| params.clone())
            .collect()
    }
}

fn object(value: Value) -> JsonObject {
    match value {
        Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

/// A `library_search` call, with `_meta` when given.
fn search(query: &str, base: Option<&str>, meta: Option<Value>) -> CallToolRequestParams {
    let mut arguments = json!({ "query": query });
    if let Some(base) = base {
        arguments["base"] = json!(base);
    }
    let mut params = CallToolRequestParams::new("library_search").with_arguments(object(arguments));
    if let Some(meta) = meta {
        params.meta = Some(object(meta).into());
    }
    params
}

fn scope(session_id: &str) -> Option<Value> {
    Some(json!({ "lembas": { "scope": session_id } }))
}

/// The bases a successful search's hits came from.
fn bases_hit(result: &CallToolResult) -> Vec<String> {
    assert_ne!(result.is_error, Some(true), "a tool error: {result:?}");
    let text = result.content[0]
        .as_text()
        .map(|t| t.text.clone())
        .expect("a text answer");
    let answer: Value = serde_json::from_str(&text).expect("JSON text");
    answer["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|hit| hit["base"].as_str().expect("a base").to_string())
        .collect()
}

async fn call(
    client: &RunningService<RoleClient, ()>,
    params: CallToolRequestParams,
) -> Result<CallToolResult, ServiceError> {
    tokio::time::timeout(PATIENCE, client.call_tool(params))
        .await
        .expect("an answer in time")
}

#[tokio::test]
async fn the_official_client_lists_the_library_tools() {
    let library = start().await;
    let client = library.client(DEFAULT_TOKEN).await;
    let tools = client.list_all_tools().await.expect("tools");
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(names, ["library_search", "library_bases"]);
}

#[tokio::test]
async fn a_scoped_call_searches_only_the_chats_bases() {
    let library = start().await;
    let client = library.client(DEFAULT_TOKEN).await;
    let scoped = call(&client, search("teal", None, scope("s-alpha")))
        .await
        .expect("answered");
    assert_eq!(bases_hit(&scoped), ["kb-alpha"]);
    // A chat that named no bases searches the whole library.
    let whole = call(&client, search("teal", None, scope("s-all")))
        .await
        .expect("answered");
    assert_eq!(bases_hit(&whole), ["kb-alpha", "kb-beta"]);
    // A base outside the chat's scope is a tool error, not an answer from it.
    let outside = call(&client, search("teal", Some("kb-beta"), scope("s-alpha")))
        .await
        .expect("answered");
    assert_eq!(outside.is_error, Some(true));
    let told = library.calls();
    assert_eq!(told[0]["reach"], json!({ "chat": "s-alpha" }));
    assert_eq!(told[0]["meta"]["lembas"]["scope"], "s-alpha");
    assert_eq!(told[0]["device"], "device-1");
    assert_eq!(told[2]["outcome"], "tool_error");
}

#[tokio::test]
async fn a_call_without_scope_searches_the_default_group() {
    let library = start().await;
    let client = library.client(DEFAULT_TOKEN).await;
    let result = call(&client, search("teal", None, None))
        .await
        .expect("answered");
    assert_eq!(bases_hit(&result), ["kb-beta"]);
    assert_eq!(library.calls()[0]["reach"], "default_group");
}

#[tokio::test]
async fn another_devices_session_is_refused_with_invalid_params() {
    let library = start().await;
    let client = library.client(DEFAULT_TOKEN).await;
    for session in ["s-other", "no-such-session"] {
        let refused = call(&client, search("teal", None, scope(session))).await;
        match refused {
            Err(ServiceError::McpError(error)) => {
                assert_eq!(error.code, ErrorCode::INVALID_PARAMS);
                assert!(error.message.contains(session), "{}", error.message);
            }
            other => panic!("{session}: expected -32602, got {other:?}"),
        }
    }
    // The session is the other device's own: with its token, it is answered.
    let other = library.client(OTHER_TOKEN).await;
    call(&other, search("teal", None, scope("s-other")))
        .await
        .expect("the owner's call is answered");
    let told = library.calls();
    assert_eq!(told[0]["outcome"], "refused");
    assert_eq!(told[2]["device"], "device-2");
}

#[tokio::test]
async fn a_scope_that_is_not_a_string_is_refused() {
    let library = start().await;
    let client = library.client(DEFAULT_TOKEN).await;
    let refused = call(
        &client,
        search("teal", None, Some(json!({"lembas": {"scope": 42}}))),
    )
    .await;
    assert!(
        matches!(&refused, Err(ServiceError::McpError(e)) if e.code == ErrorCode::INVALID_PARAMS),
        "{refused:?}"
    );
}

/// An MCP `initialize` as any client sends it first.
fn initialize() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"}}})
}

#[tokio::test]
async fn a_token_without_the_library_scope_or_no_token_is_refused() {
    let library = start().await;
    let http = reqwest::Client::builder()
        .timeout(PATIENCE)
        .build()
        .expect("a client");
    let post = |token: Option<&str>| {
        let mut request = http
            .post(&library.url)
            .header("accept", "application/json, text/event-stream")
            .json(&initialize());
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        request.send()
    };
    let refused = post(Some(NO_LIBRARY_TOKEN)).await.expect("an answer");
    assert_eq!(refused.status(), reqwest::StatusCode::FORBIDDEN);
    let body: Value = refused.json().await.expect("JSON");
    assert!(
        body["detail"]
            .as_str()
            .is_some_and(|d| d.contains("library")),
        "{body}"
    );
    let anonymous = post(None).await.expect("an answer");
    assert_eq!(anonymous.status(), reqwest::StatusCode::UNAUTHORIZED);
    let unknown = post(Some("not-a-token")).await.expect("an answer");
    assert_eq!(unknown.status(), reqwest::StatusCode::UNAUTHORIZED);
    let text = unknown.text().await.expect("a body");
    assert!(!text.contains("not-a-token"), "the token came back: {text}");
    // And a device with the scope gets in.
    let admitted = post(Some(DEFAULT_TOKEN)).await.expect("an answer");
    assert_eq!(admitted.status(), reqwest::StatusCode::OK);
}

#[tokio::test]
async fn an_unknown_tool_and_a_malformed_query_are_refused_without_harm() {
    let library = start().await;
    let client = library.client(DEFAULT_TOKEN).await;
    let unknown = call(&client, CallToolRequestParams::new("no_such_tool")).await;
    assert!(
        matches!(&unknown, Err(ServiceError::McpError(e)) if e.code == ErrorCode::INVALID_PARAMS),
        "{unknown:?}"
    );
    let malformed = call(
        &client,
        CallToolRequestParams::new("library_search").with_arguments(object(json!({"query": 3}))),
    )
    .await
    .expect("a tool error, not a protocol error");
    assert_eq!(malformed.is_error, Some(true));
    // Still serving.
    let bases = call(&client, CallToolRequestParams::new("library_bases"))
        .await
        .expect("answered");
    assert_ne!(bases.is_error, Some(true));
}
