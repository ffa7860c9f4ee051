//! How LLeMbas answers a device's cards by default: an approval allowed once, each question
//! answered with its recommended option (else the first), a plan approved in `edit` mode.
//! A scenario's handlers answer otherwise.

use serde_json::{Value, json};

/// The default answer to a card, or `None` for a method that is not one.
pub fn answer(method: &str, params: &Value) -> Option<Value> {
    match method {
        "session/request_permission" => Some(permission(params)),
        "_lembas/question" => Some(questions(params)),
        "_lembas/plan" => Some(json!({ "outcome": "approve", "mode": "edit" })),
        _ => None,
    }
}

/// Allow once: the `once` option, else the first that allows, else the card is cancelled.
fn permission(params: &Value) -> Value {
    let options = params
        .get("options")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let id_of = |o: &Value| o.get("optionId").and_then(Value::as_str).map(String::from);
    let chosen = options
        .iter()
        .find(|o| o.get("optionId").and_then(Value::as_str) == Some("once"))
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

/// One answer per question, in order: the recommended option, else the first.
fn questions(params: &Value) -> Value {
    let questions = params
        .get("questions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let answers: Vec<Value> = questions
        .iter()
        .map(|q| {
            let options = q
                .get("options")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let pick = options
                .iter()
                .find(|o| o.get("recommended").and_then(Value::as_bool) == Some(true))
                .or(options.first())
                .and_then(|o| o.get("label").and_then(Value::as_str));
            match pick {
                Some(label) => json!({ "kind": "options", "labels": [label] }),
                None => json!({ "kind": "skipped" }),
            }
        })
        .collect();
    json!({ "outcome": "answered", "answers": answers })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn approvals_are_allowed_once_and_questions_get_the_recommended_option() {
        let card = json!({"options": [{"optionId": "deny", "kind": "reject_once"}, {"optionId": "once", "kind": "allow_once"}]});
        assert_eq!(
            answer("session/request_permission", &card),
            Some(json!({"outcome": {"outcome": "selected", "optionId": "once"}}))
        );
        let no_allow = json!({"options": [{"optionId": "deny", "kind": "reject_once"}]});
        assert_eq!(
            answer("session/request_permission", &no_allow),
            Some(json!({"outcome": {"outcome": "cancelled"}}))
        );
        let q = json!({"questions": [{"options": [{"label": "A"}, {"label": "B", "recommended": true}]}, {"options": []}]});
        assert_eq!(
            answer("_lembas/question", &q),
            Some(
                json!({"outcome": "answered", "answers": [{"kind": "options", "labels": ["B"]}, {"kind": "skipped"}]})
            )
        );
        assert_eq!(
            answer("_lembas/plan", &json!({})),
            Some(json!({"outcome": "approve", "mode": "edit"}))
        );
        assert_eq!(answer("session/new", &json!({})), None);
    }
}
