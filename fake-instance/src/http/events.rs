//! What each endpoint tells a run of the requests it answers: the event names scenarios expect
//! on (link 0), the sink they go to, and the clock their `at_ms` reads.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use serde_json::Value;

/// Told of what happens on the HTTP API: a method name (`http/chat`, `http/mcp`, ...) and its
/// params, the shape a scenario's steps expect on.
pub type EventSink = Arc<dyn Fn(&'static str, Value) + Send + Sync>;

/// The message each chat completion request is to a scenario's steps.
pub const HTTP_CHAT: &str = "http/chat";
/// The message each discovery request is to a scenario's steps.
pub const HTTP_DISCOVERY: &str = "http/discovery";
/// The message each `GET /v1/models` is to a scenario's steps.
pub const HTTP_MODELS: &str = "http/models";
/// The message each `GET /v1/usage` is to a scenario's steps.
pub const HTTP_USAGE: &str = "http/usage";
/// The message each `GET` or `PUT /v1/me/personalization` is to a scenario's steps.
pub const HTTP_PERSONALIZATION: &str = "http/personalization";
/// The message each `GET /api/v1/instance` is to a scenario's steps.
pub const HTTP_INSTANCE: &str = "http/instance";
/// The message each library call on `/mcp` is to a scenario's steps.
pub const HTTP_MCP: &str = "http/mcp";

/// Where the endpoints' events go, and when the API started. Clones share both.
#[derive(Clone)]
pub struct Events {
    started: Instant,
    sink: Arc<Mutex<Option<EventSink>>>,
}

impl Default for Events {
    fn default() -> Self {
        Self {
            started: Instant::now(),
            sink: Arc::new(Mutex::new(None)),
        }
    }
}

impl Events {
    /// Tells `sink` of every event from now on.
    pub fn observe(&self, sink: EventSink) {
        *self.sink.lock().unwrap_or_else(PoisonError::into_inner) = Some(sink);
    }

    /// Tells the sink, if any, of one request.
    pub fn emit(&self, method: &'static str, params: Value) {
        let sink = self
            .sink
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if let Some(sink) = sink {
            sink(method, params);
        }
    }

    /// Milliseconds since the API started: the time journals carry.
    pub fn now_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }
}
