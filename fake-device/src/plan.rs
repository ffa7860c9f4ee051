//! The plan as ACP shows it: the flat entries of the `plan` session update, with the LLeMbas
//! structure beside them when the device lists `plan_state` (spec, `_lembas/plan`).

use serde_json::{Value, json};

/// How a misbehaving device gets ACP's flat list wrong; the default gets it right.
#[derive(Debug, Clone, Copy, Default)]
pub struct EntryFaults {
    /// A dropped task shown as `pending` rather than `completed`.
    pub dropped_pending: bool,
    /// Each phase listed as an entry too, before its tasks.
    pub phases_as_entries: bool,
}

/// ACP's flat list of a plan: every task of every phase, `dropped` shown as `completed` (ACP has
/// no word for it), with the faults of a misbehaving device.
pub fn plan_entries_with(plan: &Value, faults: EntryFaults) -> Vec<Value> {
    let entry = |content: &str, status: &str| json!({ "content": content, "priority": "medium", "status": status });
    let title = |item: &Value| {
        item.get("title")
            .or_else(|| item.get("content"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let mut entries = Vec::new();
    for phase in plan
        .get("phases")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if faults.phases_as_entries {
            entries.push(entry(&title(phase), "pending"));
        }
        for task in phase
            .get("tasks")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let status = match task.get("status").and_then(Value::as_str) {
                Some("in_progress") => "in_progress",
                Some("dropped") if faults.dropped_pending => "pending",
                Some("completed") | Some("dropped") => "completed",
                _ => "pending",
            };
            entries.push(entry(&title(task), status));
        }
    }
    entries
}

/// The `plan` session update for a plan (`null`: cleared): ACP's flat entries, and with
/// `plan_state` the structure in `_meta.lembas.plan`.
pub fn plan_update(plan: &Value, plan_state: bool) -> Value {
    plan_update_with(plan, plan_state, EntryFaults::default())
}

/// [`plan_update`], with the faults of a misbehaving device.
pub fn plan_update_with(plan: &Value, plan_state: bool, faults: EntryFaults) -> Value {
    let mut update = json!({ "sessionUpdate": "plan", "entries": plan_entries_with(plan, faults) });
    if plan_state {
        update["_meta"] = json!({ "lembas": { "plan": plan } });
    }
    update
}
