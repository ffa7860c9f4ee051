//! `GET /v1/usage`: the account's plan, balance and spend, in the shape the spec's section on the
//! HTTP API gives, with every optional field settable, or a 404 for an instance without it.
//!
//! The configuration is the answer: what a scenario writes is what the CLI reads, so a test can
//! put any case of the shape (no plan, `admin`, money beside credits, windows) in front of it.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Deserializer, Serialize};

use super::events::{Events, HTTP_USAGE};
use super::reply::detail;

/// What `GET /v1/usage` reads of the API's state.
pub trait UsageSource: Clone + Send + Sync + 'static {
    /// What the usage says.
    fn usage(&self) -> &UsageConfig;
    /// Where the request is told.
    fn events(&self) -> &Events;
}

/// What `GET /v1/usage` answers.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct UsageConfig {
    /// Answer 404: an instance without usage (the CLI then shows nothing).
    #[serde(skip_serializing)]
    pub absent: bool,
    /// The plan; `None`: `null` (the CLI then shows no balance in its status bar).
    pub plan: Option<Plan>,
    /// Credits left; `None`: `null`.
    pub balance: Option<f64>,
    /// This month's spend.
    pub month: MonthUsage,
    /// This device's spend.
    pub device: DeviceUsage,
    /// What the numbers count (`credits`).
    pub unit: String,
    /// `EUR`, `USD` or `GBP`; `None`: no key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub currency: Option<String>,
    /// Money per credit; `None`: no key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub credit_value: Option<f64>,
    /// No limit, never refused; `None`: no key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub admin: Option<bool>,
    /// The balance in money: absent (no key), `null`, or a number.
    #[serde(deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub balance_money: Option<Option<f64>>,
    /// Rolling spending windows; `None`: no key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub windows: Option<Vec<Window>>,
}

impl Default for UsageConfig {
    /// A plan with most of its month's credits left, no money and no windows: what an instance
    /// that predates the optional fields serves.
    fn default() -> Self {
        Self {
            absent: false,
            plan: Some(Plan::default()),
            balance: Some(750.5),
            month: MonthUsage::default(),
            device: DeviceUsage::default(),
            unit: "credits".into(),
            currency: None,
            credit_value: None,
            admin: None,
            balance_money: None,
            windows: None,
        }
    }
}

/// A plan.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Plan {
    /// Its name.
    pub name: String,
    /// Credits it grants each month.
    pub credits_per_month: f64,
}

/// The month's spend.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct MonthUsage {
    /// When the month began (ISO date).
    pub from: String,
    /// Tokens in.
    pub tokens_in: u64,
    /// Tokens out.
    pub tokens_out: u64,
    /// Credits spent; `None`: `null`.
    pub cost: Option<f64>,
    /// The spend in money: absent (no key), `null`, or a number.
    #[serde(deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub cost_money: Option<Option<f64>>,
}

/// The device's spend.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct DeviceUsage {
    /// Tokens in.
    pub tokens_in: u64,
    /// Tokens out.
    pub tokens_out: u64,
    /// Credits spent; `None`: `null`.
    pub cost: Option<f64>,
    /// The spend in money: absent (no key), `null`, or a number.
    #[serde(deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub cost_money: Option<Option<f64>>,
}

// The nested defaults are sensible numbers too, so a scenario that sets one field of `month`
// keeps plausible values in the others.

impl Default for Plan {
    fn default() -> Self {
        Self {
            name: "Fake plan".into(),
            credits_per_month: 1000.0,
        }
    }
}

impl Default for MonthUsage {
    fn default() -> Self {
        Self {
            from: "2026-10-01".into(),
            tokens_in: 120_000,
            tokens_out: 34_000,
            cost: Some(249.5),
            cost_money: None,
        }
    }
}

impl Default for DeviceUsage {
    fn default() -> Self {
        Self {
            tokens_in: 40_000,
            tokens_out: 10_000,
            cost: Some(80.25),
            cost_money: None,
        }
    }
}

/// A rolling spending window.
#[derive(Debug, Clone, PartialEq, Default, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Window {
    /// Its name (`5h`, `week`).
    pub window: String,
    /// Its limit, in credits.
    pub limit: f64,
    /// Spent in it, in credits.
    pub spent: f64,
    /// When spend frees up (ISO time), or `null`.
    pub frees_at: Option<String>,
}

/// Reads a key that is present as `Some(value or null)`; with `#[serde(default)]` an absent key
/// stays `None`. The spec tells "not sent" from "sent as null" for the `*_money` fields.
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Option<f64>>, D::Error> {
    Option::<f64>::deserialize(d).map(Some)
}

/// `GET /v1/usage`.
pub async fn show<S: UsageSource>(State(state): State<S>) -> Response {
    let usage = state.usage();
    let response = if usage.absent {
        detail(StatusCode::NOT_FOUND, "this instance has no usage")
    } else {
        axum::Json(usage).into_response()
    };
    state.events().emit(
        HTTP_USAGE,
        serde_json::json!({ "at_ms": state.events().now_ms(), "status": response.status().as_u16() }),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn absent_null_and_number_stay_apart() {
        let usage: UsageConfig = serde_json::from_value(json!({
            "balance_money": null,
            "month": {"cost_money": 1.5},
        }))
        .expect("valid");
        let served = serde_json::to_value(&usage).expect("serializes");
        assert_eq!(served["balance_money"], json!(null));
        assert!(
            served
                .as_object()
                .is_some_and(|o| o.contains_key("balance_money"))
        );
        assert_eq!(served["month"]["cost_money"], json!(1.5));
        assert!(served["device"].get("cost_money").is_none());
        assert!(served.get("absent").is_none());
        assert!(served.get("currency").is_none());
    }
}
