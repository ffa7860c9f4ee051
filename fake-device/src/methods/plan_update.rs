//! The plan's `session/update`: when the model calls `plan_write`, the session's plan changes
//! and the client hears it as ACP shows a plan ([`crate::plan`]: the flat entries, with the
//! LLeMbas structure beside them when the device lists `plan_state`), and as the
//! `_lembas/event` that carries it (`plan`, or at spec 1.0.0 `todos`).

use harness::lembas::Spec;
use harness::rules::{Misbehaviours, ids};
use serde_json::{Value, json};

use crate::completion::{ToolCall, ToolOutcome};
use crate::events::Client;
use crate::plan::{EntryFaults, plan_entries_with, plan_update_with};
use crate::registry::Registry;

/// What a misbehaving device gets wrong when it tells a plan; all off by default.
#[derive(Debug, Clone, Copy, Default)]
struct Faults {
    /// How ACP's flat list is wrong.
    entries: EntryFaults,
    /// The update carries no structure, though the device lists `plan_state`.
    no_structure: bool,
    /// The last task is left out of the entries.
    task_missing: bool,
    /// A dropped task does not appear in the entries at all.
    dropped_left_out: bool,
    /// The update for a cleared plan repeats the plan it had.
    cleared_as_old: bool,
    /// A cleared plan is not told as an update.
    cleared_untold: bool,
    /// The plan update at spec 1.0.0 lists no entries.
    empty_at_1_0: bool,
    /// No plan update at spec 1.0.0.
    untold_at_1_0: bool,
    /// The event carries the plan as it was before this change.
    event_previous: bool,
    /// The event's plan has lost its phases.
    event_no_phases: bool,
    /// Without `plan_state`, the `plan` event is sent in place of `todos` (or of nothing).
    plan_event_unlisted: bool,
    /// The todos event carries none of the plan's entries.
    todos_empty: bool,
}

impl Faults {
    fn of(m: &Misbehaviours) -> Faults {
        Faults {
            entries: EntryFaults {
                dropped_pending: m.breaks(ids::DEVICE_PLAN_DROPPED_COMPLETED),
                phases_as_entries: m.breaks(ids::DEVICE_PLAN_ENTRIES_MATCH),
            },
            no_structure: m.breaks(ids::DEVICE_PLAN_UPDATE),
            task_missing: m.breaks_way(ids::DEVICE_PLAN_ENTRIES_MATCH, "task_missing"),
            dropped_left_out: m.breaks_way(ids::DEVICE_PLAN_DROPPED_COMPLETED, "left_out"),
            cleared_as_old: m.breaks_way(ids::DEVICE_PLAN_CLEARED, "old_plan"),
            cleared_untold: m.breaks(ids::DEVICE_PLAN_CLEARED),
            empty_at_1_0: m.breaks_way(ids::DEVICE_PLAN_UPDATE_1_0, "empty"),
            untold_at_1_0: m.breaks(ids::DEVICE_PLAN_UPDATE_1_0),
            event_previous: m.breaks(ids::DEVICE_EVENT_PLAN_MATCHES),
            event_no_phases: m.breaks_way(ids::DEVICE_EVENT_PLAN_MATCHES, "no_phases"),
            plan_event_unlisted: m.breaks(ids::DEVICE_EVENT_TODOS),
            todos_empty: m.breaks_way(ids::DEVICE_EVENT_TODOS, "empty"),
        }
    }
}

/// A plan change, as it is told: the plan now and the one it replaces (`null`: none).
struct Change<'a> {
    plan: &'a Value,
    previous: Value,
    /// The device lists `plan_state`.
    plan_state: bool,
    /// The link speaks spec 1.0.0, which has no plan structure.
    at_1_0: bool,
}

/// `plan_write`: the session's plan changes; the client hears it as the `plan` session update
/// (ACP's flat entries, and with `plan_state` the structure) and a `plan` event.
pub(crate) async fn write(
    registry: &Registry,
    client: &Client,
    session_id: &str,
    call: &ToolCall,
) -> ToolOutcome {
    let faults = Faults::of(&registry.config.misbehave);
    let plan = call.arguments.get("plan").cloned().unwrap_or(Value::Null);
    let mut previous = Value::Null;
    if let Some(live) = registry.live_session(session_id) {
        let mut state = live.state.lock().await;
        previous = state.stored.plan.clone().unwrap_or(Value::Null);
        state.stored.plan = (!plan.is_null()).then(|| plan.clone());
        registry.save(&state);
    }
    let at_1_0 = registry.config.spec == Spec::V1_0_0;
    let change = Change {
        plan: &plan,
        previous,
        plan_state: registry.has("plan_state"),
        at_1_0,
    };
    let update = update(&faults, &change);
    tell_event(&faults, client, session_id, change);
    // Misbehaving: a cleared plan, or any plan at spec 1.0.0, is not told as an update.
    let silent = (plan.is_null() && faults.cleared_untold) || (at_1_0 && faults.untold_at_1_0);
    if !silent {
        client.update(session_id, update);
    }
    ToolOutcome {
        text: "The plan is written.".into(),
        ran: true,
    }
}

/// The `plan` session update of a change.
fn update(faults: &Faults, change: &Change) -> Value {
    let plan = change.plan;
    let mut update = plan_update_with(plan, change.plan_state, faults.entries);
    if faults.task_missing
        && let Some(entries) = update["entries"].as_array_mut()
    {
        // Misbehaving: the last task is left out of the entries.
        entries.pop();
    }
    if faults.dropped_left_out
        && let Some(entries) = update["entries"].as_array_mut()
    {
        // Misbehaving: a dropped task does not appear in the entries at all.
        let dropped: Vec<&str> = plan["phases"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|p| p["tasks"].as_array().into_iter().flatten())
            .filter(|t| t["status"] == "dropped")
            .filter_map(|t| t["title"].as_str())
            .collect();
        entries.retain(|e| !dropped.iter().any(|d| e["content"] == *d));
    }
    if plan.is_null() && faults.cleared_as_old {
        // Misbehaving: the update for a cleared plan repeats the plan it had.
        update = plan_update_with(&change.previous, change.plan_state, faults.entries);
    }
    if change.at_1_0 && faults.empty_at_1_0 {
        // Misbehaving: the plan update at spec 1.0.0 lists no entries.
        update["entries"] = json!([]);
    }
    if change.plan_state && faults.no_structure {
        update["_meta"]["lembas"]["plan"] = Value::Null;
    }
    update
}

/// The `_lembas/event` that carries a change: `plan` with `plan_state`, `todos` at spec 1.0.0.
fn tell_event(faults: &Faults, client: &Client, session_id: &str, change: Change) {
    let plan = change.plan;
    if change.plan_state {
        // Misbehaving: the event carries the plan as it was before this change.
        let mut told = match faults.event_previous {
            true => change.previous,
            false => plan.clone(),
        };
        if faults.event_no_phases
            && let Some(fields) = told.as_object_mut()
        {
            // Misbehaving: the event's plan has lost its phases.
            fields.remove("phases");
        }
        client.event(session_id, json!({ "type": "plan", "plan": told }));
    } else if faults.plan_event_unlisted {
        client.event(session_id, json!({ "type": "plan", "plan": plan }));
    } else if change.at_1_0 {
        // Spec 1.0.0 has no plan structure: the session's plan is its todo list, and the
        // event that carries it is `todos` (the same entries the `plan` update has).
        let todos = match faults.todos_empty {
            // Misbehaving: the todos event carries none of the plan's entries.
            true => Vec::new(),
            false => plan_entries_with(plan, faults.entries),
        };
        client.event(session_id, json!({ "type": "todos", "todos": todos }));
    }
}
