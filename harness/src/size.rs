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
}
