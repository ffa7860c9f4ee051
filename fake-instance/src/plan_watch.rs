//! The device's plan as one link shows it (spec, `session/update` `plan` and the `plan` event,
//! capability `plan_state`): every plan update's flat `entries` must list the tasks of the
//! structure beside them, and every `plan` event must carry the structure the plan update of
//! that change carries. The device may send the event before its update or after it, so an
//! event is paired with the session's last unpaired update when they agree, or else with the
//! next update to come.

use std::collections::HashMap;

use harness::finding::Finding;
use harness::lembas::methods;
use harness::rules::ids;
use serde_json::Value;

/// What one session's plan messages have said so far.
#[derive(Debug, Default)]
struct SessionPlans {
    /// The structure of the last plan update no event was paired with yet.
    unpaired_update: Option<Value>,
    /// A `plan` event that came before its update.
    waiting_event: Option<Value>,
}

/// The plan messages of one link, per session.
#[derive(Debug, Default)]
pub struct PlanWatch {
    sessions: HashMap<String, SessionPlans>,
}

/// How many tasks a plan structure holds, over all its phases (`null`: none).
fn task_count(plan: &Value) -> usize {
    plan.get("phases")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|phase| {
            phase
                .get("tasks")
                .and_then(Value::as_array)
                .map_or(0, Vec::len)
        })
        .sum()
}

impl PlanWatch {
    /// Checks a request or notification from the device.
    pub fn incoming(&mut self, method: &str, params: &Value) -> Vec<Finding> {
        let Some(session) = params.get("sessionId").and_then(Value::as_str) else {
            return Vec::new();
        };
        match method {
            methods::SESSION_UPDATE => {
                let update = params.get("update").unwrap_or(&Value::Null);
                if update.get("sessionUpdate").and_then(Value::as_str) != Some("plan") {
                    return Vec::new();
                }
                // Only an update that carries the structure can be held to it.
                let Some(plan) = update.pointer("/_meta/lembas").and_then(|l| l.get("plan")) else {
                    return Vec::new();
                };
                let mut found = Vec::new();
                let entries = update
                    .get("entries")
                    .and_then(Value::as_array)
                    .map_or(0, Vec::len);
                let tasks = task_count(plan);
                if entries != tasks {
                    found.push(Finding::new(
                        ids::DEVICE_PLAN_ENTRIES_MATCH,
                        format!(
                            "a plan update of session `{session}` lists {entries} entries for a plan of {tasks} tasks"
                        ),
                    ));
                }
                let plans = self.sessions.entry(session.to_string()).or_default();
                match plans.waiting_event.take() {
                    Some(event) => {
                        if &event != plan {
                            found.push(mismatch(session, &event, plan));
                        }
                        plans.unpaired_update = None;
                    }
                    None => plans.unpaired_update = Some(plan.clone()),
                }
                found
            }
            methods::LEMBAS_EVENT => {
                let event = params.get("event").unwrap_or(&Value::Null);
                if event.get("type").and_then(Value::as_str) != Some("plan") {
                    return Vec::new();
                }
                let told = event.get("plan").cloned().unwrap_or(Value::Null);
                let plans = self.sessions.entry(session.to_string()).or_default();
                if plans.unpaired_update.as_ref() == Some(&told) {
                    plans.unpaired_update = None;
                } else {
                    // Its update is still to come.
                    plans.waiting_event = Some(told);
                }
                Vec::new()
            }
            _ => Vec::new(),
        }
    }
}

/// The finding for a `plan` event whose structure is not its update's.
fn mismatch(session: &str, event: &Value, update: &Value) -> Finding {
    let cut = |v: &Value| {
        let text = v.to_string();
        text.chars().take(500).collect::<String>()
    };
    Finding::new(
        ids::DEVICE_EVENT_PLAN_MATCHES,
        format!("a `plan` event of session `{session}` carries another plan than its plan update"),
    )
    .with_detail(format!("event: {}\nupdate: {}", cut(event), cut(update)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn update(plan: Value, entries: usize) -> Value {
        let entries: Vec<Value> = (0..entries)
            .map(|i| json!({"content": format!("t{i}")}))
            .collect();
        json!({"sessionId": "ses_a", "update": {"sessionUpdate": "plan", "entries": entries, "_meta": {"lembas": {"plan": plan}}}})
    }

    fn event(plan: Value) -> Value {
        json!({"sessionId": "ses_a", "event": {"type": "plan", "plan": plan}})
    }

    fn rules(found: Vec<Finding>) -> Vec<String> {
        found.into_iter().map(|f| f.rule).collect()
    }

    #[test]
    fn entries_are_counted_against_the_tasks() {
        let plan = json!({"phases": [{"tasks": [{"title": "a"}, {"title": "b"}]}, {"tasks": [{"title": "c"}]}]});
        let mut watch = PlanWatch::default();
        assert!(
            watch
                .incoming(methods::SESSION_UPDATE, &update(plan.clone(), 3))
                .is_empty()
        );
        assert_eq!(
            rules(watch.incoming(methods::SESSION_UPDATE, &update(plan, 5))),
            [ids::DEVICE_PLAN_ENTRIES_MATCH]
        );
        assert!(
            watch
                .incoming(methods::SESSION_UPDATE, &update(Value::Null, 0))
                .is_empty()
        );
    }

    #[test]
    fn an_event_must_carry_its_updates_plan_in_either_order() {
        let plan = json!({"title": "p", "phases": []});
        let mut watch = PlanWatch::default();
        assert!(
            watch
                .incoming(methods::LEMBAS_EVENT, &event(plan.clone()))
                .is_empty()
        );
        assert!(
            watch
                .incoming(methods::SESSION_UPDATE, &update(plan.clone(), 0))
                .is_empty()
        );
        assert!(
            watch
                .incoming(methods::SESSION_UPDATE, &update(Value::Null, 0))
                .is_empty()
        );
        assert!(
            watch
                .incoming(methods::LEMBAS_EVENT, &event(Value::Null))
                .is_empty()
        );
        // The event says the plan before the change.
        assert!(
            watch
                .incoming(methods::LEMBAS_EVENT, &event(Value::Null))
                .is_empty()
        );
        assert_eq!(
            rules(watch.incoming(methods::SESSION_UPDATE, &update(plan, 0))),
            [ids::DEVICE_EVENT_PLAN_MATCHES]
        );
    }
}
