//! Discovery answered wrong on purpose (`instance.http.discovery`): a status, a missing field, a
//! body of the scenario's own, a slow answer — for the first few requests or for all of them, so
//! a scenario can check how a device logs in and dials against a broken or slow instance (the
//! spec's section on versions and discovery says what a correct one serves).

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::Value;

use super::events::{Events, HTTP_DISCOVERY};
use super::reply::detail;

/// What discovery's answer reads of the API's state.
pub trait DiscoverySource {
    /// The fault to serve, if any.
    fn fault(&self) -> &DiscoveryFault;
    /// How many discovery requests were answered.
    fn served(&self) -> &Served;
    /// Where the request is told.
    fn events(&self) -> &Events;
}

/// How discovery goes wrong. Default: it does not.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct DiscoveryFault {
    /// Answer with this status (and a `detail`) instead of discovery.
    pub status: Option<u16>,
    /// Leave these fields out (`protocol`, `protocols`).
    pub omit: Vec<String>,
    /// Serve this body, as is, instead of discovery.
    pub body: Option<Value>,
    /// Hold every answer back this long.
    pub delay_ms: u64,
    /// Go wrong only for the first this many requests, then serve discovery as it is.
    pub times: Option<u32>,
}

impl DiscoveryFault {
    fn is_none(&self) -> bool {
        self.status.is_none() && self.omit.is_empty() && self.body.is_none() && self.delay_ms == 0
    }
}

/// How many discovery requests a run has answered.
#[derive(Debug, Default)]
pub struct Served(AtomicU32);

/// Discovery's answer: `correct` as the instance would serve it, or what the fault makes of it.
pub async fn answer(state: &impl DiscoverySource, correct: Value) -> Response {
    let fault = state.fault();
    let number = state.served().0.fetch_add(1, Ordering::Relaxed);
    state.events().emit(
        HTTP_DISCOVERY,
        serde_json::json!({ "at_ms": state.events().now_ms() }),
    );
    if fault.is_none() || fault.times.is_some_and(|times| number >= times) {
        return axum::Json(correct).into_response();
    }
    if fault.delay_ms > 0 {
        // Bounded by the configuration; a client that gives up drops this future with it.
        tokio::time::sleep(Duration::from_millis(fault.delay_ms)).await;
    }
    if let Some(status) = fault.status {
        let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        return detail(status, "discovery failed (a fault the scenario set)");
    }
    let mut body = fault.body.clone().unwrap_or(correct);
    if let Value::Object(fields) = &mut body {
        for field in &fault.omit {
            fields.remove(field);
        }
    }
    axum::Json(body).into_response()
}
