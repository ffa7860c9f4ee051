//! Facts read out of a peer's answers, one reading for every room that needs them: the
//! capabilities an `initialize` answer listed and the modes a `session/new` answer offered.

use serde_json::Value;

/// The capabilities an `initialize` answer lists in `_meta.lembas.capabilities` (spec,
/// "Versions and discovery"); none when the list is absent or not a list. What is not a string
/// in it is passed over: its shape is judged under its own rule.
pub fn listed_capabilities(initialize_result: &Value) -> Vec<String> {
    strings(
        initialize_result.pointer("/_meta/lembas/capabilities"),
        |s| s.as_str(),
    )
}

/// The ids of the modes a `session/new` answer offers (`modes.availableModes[].id`).
pub fn offered_modes(session_new_result: &Value) -> Vec<String> {
    strings(session_new_result.pointer("/modes/availableModes"), |m| {
        m.get("id").and_then(Value::as_str)
    })
}

fn strings<'a>(
    list: Option<&'a Value>,
    each: impl Fn(&'a Value) -> Option<&'a str>,
) -> Vec<String> {
    list.and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| each(v).map(String::from))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_list_is_read_and_what_is_not_a_string_passed_over() {
        let answer = json!({"_meta": {"lembas": {"capabilities": ["model", 3, "steer"]}}});
        assert_eq!(listed_capabilities(&answer), ["model", "steer"]);
        assert!(
            listed_capabilities(&json!({"_meta": {"lembas": {"capabilities": "model"}}}))
                .is_empty()
        );
        let opened = json!({"modes": {"availableModes": [{"id": "edit"}, {"name": "no id"}, {"id": "plan"}]}});
        assert_eq!(offered_modes(&opened), ["edit", "plan"]);
        assert!(offered_modes(&json!({})).is_empty());
    }
}
