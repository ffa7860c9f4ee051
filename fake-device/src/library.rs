//! The instance's library, as the device's model uses it: a `tools/call` to the instance's
//! `/mcp` (MCP over streamable HTTP, through rmcp, the official SDK), with the chat's scope when
//! the call is made for a session the client opened (the spec's paragraph on the library's scope).

use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, JsonObject};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};

use crate::completion::{ToolCall, ToolOutcome};
use crate::registry::Registry;

/// How long one library call may take, handshake included.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// The instance's `/mcp`, with the device token.
#[derive(Debug, Clone)]
pub struct Library {
    /// The instance's base URL.
    pub base: String,
    /// The device token.
    pub token: String,
}

impl Library {
    /// Whether the instance serves a library at all: anything but a 404 on `/mcp` (an MCP
    /// server answers a bare POST with an error of its own) says it does.
    pub async fn served(&self) -> bool {
        let url = format!("{}/mcp", self.base.trim_end_matches('/'));
        let probe = harness::transport::http_client()
            .post(&url)
            .bearer_auth(&self.token)
            .header("accept", "application/json, text/event-stream")
            .json(&json!({}))
            .timeout(CALL_TIMEOUT)
            .send()
            .await;
        !matches!(probe, Ok(answer) if answer.status() == reqwest::StatusCode::NOT_FOUND)
    }

    /// Calls one of the library's tools; `scope` is the session the call is made for, when the
    /// client opened it. The answer's text, or why there is none (which the model is told).
    pub async fn call(
        &self,
        tool: &str,
        arguments: &Value,
        scope: Option<&str>,
    ) -> Result<String, String> {
        let url = format!("{}/mcp", self.base.trim_end_matches('/'));
        let connect = || {
            ().serve(StreamableHttpClientTransport::with_client(
                harness::transport::http_client(),
                StreamableHttpClientTransportConfig::with_uri(url.clone())
                    .auth_header(self.token.clone()),
            ))
        };
        let mut params = CallToolRequestParams::new(tool.to_string())
            .with_arguments(as_object(arguments.clone()));
        if let Some(session_id) = scope {
            params.meta = Some(as_object(json!({ "lembas": { "scope": session_id } })).into());
        }
        let exchange = async {
            // The handshake is tried twice: on a loaded machine a POST may meet a connection
            // the server just closed, and nothing of the call has been sent yet.
            let client = match connect().await {
                Ok(client) => client,
                Err(first) => {
                    tracing::debug!("the library's handshake failed, trying once more: {first}");
                    connect().await.map_err(|e| e.to_string())?
                }
            };
            let result = client.call_tool(params).await.map_err(|e| e.to_string());
            let _ = client.cancel().await;
            result
        };
        let result = tokio::time::timeout(CALL_TIMEOUT, exchange)
            .await
            .map_err(|_| "the library did not answer in time".to_string())??;
        let text: Vec<String> = result
            .content
            .iter()
            .filter_map(|c| c.as_text().map(|t| t.text.clone()))
            .collect();
        if result.is_error == Some(true) {
            return Err(text.join("\n"));
        }
        Ok(text.join("\n"))
    }
}

fn as_object(value: Value) -> JsonObject {
    match value {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    }
}

/// The scope a library call made for this session carries: the session itself, when the
/// device lists `library` and the client opened the session (a terminal's own session was
/// not opened by the client, so its calls go without one).
pub(crate) fn library_scope(registry: &Registry, session_id: &str) -> Option<String> {
    // Misbehaving: the terminal's own session is scoped too, as if the client opened it.
    let opened_by_client = registry.terminal_session().as_deref() != Some(session_id)
        || registry.breaks_way(harness::rules::ids::DEVICE_LIBRARY_SCOPE, "terminal_scoped");
    // An editor's sessions (serve --stdio) are none of the instance's chats.
    (registry.has("library")
        && !registry.config.stdio
        && opened_by_client
        && !registry.breaks(harness::rules::ids::DEVICE_LIBRARY_SCOPE))
    .then(|| session_id.to_string())
}

/// The model's `library_search`: asks the instance's library, within the chat's scope.
pub(crate) async fn search_library(
    registry: &Registry,
    session_id: &str,
    call: &ToolCall,
) -> ToolOutcome {
    let Some(model) = &registry.config.model else {
        return ToolOutcome {
            text: "No library: this device is not logged in to an instance's model.".into(),
            ran: false,
        };
    };
    // `library: local` stays local; misbehaving, the account's is searched all the same.
    let local = registry.config.library_local
        && !registry.breaks(harness::rules::ids::DEVICE_LIBRARY_LOCAL_KEPT);
    // Misbehaving (`chats_only`): the terminal's own session searches an empty library of the
    // device's.
    let chats_only = registry.breaks_way(harness::rules::ids::DEVICE_LIBRARY_DEFAULT, "chats_only")
        && registry.terminal_session().as_deref() == Some(session_id);
    if local || chats_only || registry.breaks(harness::rules::ids::DEVICE_LIBRARY_DEFAULT) {
        // The device's own library, and empty (misbehaving: also when no `library:` is set).
        return ToolOutcome {
            text: "The local library has no documents.".into(),
            ran: true,
        };
    }
    let library = Library {
        base: model.base.clone(),
        token: model.token.clone(),
    };
    let scope = library_scope(registry, session_id);
    match library
        .call("library_search", &call.arguments, scope.as_deref())
        .await
    {
        Ok(text) => ToolOutcome { text, ran: true },
        Err(why) => ToolOutcome {
            text: format!("The library refused: {why}"),
            ran: false,
        },
    }
}
