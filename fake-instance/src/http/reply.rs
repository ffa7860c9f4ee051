//! The answers every endpoint shares: an error in LLeMbas's shape, and a request body read as
//! JSON without ever panicking on what the peer sent.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// An error answer in LLeMbas's shape: a JSON body whose `detail` says what went wrong.
pub(crate) fn detail(status: StatusCode, detail: impl Into<String>) -> Response {
    (status, axum::Json(json!({ "detail": detail.into() }))).into_response()
}

/// A request body as JSON, or why it is not. Bodies are the peer's: one that is not JSON is a
/// 400 saying why, never a panic.
pub(crate) fn json_body(bytes: &[u8]) -> Result<Value, String> {
    serde_json::from_slice(bytes).map_err(|e| format!("the request body is not JSON: {e}"))
}
