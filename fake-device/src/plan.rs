//! The plan as ACP shows it: the flat entries of the `plan` session update, with the LLeMbas
//! structure beside them when the device lists `plan_state` (spec, `_lembas/plan`).

use serde_json::{Value, json};

/// ACP's flat list of a plan: every task of every phase, `dropped` shown as `completed` (ACP has
/// no word for it).
pub fn plan_entries(plan: &Value) -> Vec<Value> {
    plan.get("phases")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .flat_map(|phase| {
            phase
                .get("tasks")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
        })
        .map(|task| {
            let status = match task.get("status").and_then(Value::as_str) {
                Some("in_progress") => "in_progress",
                Some("completed") | Some("dropped") => "completed",
                _ => "pending",
            };
            let content = task
                .get("title")
                .or_else(|| task.get("content"))
                .and_then(Value::as_str)
                .unwrap_or_default();
            json!({ "content": content, "priority": "medium", "status": status })
        })
        .collect()
}

/// The `plan` session update for a plan (`null`: cleared): ACP's flat entries, and with
/// `plan_state` the structure in `_meta.lembas.plan`.
pub fn plan_update(plan: &Value, plan_state: bool) -> Value {
    let mut update = json!({ "sessionUpdate": "plan", "entries": plan_entries(plan) });
    if plan_state {
        update["_meta"] = json!({ "lembas": { "plan": plan } });
    }
    update
}
