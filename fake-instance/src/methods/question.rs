//! `_lembas/question`, the question card: the answers the card policy gives, and what a
//! misbehaving client answers (one answer short, or a timed-out card answered as if chosen).

use serde_json::{Value, json};

use crate::settings::QuestionPolicy;

/// The answer `policy` gives; `None`: the policy leaves the card unanswered.
pub(crate) fn by_policy(policy: QuestionPolicy, params: &Value) -> Option<Value> {
    match policy {
        QuestionPolicy::Recommended => Some(questions(params, true)),
        QuestionPolicy::First => Some(questions(params, false)),
        QuestionPolicy::Custom => Some(each_question(
            params,
            |_| json!({ "kind": "custom", "text": "something else" }),
        )),
        QuestionPolicy::Skip => Some(each_question(params, |_| json!({ "kind": "skipped" }))),
        QuestionPolicy::Dismiss => Some(json!({ "outcome": "dismissed" })),
        QuestionPolicy::Ignore => None,
    }
}

/// Misbehaving: a card nobody answered in time, answered as if the person had chosen each
/// question's first option.
pub(crate) fn as_if_chosen(params: &Value) -> Value {
    each_question(
        params,
        |q| json!({ "kind": "options", "labels": [q.pointer("/options/0/label")] }),
    )
}

/// Misbehaving: one answer fewer than the card has questions.
pub(crate) fn drop_one(answer: &mut Value) {
    if let Some(answers) = answer.get_mut("answers").and_then(Value::as_array_mut) {
        answers.pop();
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
