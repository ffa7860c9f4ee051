//! `GET /api/v1/instance`: the instance's description, served as configured.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::events::{Events, HTTP_INSTANCE};

/// What `GET /api/v1/instance` reads of the API's state.
pub trait InstanceSource: Clone + Send + Sync + 'static {
    /// The description served.
    fn instance(&self) -> &Value;
    /// Where the request is told.
    fn events(&self) -> &Events;
}

/// The description a run serves unless told otherwise: a name that says it is the fake, and
/// this crate's version.
pub fn default_instance() -> Value {
    json!({
        "name": "LLeMbas (fake)",
        "version": env!("CARGO_PKG_VERSION"),
    })
}

/// `GET /api/v1/instance`.
pub async fn show<S: InstanceSource>(State(state): State<S>) -> Response {
    state.events().emit(
        HTTP_INSTANCE,
        json!({ "at_ms": state.events().now_ms(), "status": 200 }),
    );
    axum::Json(state.instance().clone()).into_response()
}
