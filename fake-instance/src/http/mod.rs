//! The HTTP API a LLeMbas CLI uses on its instance, besides the link (the spec's section on the
//! HTTP API the CLI uses): the models it lists, an OpenAI-compatible scripted chat model, usage,
//! the account's personalization, the instance's description and the library over MCP. Every
//! route sits behind a device token; each endpoint is a module of its own, and
//! [`HttpConfig`] gathers what a run (a scenario's `instance.http`) may set for each.

mod auth;
mod chat;
pub(crate) mod discovery;
mod events;
mod instance_info;
mod library;
mod mcp;
mod models;
mod personalization;
mod reply;
mod usage;

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use axum::Router;
use axum::routing::get;
use harness::lembas::Discovery;
use serde::Deserialize;
use serde_json::Value;

pub(crate) use auth::bearer;
use chat::ChatMemory;
pub use chat::{
    ChatLog, ChatScript, Fault, LoggedRequest, Pattern, Reply, TokenUsage, ToolCallScript, When,
};
pub use discovery::DiscoveryFault;
pub use events::{
    EventSink, Events, HTTP_CHAT, HTTP_DISCOVERY, HTTP_INSTANCE, HTTP_MCP, HTTP_MODELS,
    HTTP_PERSONALIZATION, HTTP_USAGE,
};
pub use library::{ChatScopes, Document, Hit, KnowledgeBase, LibraryConfig, Reach, SearchError};
pub use models::{ModelEntry, ProviderField};
pub use personalization::{Personalization, PersonalizationConfig, PersonalizationWrite};
pub use usage::{DeviceUsage, MonthUsage, Plan, UsageConfig, Window};

/// What the HTTP API serves. Every field has a default, so `{}` is a working instance; unknown
/// keys are refused so a typo in a scenario is an error, not a silently ignored setting.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct HttpConfig {
    /// The models `GET /v1/models` lists. Default: chat model `echo` and embedding model `embed`,
    /// both from provider `fake`.
    pub models: Vec<ModelEntry>,
    /// When a model entry carries its `provider` field.
    pub provider_field: ProviderField,
    /// Answer chat completions for any `model`; by default only a chat model `/v1/models` serves,
    /// under the id it serves it with, is answered (others get 404), which catches a CLI that
    /// sends its own ref instead of the served id.
    pub accept_any_model: bool,
    /// The chat model's script: the first that matches a request answers it; none: echo.
    pub scripts: Vec<ChatScript>,
    /// What `GET /v1/usage` says.
    pub usage: UsageConfig,
    /// The account's personalization and who may write it.
    pub personalization: PersonalizationConfig,
    /// What `GET /api/v1/instance` says, as is. Default: a name and this crate's version.
    pub instance: Value,
    /// Discovery answered wrong on purpose (a status, a field left out, a slow answer).
    pub discovery: discovery::DiscoveryFault,
    /// The account's library, which `/mcp` serves.
    pub library: LibraryConfig,
    /// Each token's scopes; a token without an entry has every scope. Every token named here is
    /// accepted as a device's token (besides `--token`).
    pub token_scopes: BTreeMap<String, Vec<String>>,
    /// Paths that need a scope (path → scope), e.g. `/v1/usage: usage`. `/mcp` always needs
    /// `library` (the spec's paragraph on the library). Default: none more.
    pub route_scopes: BTreeMap<String, String>,
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            models: models::default_models(),
            provider_field: ProviderField::default(),
            accept_any_model: false,
            scripts: Vec::new(),
            usage: UsageConfig::default(),
            personalization: PersonalizationConfig::default(),
            instance: instance_info::default_instance(),
            discovery: discovery::DiscoveryFault::default(),
            library: LibraryConfig::default(),
            token_scopes: BTreeMap::new(),
            route_scopes: BTreeMap::new(),
        }
    }
}

/// What the HTTP routes share: the configuration, the device tokens, discovery (which says
/// whether the instance speaks protocol 2), and the run's memory (journals, saved settings).
/// Cheap to clone; clones share the memory.
#[derive(Clone)]
pub struct HttpState {
    config: Arc<HttpConfig>,
    library: Arc<LibraryConfig>,
    tokens: Arc<Vec<String>>,
    discovery: Arc<RwLock<Discovery>>,
    events: Events,
    chat: ChatMemory,
    personalization: personalization::Store,
    scopes: Arc<dyn ChatScopes>,
    discovery_served: Arc<discovery::Served>,
    misbehave: harness::rules::Misbehaviours,
}

impl HttpState {
    /// The state of a run's HTTP API, for these device tokens and this (live) discovery.
    pub fn new(
        config: HttpConfig,
        tokens: Arc<Vec<String>>,
        discovery: Arc<RwLock<Discovery>>,
    ) -> Self {
        let chat = ChatMemory::new(config.scripts.len());
        let personalization = personalization::Store::new(&config.personalization);
        Self {
            library: Arc::new(config.library.clone()),
            config: Arc::new(config),
            tokens,
            discovery,
            events: Events::default(),
            chat,
            personalization,
            scopes: Arc::new(library::NoChats),
            discovery_served: Arc::default(),
            misbehave: harness::rules::Misbehaviours::default(),
        }
    }

    /// The rules of the HTTP API this instance breaks (`--misbehave`).
    pub fn misbehaving(mut self, misbehave: harness::rules::Misbehaviours) -> Self {
        self.misbehave = misbehave;
        self
    }

    /// The chats a library call's scope may name (fake-instance's own chats on the link side).
    pub fn with_scopes(mut self, scopes: Arc<dyn ChatScopes>) -> Self {
        self.scopes = scopes;
        self
    }

    /// Tells `sink` of every request from now on: each chat completion as `http/chat`, each
    /// library call as `http/mcp`, and each other request by its endpoint (see [`HTTP_CHAT`]).
    pub fn observe(&self, sink: EventSink) {
        let for_chat = sink.clone();
        self.chat.log.observe(Arc::new(move |request| {
            if let Ok(params) = serde_json::to_value(request) {
                for_chat(HTTP_CHAT, params);
            }
        }));
        self.events.observe(sink);
    }

    /// Every chat completion request asked so far, in order (for steps that check what the
    /// model was asked, and how often).
    pub fn chat_log(&self) -> &ChatLog {
        &self.chat.log
    }

    /// Every `PUT /v1/me/personalization` so far, in order, with its answer's status.
    pub fn personalization_writes(&self) -> Vec<PersonalizationWrite> {
        self.personalization.writes()
    }

    /// The personalization as saved now.
    pub fn personalization(&self) -> Personalization {
        self.personalization.current()
    }

    /// The personalization as the run started, before any write.
    pub fn personalization_at_start(&self) -> Personalization {
        self.personalization.first()
    }

    /// What the library's calls read.
    fn mcp_context(&self) -> mcp::McpContext {
        mcp::McpContext {
            library: self.library.clone(),
            scopes: self.scopes.clone(),
            events: self.events.clone(),
            takes_foreign_scope: self
                .misbehave
                .breaks(harness::rules::ids::INSTANCE_LIBRARY_FOREIGN_SCOPE),
            foreign_scope_internal: self.misbehave.breaks_way(
                harness::rules::ids::INSTANCE_LIBRARY_FOREIGN_SCOPE,
                "internal_error",
            ),
            ignores_chat_bases: self
                .misbehave
                .breaks(harness::rules::ids::INSTANCE_LIBRARY_SCOPED),
            ignores_default_group: self
                .misbehave
                .breaks(harness::rules::ids::INSTANCE_LIBRARY_UNSCOPED),
            empties_chat_bases: self
                .misbehave
                .breaks_way(harness::rules::ids::INSTANCE_LIBRARY_SCOPED, "nothing"),
            empties_default_group: self
                .misbehave
                .breaks_way(harness::rules::ids::INSTANCE_LIBRARY_UNSCOPED, "nothing"),
        }
    }

    /// Whether the instance speaks link protocol 2 now: its discovery lists 2 (the spec's
    /// section on versions and discovery). A scenario may change discovery between dials, so
    /// this is read per request.
    fn speaks_2(&self) -> bool {
        self.discovery
            .read()
            .map(|d| d.protocol_for_device() >= 2)
            .unwrap_or(false)
    }
}

// What each endpoint reads of the state: the endpoints know only their own part of it.

impl models::ModelsSource for HttpState {
    fn models(&self) -> &[ModelEntry] {
        &self.config.models
    }
    fn provider_field(&self) -> ProviderField {
        self.config.provider_field
    }
    fn speaks_protocol_2(&self) -> bool {
        self.speaks_2()
    }
    fn serves_a_bare_id(&self) -> bool {
        self.misbehave
            .breaks(harness::rules::ids::INSTANCE_MODELS_PROVIDER_IDS)
    }
    fn serves_a_colon_id(&self) -> bool {
        self.misbehave
            .breaks_way(harness::rules::ids::INSTANCE_MODELS_PROVIDER_IDS, "colon")
    }
    fn events(&self) -> &Events {
        &self.events
    }
}

impl chat::ChatSource for HttpState {
    fn accept_any_model(&self) -> bool {
        self.config.accept_any_model
    }
    fn models(&self) -> &[ModelEntry] {
        &self.config.models
    }
    fn speaks_protocol_2(&self) -> bool {
        self.speaks_2()
    }
    fn scripts(&self) -> &[ChatScript] {
        &self.config.scripts
    }
    fn memory(&self) -> &ChatMemory {
        &self.chat
    }
    fn now_ms(&self) -> u64 {
        self.events.now_ms()
    }
}

impl usage::UsageSource for HttpState {
    fn usage(&self) -> &UsageConfig {
        &self.config.usage
    }
    fn events(&self) -> &Events {
        &self.events
    }
}

impl personalization::PersonalizationSource for HttpState {
    fn store(&self) -> &personalization::Store {
        &self.personalization
    }
    fn breaks(&self, rule: &str) -> bool {
        self.misbehave.breaks(rule)
    }
    fn breaks_way(&self, rule: &str, name: &str) -> bool {
        self.misbehave.breaks_way(rule, name)
    }
    fn events(&self) -> &Events {
        &self.events
    }
}

impl instance_info::InstanceSource for HttpState {
    fn instance(&self) -> &Value {
        &self.config.instance
    }
    fn events(&self) -> &Events {
        &self.events
    }
}

impl discovery::DiscoverySource for HttpState {
    fn fault(&self) -> &discovery::DiscoveryFault {
        &self.config.discovery
    }
    fn served(&self) -> &discovery::Served {
        &self.discovery_served
    }
    fn events(&self) -> &Events {
        &self.events
    }
}

impl auth::TokenSource for HttpState {
    fn tokens(&self) -> &[String] {
        &self.tokens
    }
    fn refuses_device_token(&self) -> bool {
        self.misbehave
            .breaks(harness::rules::ids::INSTANCE_HTTP_DEVICE_TOKEN)
    }
    fn token_scopes(&self, token: &str) -> Option<Vec<String>> {
        self.config.token_scopes.get(token).cloned()
    }
    fn route_scope(&self, path: &str) -> Option<&str> {
        self.config.route_scopes.get(path).map(String::as_str)
    }
}

/// The API's routes, each behind a device token.
pub fn router(state: HttpState) -> Router {
    Router::new()
        .route("/v1/models", get(models::list::<HttpState>))
        .route(
            "/v1/chat/completions",
            axum::routing::post(chat::complete::<HttpState>),
        )
        .route("/v1/usage", get(usage::show::<HttpState>))
        .route(
            "/v1/me/personalization",
            get(personalization::show::<HttpState>).put(personalization::update::<HttpState>),
        )
        .route("/api/v1/instance", get(instance_info::show::<HttpState>))
        .route_service("/mcp", mcp::service(state.mcp_context()))
        // `route_layer`: an unknown path stays a 404 rather than becoming a 401.
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            auth::require_token::<HttpState>,
        ))
        .with_state(state)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_empty_section_is_the_default_and_a_typo_is_an_error() {
        let config: HttpConfig = serde_json::from_value(json!({})).expect("{} is valid");
        assert!(config.scripts.is_empty());
        let typo = serde_json::from_value::<HttpConfig>(json!({"modles": []}));
        assert!(typo.is_err());
    }

    #[test]
    fn a_whole_section_reads() {
        let config: HttpConfig = serde_json::from_value(json!({
            "models": [{"id": "m", "provider": "p", "kind": "chat"}],
            "provider_field": "always",
            "scripts": [{
                "when": {"last_user": "^hi"},
                "times": 1,
                "reply": {"text": "hello", "fault": {"rate_limited": {"retry_after_s": 2}}}
            }],
            "usage": {"absent": true},
            "personalization": {"available": false},
            "instance": {"name": "x"},
            "token_scopes": {"t": ["library"]},
            "route_scopes": {"/v1/usage": "usage"}
        }))
        .expect("valid");
        assert_eq!(config.models[0].id, "m");
        assert!(config.usage.absent);
    }
}
