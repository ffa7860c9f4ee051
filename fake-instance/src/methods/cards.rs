//! How LLeMbas answers a device's cards: by default an approval allowed once, each question
//! answered with its recommended option (else the first), a plan approved in `edit` mode; a
//! scenario's card policy (`instance.cards`) or its handlers answer otherwise.

use crate::settings::{CardPolicy, PermissionPolicy, PlanPolicy, QuestionPolicy};
use harness::lembas::methods;
use serde_json::{Value, json};

/// The methods that are cards.
pub const CARD_METHODS: [&str; 3] = [
    methods::SESSION_REQUEST_PERMISSION,
    methods::LEMBAS_QUESTION,
    methods::LEMBAS_PLAN,
];

/// The answer a policy gives a card; `None`: a method that is not one, or a card the policy
/// leaves unanswered (`ignore`).
pub fn answer_by(policy: &CardPolicy, method: &str, params: &Value) -> Option<Value> {
    match method {
        methods::SESSION_REQUEST_PERMISSION => match policy.permission {
            PermissionPolicy::AllowOnce => Some(permission(params, "once")),
            PermissionPolicy::AllowAlways => Some(permission(params, "session")),
            PermissionPolicy::Deny => Some(json!({
                "outcome": { "outcome": "selected", "optionId": "deny" },
                "_meta": { "lembas": { "feedback": "not now" } },
            })),
            PermissionPolicy::Ignore => None,
        },
        methods::LEMBAS_QUESTION => match policy.question {
            QuestionPolicy::Recommended => Some(questions(params, true)),
            QuestionPolicy::First => Some(questions(params, false)),
            QuestionPolicy::Custom => Some(each_question(
                params,
                |_| json!({ "kind": "custom", "text": "something else" }),
            )),
            QuestionPolicy::Skip => Some(each_question(params, |_| json!({ "kind": "skipped" }))),
            QuestionPolicy::Dismiss => Some(json!({ "outcome": "dismissed" })),
            QuestionPolicy::Ignore => None,
        },
        methods::LEMBAS_PLAN => match policy.plan {
            PlanPolicy::Approve => Some(json!({ "outcome": "approve", "mode": "edit" })),
            PlanPolicy::ApproveManual => Some(json!({ "outcome": "approve", "mode": "manual" })),
            PlanPolicy::Revise => Some(json!({ "outcome": "revise", "feedback": "smaller steps" })),
            PlanPolicy::Dismiss => Some(json!({ "outcome": "dismissed" })),
            PlanPolicy::Ignore => None,
        },
        _ => None,
    }
}

/// What LLeMbas answers when it takes a card down unanswered (its own timeout).
pub fn dismissal(method: &str) -> Value {
    match method {
        methods::SESSION_REQUEST_PERMISSION => json!({ "outcome": { "outcome": "cancelled" } }),
        _ => json!({ "outcome": "dismissed" }),
    }
}

/// Whether a card says the person may answer it at the terminal (`_meta.lembas.patient`).
pub fn is_patient(params: &Value) -> bool {
    params
        .pointer("/_meta/lembas/patient")
        .and_then(Value::as_bool)
        == Some(true)
}

/// A card's toolCallId (an approval has it inside `toolCall`).
pub fn tool_call_id(method: &str, params: &Value) -> Option<String> {
    let at = if method == methods::SESSION_REQUEST_PERMISSION {
        "/toolCall/toolCallId"
    } else {
        "/toolCallId"
    };
    params.pointer(at).and_then(Value::as_str).map(String::from)
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

/// One answer per question, in order, made by `each`.
fn each_question(params: &Value, each: impl Fn(&Value) -> Value) -> Value {
    let answers: Vec<Value> = params
        .get("questions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(each)
        .collect();
    json!({ "outcome": "answered", "answers": answers })
}

/// One answer per question: the recommended option (when `recommended`), else the first.
fn questions(params: &Value, recommended: bool) -> Value {
    each_question(params, |q| {
        let options = q
            .get("options")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let pick = options
            .iter()
            .find(|o| recommended && o.get("recommended").and_then(Value::as_bool) == Some(true))
            .or(options.first())
            .and_then(|o| o.get("label").and_then(Value::as_str));
        match pick {
            Some(label) => json!({ "kind": "options", "labels": [label] }),
            None => json!({ "kind": "skipped" }),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The default policy's answer.
    fn answer(method: &str, params: &Value) -> Option<Value> {
        answer_by(&CardPolicy::default(), method, params)
    }

    #[test]
    fn approvals_are_allowed_once_and_questions_get_the_recommended_option() {
        let card = json!({"options": [{"optionId": "deny", "kind": "reject_once"}, {"optionId": "once", "kind": "allow_once"}]});
        assert_eq!(
            answer(methods::SESSION_REQUEST_PERMISSION, &card),
            Some(json!({"outcome": {"outcome": "selected", "optionId": "once"}}))
        );
        let no_allow = json!({"options": [{"optionId": "deny", "kind": "reject_once"}]});
        assert_eq!(
            answer(methods::SESSION_REQUEST_PERMISSION, &no_allow),
            Some(json!({"outcome": {"outcome": "cancelled"}}))
        );
        let q = json!({"questions": [{"options": [{"label": "A"}, {"label": "B", "recommended": true}]}, {"options": []}]});
        assert_eq!(
            answer(methods::LEMBAS_QUESTION, &q),
            Some(
                json!({"outcome": "answered", "answers": [{"kind": "options", "labels": ["B"]}, {"kind": "skipped"}]})
            )
        );
        assert_eq!(
            answer(methods::LEMBAS_PLAN, &json!({})),
            Some(json!({"outcome": "approve", "mode": "edit"}))
        );
        assert_eq!(answer(methods::SESSION_NEW, &json!({})), None);
    }
}
