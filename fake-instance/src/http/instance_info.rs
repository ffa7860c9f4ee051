//! `GET /api/v1/instance`: the instance's description, served as configured.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::HttpState;

/// The description a run serves unless told otherwise: a name that says it is the fake, and
/// this crate's version.
pub fn default_instance() -> Value {
    json!({
        "name": "LLeMbas (fake)",
        "version": env!("CARGO_PKG_VERSION"),
    })
}

/// `GET /api/v1/instance`.
pub async fn show(State(state): State<HttpState>) -> Response {
    state.emit(
        super::HTTP_INSTANCE,
        json!({ "at_ms": state.now_ms(), "status": 200 }),
    );
    axum::Json(state.config.instance.clone()).into_response()
}
