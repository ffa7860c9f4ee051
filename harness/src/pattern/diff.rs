//! Human-readable report of a failed match, for terminals and CI logs.

use std::fmt::Write as _;

use serde_json::{Map, Value};
use similar::TextDiff;

use crate::pattern::compile::{is_operator_key, unescape_key};
use crate::pattern::matching::MatchOutcome;
use crate::pattern::path;

/// Renders the mismatches of `outcome` followed by a unified diff of
/// expected (`-`) against received (`+`).
///
/// Both sides of the diff are narrowed to the keys the pattern mentions, so
/// the extra fields that partial matching allows do not flood the log. Parts
/// that matched are shown with the received value on both sides (so a
/// `$string` or `$capture` that matched does not show up as a change); parts
/// that failed show the pattern as written against the received value.
/// Plain text only, deterministic, no colours.
pub fn render_diff(pattern_source: &Value, actual: &Value, outcome: &MatchOutcome) -> String {
    let mut out = String::new();
    if outcome.is_match() {
        out.push_str("matched: no mismatches\n");
        return out;
    }
    let n = outcome.mismatches.len();
    // Writing to a String cannot fail; the results are ignored on purpose.
    let _ = writeln!(out, "{n} mismatch{}:", if n == 1 { "" } else { "es" });
    for m in &outcome.mismatches {
        let _ = writeln!(out, "  {m}");
    }
    // Two plain values: the mismatch line says all there is; a diff would only repeat it.
    if !pattern_source.is_object()
        && !pattern_source.is_array()
        && !actual.is_object()
        && !actual.is_array()
    {
        return out;
    }
    let bad: Vec<&str> = outcome.mismatches.iter().map(|m| m.path.as_str()).collect();
    let (expected, received) = focus(pattern_source, Some(actual), "", &bad);
    let expected_text = pretty(expected.as_ref());
    let received_text = pretty(received.as_ref());
    out.push('\n');
    out.push_str("- expected\n+ received\n");
    let diff = TextDiff::from_lines(&expected_text, &received_text);
    let _ = write!(out, "{}", diff.unified_diff().context_radius(3));
    out
}

fn pretty(value: Option<&Value>) -> String {
    let mut text = match value {
        Some(v) => serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string()),
        None => "(nothing)".to_owned(),
    };
    // A trailing newline keeps `similar` from adding "no newline" markers.
    text.push('\n');
    text
}

/// Builds the (expected, received) pair for the diff at `at`; `None` means
/// "leave this out" (an absent key, or an array element that is not there).
fn focus(
    pattern: &Value,
    actual: Option<&Value>,
    at: &str,
    bad: &[&str],
) -> (Option<Value>, Option<Value>) {
    let shown = path::display(at);
    if !bad.iter().any(|m| path::is_within(m, shown)) {
        let pruned = prune(pattern, actual);
        return (pruned.clone(), pruned);
    }
    match (pattern, actual) {
        (Value::Object(fields), Some(Value::Object(received)))
            if !fields.keys().any(|k| is_operator_key(k)) =>
        {
            let mut exp = Map::new();
            let mut got = Map::new();
            let mut missing = false;
            for (key, sub) in fields {
                let key = unescape_key(key);
                let below = path::child_key(at, key);
                missing |= !received.contains_key(key)
                    && bad
                        .iter()
                        .any(|m| path::is_within(m, path::display(&below)));
                let (e, g) = focus(sub, received.get(key), &below, bad);
                if let Some(e) = e {
                    exp.insert(key.to_owned(), e);
                }
                if let Some(g) = g {
                    got.insert(key.to_owned(), g);
                }
            }
            // A field that should be here is not: what came in its place is the news (an
            // `error` where a `result` was expected), so the received side shows it.
            if missing {
                for (key, value) in received {
                    let mentioned = fields.keys().any(|k| unescape_key(k) == key.as_str());
                    if !mentioned {
                        got.insert(key.clone(), value.clone());
                    }
                }
            }
            (Some(Value::Object(exp)), Some(Value::Object(got)))
        }
        (Value::Array(items), Some(Value::Array(received))) => {
            let mut exp = Vec::new();
            let mut got = Vec::new();
            for i in 0..items.len().max(received.len()) {
                let (e, g) = match items.get(i) {
                    Some(sub) => focus(sub, received.get(i), &path::child_index(at, i), bad),
                    None => (None, received.get(i).cloned()),
                };
                exp.extend(e);
                got.extend(g);
            }
            (Some(Value::Array(exp)), Some(Value::Array(got)))
        }
        _ => (Some(pattern.clone()), actual.cloned()),
    }
}

/// The received value restricted to what the pattern looks at.
fn prune(pattern: &Value, actual: Option<&Value>) -> Option<Value> {
    let actual = actual?;
    Some(match (pattern, actual) {
        (Value::Object(fields), Value::Object(received)) => {
            if fields.keys().any(|k| is_operator_key(k)) {
                // `$capture` + `$match` looks through to its sub-pattern;
                // other operators judge the value as a whole.
                match fields.get("$match") {
                    Some(sub) => return prune(sub, Some(actual)),
                    None => actual.clone(),
                }
            } else {
                let mut out = Map::new();
                for (key, sub) in fields {
                    let key = unescape_key(key);
                    if let Some(v) = prune(sub, received.get(key)) {
                        out.insert(key.to_owned(), v);
                    }
                }
                Value::Object(out)
            }
        }
        (Value::Object(fields), _) => match fields.get("$match") {
            Some(sub) if fields.keys().all(|k| is_operator_key(k)) => {
                return prune(sub, Some(actual));
            }
            _ => actual.clone(),
        },
        (Value::Array(items), Value::Array(received)) => Value::Array(
            received
                .iter()
                .enumerate()
                .map(|(i, v)| match items.get(i) {
                    Some(sub) => prune(sub, Some(v)).unwrap_or_else(|| v.clone()),
                    None => v.clone(),
                })
                .collect(),
        ),
        _ => actual.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pattern::Pattern;
    use serde_json::json;

    fn report(pattern: Value, actual: Value) -> String {
        let compiled = Pattern::compile(&pattern);
        assert!(compiled.is_ok(), "{compiled:?}");
        let outcome = compiled.map(|p| p.matches(&actual)).unwrap_or_default();
        render_diff(&pattern, &actual, &outcome)
    }

    #[test]
    fn matched_is_short() {
        assert_eq!(
            report(json!({"a": 1}), json!({"a": 1, "b": 2})),
            "matched: no mismatches\n"
        );
    }

    #[test]
    fn lists_mismatches_then_focused_diff() {
        let pattern = json!({
            "jsonrpc": "2.0",
            "id": "$integer",
            "result": {"protocol": 2, "session": {"$regex": "^ses_"}, "x": "$absent"}
        });
        let actual = json!({
            "jsonrpc": "2.0",
            "id": 7,
            "result": {"protocol": 1, "session": "ses_9", "noise": [1, 2, 3], "x": true}
        });
        let text = report(pattern, actual);
        let expected = r#"2 mismatches:
  result.protocol: expected 2, got 1
  result.x: expected absent, got true

- expected
+ received
@@ -2,8 +2,8 @@
   "jsonrpc": "2.0",
   "id": 7,
   "result": {
-    "protocol": 2,
+    "protocol": 1,
     "session": "ses_9",
-    "x": "$absent"
+    "x": true
   }
 }
"#;
        assert_eq!(text, expected);
        assert!(!text.contains("noise"), "extra fields must be pruned");
    }

    #[test]
    fn what_came_instead_of_a_missing_key_is_shown() {
        let text = report(
            json!({"result": {"files": "$array"}}),
            json!({"error": {"code": -32601, "message": "method not found"}}),
        );
        assert!(text.contains("+  \"error\": {"), "{text}");
        assert!(text.contains("-32601"), "{text}");
        assert!(text.contains("method not found"), "{text}");
    }

    #[test]
    fn missing_key_and_wrong_type() {
        let text = report(json!({"a": {"b": 1}, "c": "$string"}), json!({"a": 5}));
        assert!(text.contains("a: expected an object, got 5"), "{text}");
        assert!(text.contains("c: expected a string, got nothing"), "{text}");
        assert!(text.contains("-  \"c\": \"$string\""), "{text}");
        assert!(text.contains("+  \"a\": 5"), "{text}");
    }

    #[test]
    fn arrays_and_scalars_at_root() {
        let text = report(json!([1, {"a": 2}]), json!([1, {"a": 3, "z": 0}, 4]));
        assert!(
            text.contains("$: expected an array of 2 elements"),
            "{text}"
        );
        assert!(text.contains("[1].a: expected 2, got 3"), "{text}");
        assert!(text.contains("+  4"), "{text}");
        let diff_part = text.split("+ received").nth(1).unwrap_or_default();
        assert!(!diff_part.contains("\"z\""), "{text}");

        // Two plain values: the mismatch line alone, no diff repeating it.
        let text = report(json!("x"), json!(5));
        assert!(text.contains("$: expected \"x\", got 5"), "{text}");
        assert!(!text.contains("+ received"), "{text}");
    }

    /// The mismatches come in the order the scenario's author wrote the pattern's keys, whatever
    /// order the peer sent its fields in: a rerun of the same failure reads the same, and the
    /// report reads like the scenario.
    #[test]
    fn mismatches_follow_the_order_the_pattern_was_written_in() {
        let pattern: serde_json::Value =
            serde_json::from_str(r#"{"b": 1, "a": {"$contains": [1, 2]}, "c": {"y": 1, "x": 2}}"#)
                .expect("json");
        let one: serde_json::Value =
            serde_json::from_str(r#"{"a": [3], "b": 2, "c": {"x": 3, "y": 4}}"#).expect("json");
        let other: serde_json::Value =
            serde_json::from_str(r#"{"c": {"y": 4, "x": 3}, "b": 2, "a": [3]}"#).expect("json");
        let mismatches = |text: &str| -> Vec<String> {
            text.lines()
                .skip(1)
                .take_while(|l| !l.is_empty())
                .map(|l| l.trim().to_string())
                .collect()
        };
        let first = report(pattern.clone(), one);
        assert_eq!(
            mismatches(&first),
            [
                "b: expected 1, got 2",
                "a: expected an array containing 1, 2, got [3]",
                "c.y: expected 1, got 4",
                "c.x: expected 2, got 3"
            ],
            "{first}"
        );
        assert_eq!(mismatches(&report(pattern, other)), mismatches(&first));
    }
}
