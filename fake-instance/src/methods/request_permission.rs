//! `session/request_permission`, the approval card: which option the person picks under the
//! card policy, and the option a misbehaving client picks that the card never offered.

use serde_json::{Value, json};

use crate::settings::PermissionPolicy;

/// The answer `policy` gives; `None`: the policy leaves the card unanswered.
pub(crate) fn by_policy(policy: PermissionPolicy, params: &Value) -> Option<Value> {
    match policy {
        PermissionPolicy::AllowOnce => Some(permission(params, "once")),
        PermissionPolicy::AllowAlways => Some(permission(params, "session")),
        PermissionPolicy::Deny => Some(json!({
            "outcome": { "outcome": "selected", "optionId": "deny" },
            "_meta": { "lembas": { "feedback": "not now" } },
        })),
        PermissionPolicy::Ignore => None,
    }
}

/// Misbehaving: an option the card never offered.
pub(crate) fn unoffered_option() -> Value {
    json!({ "outcome": { "outcome": "selected", "optionId": "always_and_forever" } })
}

/// The option `wanted`, else the first that allows, else the card is cancelled.
fn permission(params: &Value, wanted: &str) -> Value {
    let options = params
        .get("options")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let id_of = |o: &Value| o.get("optionId").and_then(Value::as_str).map(String::from);
    let chosen = options
        .iter()
        .find(|o| o.get("optionId").and_then(Value::as_str) == Some(wanted))
        .and_then(id_of)
        .or_else(|| {
            options
                .iter()
                .find(|o| {
                    o.get("kind")
                        .and_then(Value::as_str)
                        .is_some_and(|k| k.starts_with("allow"))
                })
                .and_then(id_of)
        });
    match chosen {
        Some(option_id) => json!({ "outcome": { "outcome": "selected", "optionId": option_id } }),
        None => json!({ "outcome": { "outcome": "cancelled" } }),
    }
}
