//! Property tests: matching a value against patterns derived from itself.

use proptest::prelude::*;
use serde_json::{Map, Value, json};

use crate::pattern::{Pattern, Vars, nearest, render_diff, substitute};

/// Keys and strings never start with `$`, so every generated value is also
/// a pattern meaning "exactly this, partially for objects".
fn arb_string() -> impl Strategy<Value = String> {
    "([a-zA-Z0-9 _.-][a-zA-Z0-9 _$.-]{0,7})?"
}

fn arb_key() -> impl Strategy<Value = String> {
    "[a-z_][a-z0-9_]{0,5}"
}

fn arb_leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        (-1.0e6f64..1.0e6).prop_map(|f| json!(f)),
        arb_string().prop_map(Value::String),
    ]
}

fn arb_json() -> impl Strategy<Value = Value> {
    arb_leaf().prop_recursive(4, 48, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec((arb_key(), inner), 0..5)
                .prop_map(|fields| Value::Object(fields.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

fn compile(v: &Value) -> Result<Pattern, TestCaseError> {
    Pattern::compile(v).map_err(|e| TestCaseError::fail(format!("{v} did not compile: {e}")))
}

/// Every scalar leaf as (mismatch-style path, JSON Pointer).
fn leaf_paths(value: &Value) -> Vec<(String, String)> {
    fn walk(value: &Value, path: &str, pointer: &str, out: &mut Vec<(String, String)>) {
        match value {
            Value::Object(map) => {
                for (k, v) in map {
                    let p = if path.is_empty() {
                        k.clone()
                    } else {
                        format!("{path}.{k}")
                    };
                    walk(v, &p, &format!("{pointer}/{k}"), out);
                }
            }
            Value::Array(items) => {
                for (i, v) in items.iter().enumerate() {
                    walk(v, &format!("{path}[{i}]"), &format!("{pointer}/{i}"), out);
                }
            }
            _ => {
                let shown = if path.is_empty() {
                    "$".to_owned()
                } else {
                    path.to_owned()
                };
                out.push((shown, pointer.to_owned()));
            }
        }
    }
    let mut out = Vec::new();
    walk(value, "", "", &mut out);
    out
}

/// Equality as the matcher defines it for scalars (numbers by value).
fn same_scalar(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) if !x.is_f64() && !y.is_f64() => x == y,
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        _ => a == b,
    }
}

/// Removes object fields chosen by a tiny deterministic generator seeded by
/// proptest, recursing into what is kept.
fn drop_fields(value: &Value, seed: &mut u64) -> Value {
    fn next(seed: &mut u64) -> u64 {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        *seed
    }
    match value {
        Value::Object(map) => {
            let mut out = Map::new();
            for (k, v) in map {
                if !next(seed).is_multiple_of(3) {
                    out.insert(k.clone(), drop_fields(v, seed));
                }
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(|v| drop_fields(v, seed)).collect()),
        other => other.clone(),
    }
}

/// Pattern-shaped noise: placeholders (real and misspelt), operators with
/// operands of every type, escapes, and `${` fragments, to show that no input
/// makes compiling, matching, diffing or substituting panic.
fn arb_wild() -> impl Strategy<Value = Value> {
    let word = prop_oneof![
        arb_string(),
        "\\$[a-z_]{0,8}",
        "\\$\\$[a-z]{0,4}",
        "[a-z ]{0,3}\\$\\$?\\{[a-z.\\[\\]0-9]{0,6}\\}?[a-z]{0,2}",
        Just("$string".to_owned()),
        Just("$absent".to_owned()),
        Just("$regex".to_owned()),
        Just("$capture".to_owned()),
        Just("$match".to_owned()),
        Just("$contains".to_owned()),
        Just("$one_of".to_owned()),
        Just("$not".to_owned()),
        Just("$len".to_owned()),
        Just("(".to_owned()),
    ];
    let leaf = prop_oneof![arb_leaf(), word.clone().prop_map(Value::String)];
    leaf.prop_recursive(4, 40, 4, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((word.clone(), inner), 0..4)
                .prop_map(|fields| Value::Object(fields.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn wild_inputs_never_panic(pattern in arb_wild(), actual in arb_wild(), other in arb_json()) {
        if let Ok(p) = Pattern::compile(&pattern) {
            let outcome = p.matches(&actual);
            let _ = render_diff(&pattern, &actual, &outcome);
            let closeness = outcome.closeness();
            prop_assert!((0.0..=1.0).contains(&closeness));
            prop_assert_eq!(outcome.is_match(), outcome.mismatches.is_empty());
            let candidates = [actual.clone(), other];
            prop_assert!(nearest(&p, &candidates).is_some());
        }
        let mut vars = Vars::new();
        vars.set("a", actual.clone());
        let _ = substitute(&pattern, &vars);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn value_matches_itself(v in arb_json()) {
        let outcome = compile(&v)?.matches(&v);
        prop_assert!(outcome.is_match(), "{:?}", outcome.mismatches);
        prop_assert_eq!(outcome.closeness(), 1.0);
    }

    #[test]
    fn value_matches_pattern_with_fields_removed(v in arb_json(), seed in 1u64..) {
        let mut seed = seed;
        let pattern = drop_fields(&v, &mut seed);
        let outcome = compile(&pattern)?.matches(&v);
        prop_assert!(outcome.is_match(), "{} vs {}: {:?}", pattern, v, outcome.mismatches);
    }

    #[test]
    fn changing_a_leaf_breaks_the_match_at_its_path(
        v in arb_json(),
        which in any::<prop::sample::Index>(),
        replacement in prop_oneof![arb_leaf(), Just(json!([])), Just(json!({"k": 1}))],
    ) {
        let leaves = leaf_paths(&v);
        prop_assume!(!leaves.is_empty());
        let (path, pointer) = &leaves[which.index(leaves.len())];
        let mut changed = v.clone();
        let Some(slot) = changed.pointer_mut(pointer) else {
            return Err(TestCaseError::fail(format!("no leaf at {pointer}")));
        };
        let new = if same_scalar(slot, &replacement) { json!([]) } else { replacement };
        *slot = new;
        let outcome = compile(&v)?.matches(&changed);
        prop_assert!(!outcome.is_match());
        prop_assert!(
            outcome.mismatches.iter().any(|m| &m.path == path),
            "no mismatch at {}: {:?}", path, outcome.mismatches
        );
        prop_assert!(outcome.closeness() < 1.0);
    }
}
