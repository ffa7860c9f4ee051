//! `POST /v1/chat/completions`: an OpenAI-compatible model that answers from a script.
//!
//! The first script whose `when` matches a request answers it; with none, the model echoes the
//! last user message. Answers go out whole or streamed, with reasoning, tool calls and the
//! faults a provider shows (429, 500, a cut stream, a slow start). Only a chat model the
//! instance serves is answered, under the id it serves it with (the spec's paragraph on how a
//! device names an instance's models: requests go to `/v1` with the served id). Every request
//! that parses (one without a model too, before it is refused) is journaled in a [`ChatLog`].

mod answer;
mod deliver;
mod log;
mod request;
mod script;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

pub use log::{ChatLog, LoggedRequest};
pub use script::{ChatScript, Fault, Pattern, Reply, TokenUsage, ToolCallScript, When};

use super::models::ModelEntry;
use super::reply::json_body;

/// What `POST /v1/chat/completions` reads of the API's state.
pub trait ChatSource: Clone + Send + Sync + 'static {
    /// Whether any `model` is answered, not only a served chat model.
    fn accept_any_model(&self) -> bool;
    /// The models served.
    fn models(&self) -> &[ModelEntry];
    /// Whether the instance speaks link protocol 2 now (its discovery lists 2).
    fn speaks_protocol_2(&self) -> bool;
    /// The chat model's scripts.
    fn scripts(&self) -> &[ChatScript];
    /// The requests so far, and how often each script answered.
    fn memory(&self) -> &ChatMemory;
    /// When the API started.
    fn now_ms(&self) -> u64;
}
use answer::Answer;
use deliver::Cut;
use request::ChatRequest;

/// What the chat model remembers over a run.
#[derive(Clone)]
pub struct ChatMemory {
    /// Every request.
    pub log: ChatLog,
    /// How many requests each script has answered (for `times`).
    uses: Arc<Mutex<Vec<u32>>>,
    /// The next completion's number, for its id.
    next_id: Arc<AtomicU64>,
}

impl ChatMemory {
    pub(super) fn new(scripts: usize) -> Self {
        Self {
            log: ChatLog::default(),
            uses: Arc::new(Mutex::new(vec![0; scripts])),
            next_id: Arc::new(AtomicU64::new(1)),
        }
    }

    /// The index of the script that answers the request, counting the use; `None`: the echo.
    fn choose(&self, scripts: &[ChatScript], request: &ChatRequest) -> Option<usize> {
        let mut uses = self.uses.lock().unwrap_or_else(PoisonError::into_inner);
        let index = scripts.iter().enumerate().position(|(i, script)| {
            let used = uses.get(i).copied().unwrap_or(0);
            script.times.is_none_or(|times| used < times) && script.when.matches(request)
        })?;
        if let Some(used) = uses.get_mut(index) {
            *used += 1;
        }
        Some(index)
    }
}

/// An error in both shapes a client may read: LLeMbas's `detail` and OpenAI's `error` object
/// (which official OpenAI clients turn into their exception's message).
fn refuse(status: StatusCode, kind: &str, message: impl Into<String>) -> Response {
    let message = message.into();
    let body = json!({
        "detail": message,
        "error": { "message": message, "type": kind, "code": null },
    });
    (status, axum::Json(body)).into_response()
}

/// The refusal of a model this instance does not answer, if it is one.
fn refuse_model(state: &impl ChatSource, model: &str) -> Option<Response> {
    if state.accept_any_model() {
        return None;
    }
    let speaks_2 = state.speaks_protocol_2();
    match state
        .models()
        .iter()
        .find(|m| m.served_id(speaks_2) == model)
    {
        Some(entry) if entry.is_chat() => None,
        Some(_) => Some(refuse(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            format!("`{model}` is not a chat model"),
        )),
        None => Some(refuse(
            StatusCode::NOT_FOUND,
            "model_not_found",
            format!("no model `{model}` is served here"),
        )),
    }
}

/// `POST /v1/chat/completions`.
pub async fn complete<S: ChatSource>(State(state): State<S>, body: Bytes) -> Response {
    let at_ms = state.now_ms();
    let request = match json_body(&body) {
        Err(why) => return refuse(StatusCode::BAD_REQUEST, "invalid_request_error", why),
        Ok(body) => match ChatRequest::read(&body) {
            Ok(request) => request,
            Err(why) => {
                return refuse(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "invalid_request_error",
                    why,
                );
            }
        },
    };
    let refused = if request.model.is_empty() {
        Some(refuse(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_request_error",
            "`model` must be a non-empty string".to_string(),
        ))
    } else {
        refuse_model(&state, &request.model)
    };
    // A refused request uses up no script: `times` counts answers.
    let script = match refused {
        Some(_) => None,
        None => state.memory().choose(state.scripts(), &request),
    };
    let default_reply = Reply::default();
    let reply = script
        .and_then(|i| state.scripts().get(i))
        .map_or(&default_reply, |s| &s.reply);
    let response = refused.unwrap_or_else(|| answer(&state, &request, reply));
    state.memory().log.push(LoggedRequest {
        at_ms,
        model: request.model.clone(),
        last_user: request.last_user().map(str::to_string),
        system: request.system(),
        tool_result: request.tool_result(),
        stream: request.stream,
        turn_hint: request.turn_hint(),
        script,
        tools: request.tools.clone(),
        // A refused request was answered by no script: its reply is the default, with none.
        called: reply.tool_calls.iter().map(|c| c.name.clone()).collect(),
        status: response.status().as_u16(),
    });
    if let (Some(_), Some(Fault::SlowFirstByte { ms })) = (script, &reply.fault) {
        // Journaled first, so a step sees the request while its answer is still held back.
        // Bounded by the configuration; a client that gives up drops this future with it.
        tokio::time::sleep(Duration::from_millis(*ms)).await;
    }
    response
}

/// The answer to a request a reply was chosen for, faults included (a slow first byte is the
/// caller's: it holds back the answer this makes).
fn answer(state: &impl ChatSource, request: &ChatRequest, reply: &Reply) -> Response {
    let cut = match reply.fault {
        Some(Fault::RateLimited { retry_after_s }) => {
            let mut response = refuse(
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limit_exceeded",
                format!("rate limited: retry after {retry_after_s} s"),
            );
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(retry_after_s));
            return response;
        }
        Some(Fault::ServerError) => {
            return refuse(
                StatusCode::INTERNAL_SERVER_ERROR,
                "server_error",
                "the model's provider failed",
            );
        }
        Some(Fault::CutStream {
            after_chunks,
            reset,
        }) => Some(Cut {
            after_chunks,
            reset,
        }),
        Some(Fault::SlowFirstByte { .. }) | None => None,
    };
    let number = state.memory().next_id.fetch_add(1, Ordering::Relaxed);
    let created = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let answer = Answer::new(format!("chatcmpl-fake-{number}"), created, request, reply);
    if request.stream {
        deliver::streamed(
            answer.chunks(),
            Duration::from_millis(reply.chunk_delay_ms),
            cut,
        )
    } else {
        deliver::whole(&answer.completion(), cut)
    }
}
