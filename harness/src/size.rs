//! How much memory a kept JSON value holds, about, without serializing it: what bounds by
//! bytes (the inbox, the journal's recent entries) count with.

use serde_json::Value;

/// About the bytes `value` holds: its strings and keys, plus a few bytes a node. A walk, not a
/// serialization, so counting each message a peer sends stays cheap.
pub fn approx_bytes(value: &Value) -> usize {
    const NODE: usize = 8;
    match value {
        Value::Null | Value::Bool(_) | Value::Number(_) => NODE,
        Value::String(s) => NODE + s.len(),
        Value::Array(items) => NODE + items.iter().map(approx_bytes).sum::<usize>(),
        Value::Object(map) => {
            NODE + map
                .iter()
                .map(|(k, v)| k.len() + approx_bytes(v))
                .sum::<usize>()
        }
    }
}

/// A string longer than this is kept cut where only a view of a message is kept (the
/// journal's recent entries, what a request's answer is judged against): far above any id,
/// path or line a rule compares, far below an attachment.
pub const KEPT_STRING_MAX: usize = 64 * 1024;

/// How much of a cut string is kept.
const CUT_TO: usize = 1024;

/// A copy of `value` in which every string longer than [`KEPT_STRING_MAX`] is cut to its first
/// kilobyte and a note of its length: a view of a 37 MB prompt costs a few kilobytes, and the
/// whole is never copied.
pub fn cut_clone(value: &Value) -> Value {
    match value {
        Value::String(s) if s.len() > KEPT_STRING_MAX => Value::String(cut(s)),
        Value::Array(items) => Value::Array(items.iter().map(cut_clone).collect()),
        Value::Object(map) => {
            Value::Object(map.iter().map(|(k, v)| (k.clone(), cut_clone(v))).collect())
        }
        other => other.clone(),
    }
}

/// [`cut_clone`] in place, for a value that is kept anyway.
pub fn cut_in_place(value: &mut Value) {
    match value {
        Value::String(s) if s.len() > KEPT_STRING_MAX => *s = cut(s),
        Value::Array(items) => items.iter_mut().for_each(cut_in_place),
        Value::Object(map) => map.values_mut().for_each(cut_in_place),
        _ => {}
    }
}

fn cut(s: &str) -> String {
    let mut end = CUT_TO;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… (cut: {} bytes in all)", &s[..end], s.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_value_counts_its_strings_and_a_little_per_node() {
        let small = approx_bytes(&json!({"a": 1}));
        assert!(small < 32, "{small}");
        let big = approx_bytes(&json!({"data": "x".repeat(1_000_000)}));
        assert!((1_000_000..1_000_100).contains(&big), "{big}");
        let deep = approx_bytes(&json!([[["y".repeat(500)]], "z".repeat(500)]));
        assert!((1_000..1_100).contains(&deep), "{deep}");
    }

    #[test]
    fn only_long_strings_are_cut_and_say_how_long_they_were() {
        let long = "é".repeat(KEPT_STRING_MAX);
        let value = json!({"id": "ses_1", "blocks": [{"data": long}, {"text": "short"}]});
        let cut = cut_clone(&value);
        assert_eq!(cut["id"], "ses_1");
        assert_eq!(cut["blocks"][1]["text"], "short");
        let data = cut["blocks"][0]["data"].as_str().expect("a string");
        assert!(data.len() < 2 * CUT_TO, "{}", data.len());
        assert!(
            data.ends_with(&format!("(cut: {} bytes in all)", long.len())),
            "{data}"
        );
        let mut in_place = value.clone();
        cut_in_place(&mut in_place);
        assert_eq!(in_place, cut);
        let small = json!({"a": ["x".repeat(KEPT_STRING_MAX)]});
        assert_eq!(
            cut_clone(&small),
            small,
            "a string at the limit is kept whole"
        );
    }
}
