//! A fingerprint of each of the last events the plugin sent, to tell whether what a daemon
//! serves back (`GET …/events`) is what it was sent.

use serde_json::Value;

/// How many of the last events keep a fingerprint of their fields, to compare with what a
/// daemon serves back (a field's value is kept as a hash, so a long text costs eight bytes).
pub(super) const PRINTS_KEPT: usize = 10_000;

/// An event's top-level fields, each with a hash of its value (objects hashed with their keys
/// sorted, so a daemon that writes them back in another order serves the same event).
pub(super) type Print = Vec<(String, u64)>;

/// Hashes `value` whatever the order of its objects' keys.
fn hash_value(value: &Value, into: &mut impl std::hash::Hasher) {
    use std::hash::Hash;
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            for key in keys {
                key.hash(into);
                hash_value(&map[key], into);
            }
        }
        Value::Array(items) => {
            items.len().hash(into);
            for item in items {
                hash_value(item, into);
            }
        }
        other => other.to_string().hash(into),
    }
}

/// The fingerprint of an event as sent, or as a daemon serves it back.
pub(super) fn print_of(frame: &Value) -> Print {
    frame
        .as_object()
        .into_iter()
        .flatten()
        .map(|(key, value)| {
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            hash_value(value, &mut hasher);
            (key.clone(), std::hash::Hasher::finish(&hasher))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_served_event_is_the_sent_one_whatever_its_key_order_and_whatever_the_daemon_adds() {
        let sent = print_of(&serde_json::json!({
            "v": 1, "seq": 4, "type": "message_end",
            "message": {"role": "assistant", "text": "hello", "id": "m1"}
        }));
        let same = print_of(&serde_json::json!({
            "type": "message_end", "seq": 4, "v": 1, "storedAt": 17,
            "message": {"id": "m1", "text": "hello", "role": "assistant"}
        }));
        assert!(sent.iter().all(|field| same.contains(field)));
        let cut = print_of(&serde_json::json!({
            "v": 1, "seq": 4, "type": "message_end",
            "message": {"role": "assistant", "text": "", "id": "m1"}
        }));
        assert!(!sent.iter().all(|field| cut.contains(field)));
        let lacking = print_of(&serde_json::json!({"v": 1, "seq": 4, "type": "message_end"}));
        assert!(!sent.iter().all(|field| lacking.contains(field)));
    }
}
