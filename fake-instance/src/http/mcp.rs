//! `/mcp`: the account's library as an MCP server over streamable HTTP (rmcp, the official
//! Rust SDK), answering from [`library`](super::library) within each call's scope.
//!
//! Two tools: `library_search` (a query, optionally one base) and `library_bases` (the bases a
//! call may search). A `tools/call` whose `_meta.lembas.scope` names a session that is not one of
//! the calling device's chats is refused with -32602 (invalid params). Every `tools/call` is
//! told to the run's steps as an `http/mcp` message, refused or not, so a scenario can check
//! the scope a device sent.

use std::sync::Arc;

use axum::http::request::Parts;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Map, Value, json};

use super::auth::Caller;
use super::events::{Events, HTTP_MCP};
use super::library::{self, ChatScopes, LibraryConfig, Reach};

/// What the library's calls read of the API's state.
#[derive(Clone)]
pub struct McpContext {
    /// The account's library.
    pub library: Arc<LibraryConfig>,
    /// The chats a call's scope may name.
    pub scopes: Arc<dyn ChatScopes>,
    /// Where each call is told.
    pub events: Events,
    /// Misbehaving: a scope naming no chat of the caller's is taken as no scope at all.
    pub takes_foreign_scope: bool,
    /// Misbehaving: a scope naming no chat of the caller's is refused as an internal error.
    pub foreign_scope_internal: bool,
    /// Misbehaving: a chat's scope searches the whole library, not only the chat's bases.
    pub ignores_chat_bases: bool,
    /// Misbehaving: a call without a scope searches the whole library, not the default group.
    pub ignores_default_group: bool,
    /// Misbehaving: a chat's scope finds nothing, though the chat's bases hold what it asks.
    pub empties_chat_bases: bool,
    /// Misbehaving: a call without a scope finds nothing, though the default group holds it.
    pub empties_default_group: bool,
}

/// The search tool's name.
pub const SEARCH_TOOL: &str = "library_search";
/// The tool listing the bases within reach.
pub const BASES_TOOL: &str = "library_bases";

/// How many hits a search gives unless asked for fewer.
const DEFAULT_LIMIT: usize = 5;

/// The `/mcp` service, for [`axum::Router::route_service`]. Stateless (no MCP session to keep),
/// answering in JSON; any `Host` is accepted, since fake-instance is often reached by a
/// container's name in CI.
pub fn service(context: McpContext) -> StreamableHttpService<LibraryServer, NeverSessionManager> {
    let config = StreamableHttpServerConfig::default()
        .disable_allowed_hosts()
        .with_legacy_session_mode(false)
        .with_json_response(true);
    StreamableHttpService::new(
        move || Ok(LibraryServer::new(context.clone())),
        Arc::new(NeverSessionManager::default()),
        config,
    )
}

/// The library's MCP server, made afresh for each request.
#[derive(Clone)]
pub struct LibraryServer {
    context: McpContext,
}

impl LibraryServer {
    fn new(context: McpContext) -> Self {
        Self { context }
    }

    /// Where a misbehaving instance looks for a call with this reach: the whole library, or
    /// nowhere, where it should look within a chat's bases or the default group.
    fn misread(&self, reach: &Reach) -> Reach {
        let whole = Reach::Chat {
            session_id: String::new(),
            bases: Vec::new(),
        };
        // A base no library has: a search within it finds nothing.
        let nowhere = Reach::Chat {
            session_id: String::new(),
            bases: vec!["no-such-base".into()],
        };
        match reach {
            Reach::Chat { .. } if self.context.ignores_chat_bases => whole,
            Reach::DefaultGroup if self.context.ignores_default_group => whole,
            Reach::Chat { .. } if self.context.empties_chat_bases => nowhere,
            Reach::DefaultGroup if self.context.empties_default_group => nowhere,
            _ => reach.clone(),
        }
    }

    /// Answers one call, or refuses its scope.
    fn call(
        &self,
        caller: &Caller,
        request: &CallToolRequestParams,
        meta: Option<&Value>,
    ) -> Outcome {
        let library = self.context.library.as_ref();
        let reach = match library::reach(meta, &caller.device, self.context.scopes.as_ref()) {
            Ok(reach) => reach,
            Err(library::ScopeError::Foreign(_)) if self.context.takes_foreign_scope => {
                Reach::DefaultGroup
            }
            // Misbehaving: the foreign scope refused, but as -32603, not -32602.
            Err(why @ library::ScopeError::Foreign(_)) if self.context.foreign_scope_internal => {
                return Outcome::Broken(why.to_string());
            }
            Err(why) => return Outcome::Refused(why.to_string()),
        };
        let searched = self.misread(&reach);
        let arguments = request.arguments.clone().unwrap_or_default();
        match request.name.as_ref() {
            SEARCH_TOOL => {
                let Some(query) = arguments.get("query").and_then(Value::as_str) else {
                    return Outcome::Failed(reach, "`query` must be a string".into());
                };
                let base = arguments.get("base").and_then(Value::as_str);
                let limit = arguments
                    .get("limit")
                    .and_then(Value::as_u64)
                    .and_then(|l| usize::try_from(l).ok())
                    .unwrap_or(DEFAULT_LIMIT);
                match library.search(&searched, query, base, limit) {
                    Ok(hits) => Outcome::Answered(reach, json!({ "results": hits })),
                    Err(why) => Outcome::Failed(reach, why.to_string()),
                }
            }
            BASES_TOOL => {
                let bases: Vec<Value> = library
                    .bases_within(&searched)
                    .iter()
                    .map(|b| json!({ "id": b.id, "name": b.name, "documents": b.documents.len() }))
                    .collect();
                Outcome::Answered(reach, json!({ "bases": bases }))
            }
            other => Outcome::Unknown(other.to_string()),
        }
    }
}

/// What became of a call.
enum Outcome {
    /// Answered with this JSON.
    Answered(Reach, Value),
    /// The tool ran and failed (a tool error the model reads, not a protocol error).
    Failed(Reach, String),
    /// The scope was refused (-32602).
    Refused(String),
    /// Refused as an internal error (-32603), misbehaving.
    Broken(String),
    /// No such tool (-32602, as MCP answers an unknown tool).
    Unknown(String),
}

impl Outcome {
    /// How the call reads in the `http/mcp` message.
    fn describe(&self) -> Value {
        let reach = |r: &Reach| match r {
            Reach::DefaultGroup => json!("default_group"),
            Reach::Chat { session_id, .. } => json!({ "chat": session_id }),
        };
        match self {
            Outcome::Answered(r, _) => json!({ "outcome": "answered", "reach": reach(r) }),
            Outcome::Failed(r, why) => {
                json!({ "outcome": "tool_error", "reach": reach(r), "error": why })
            }
            Outcome::Refused(why) | Outcome::Broken(why) => {
                json!({ "outcome": "refused", "error": why })
            }
            Outcome::Unknown(name) => {
                json!({ "outcome": "refused", "error": format!("no tool `{name}`") })
            }
        }
    }
}

fn tools() -> Vec<Tool> {
    let schema = |value: Value| -> Arc<Map<String, Value>> {
        Arc::new(match value {
            Value::Object(map) => map,
            _ => Map::new(),
        })
    };
    vec![
        Tool::new(
            SEARCH_TOOL,
            "Search the account's knowledge bases (within the chat's scope) for documents",
            schema(json!({
                "type": "object",
                "properties": {
                    "query": { "type": "string", "description": "words to look for" },
                    "base": { "type": "string", "description": "one knowledge base, by id or name" },
                    "limit": { "type": "integer", "minimum": 1 }
                },
                "required": ["query"]
            })),
        ),
        Tool::new(
            BASES_TOOL,
            "List the knowledge bases this chat may search",
            schema(json!({ "type": "object", "properties": {} })),
        ),
    ]
}

impl ServerHandler for LibraryServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(
                "fake-instance library",
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions("The LLeMbas account's library (a test double).")
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        // The token middleware ran before rmcp: its `Caller` rides in the HTTP request's parts.
        let caller = context
            .extensions
            .get::<Parts>()
            .and_then(|parts| parts.extensions.get::<Caller>())
            .cloned()
            .ok_or_else(|| ErrorData::internal_error("the caller is unknown", None))?;
        // rmcp moves the request's `_meta` into the context before the handler runs.
        let meta = request
            .meta
            .as_ref()
            .or((!context.meta.0.is_empty()).then_some(&context.meta))
            .and_then(|m| serde_json::to_value(m).ok());
        let outcome = self.call(&caller, &request, meta.as_ref());
        let mut message = json!({
            "at_ms": self.context.events.now_ms(),
            "device": caller.device,
            "tool": request.name,
            "arguments": request.arguments,
            "meta": meta,
        });
        // The scope as sent, on its own, so a step can say it is there or `$absent`.
        if let Some(scope) = meta.as_ref().and_then(|m| m.pointer("/lembas/scope")) {
            message["scope"] = scope.clone();
        }
        if let (Value::Object(m), Value::Object(d)) = (&mut message, outcome.describe()) {
            m.extend(d);
        }
        self.context.events.emit(HTTP_MCP, message);
        match outcome {
            Outcome::Answered(_, value) => {
                Ok(CallToolResult::success(vec![ContentBlock::text(value.to_string())]).into())
            }
            Outcome::Failed(_, why) => {
                Ok(CallToolResult::error(vec![ContentBlock::text(why)]).into())
            }
            Outcome::Refused(why) => Err(ErrorData::invalid_params(why, None)),
            Outcome::Broken(why) => Err(ErrorData::internal_error(why, None)),
            Outcome::Unknown(name) => {
                Err(ErrorData::invalid_params(format!("no tool `{name}`"), None))
            }
        }
    }
}
