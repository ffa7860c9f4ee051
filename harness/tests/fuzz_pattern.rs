//! Fuzzing the pattern compiler and matcher: [`Pattern::compile`] on arbitrary JSON and YAML
//! (placeholders real and misspelt, operators with operands of every type, escapes), and
//! [`Pattern::matches`] of arbitrary values against what compiled.
//!
//! Nothing may panic or hang; a rejected pattern points at a part of it that exists; and a
//! value always matches the pattern that is that value written literally (its `$` escaped), as
//! well as `$exact`, `$capture` and `$one_of` around it, and never `$not` of it.
//!
//! The case count comes from `PROPTEST_CASES` (a short run by default, for CI); a long run:
//!
//! ```sh
//! PROPTEST_CASES=100000 cargo test --release -p harness --test fuzz_pattern
//! ```

mod fuzz_support;

use fuzz_support::{config, within};
use harness::pattern::{Pattern, nearest, render_diff};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

/// Text of any kind, with the `$` words the pattern language gives meaning to well represented.
fn arb_text() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => any::<String>(),
        2 => "\\$\\$?[a-z_]{0,8}",
        1 => prop::sample::select(vec![
            "$any", "$string", "$number", "$integer", "$boolean", "$object", "$array", "$null",
            "$absent", "$none", "$5", "$", "$$", "${x}", "$$absent",
        ])
        .prop_map(str::to_owned),
    ]
}

fn arb_leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<u64>().prop_map(|n| json!(n)),
        any::<f64>().prop_map(|f| json!(f)),
        arb_text().prop_map(Value::String),
    ]
}

/// Any JSON value; its strings and keys may start with `$`.
fn arb_value() -> impl Strategy<Value = Value> {
    arb_leaf().prop_recursive(4, 32, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((arb_text(), inner), 0..4)
                .prop_map(|fields| Value::Object(fields.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// Operands that are sometimes what the operator wants and sometimes not.
fn arb_operand(inner: BoxedStrategy<Value>) -> impl Strategy<Value = Value> {
    prop_oneof![
        inner.clone(),
        prop::collection::vec(inner, 0..3).prop_map(Value::Array),
        // Regexes, valid or not, some large enough to reach the regex crate's size limit.
        "[a-z().*+?|\\[\\]{}^$\\\\0-9]{0,12}".prop_map(Value::String),
        Just(json!("(a*)*b")),
        Just(json!("x{1000}{1000}")),
        "[a-z_.\\[ ]{0,6}".prop_map(Value::String),
        any::<i64>().prop_map(|n| json!(n)),
        Just(json!(u64::MAX)),
    ]
}

/// Pattern-shaped values: operator objects (one operator, two, or mixed with plain keys) with
/// operands of every type, nested in each other and in plain values.
fn arb_pattern() -> impl Strategy<Value = Value> {
    arb_leaf().prop_recursive(4, 40, 4, |inner| {
        // Every operator, and one that is none.
        let operators: Vec<&str> = harness::pattern::OPERATORS
            .into_iter()
            .chain(["$bogus"])
            .collect();
        let op = prop::sample::select(operators).prop_map(str::to_owned);
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((arb_text(), inner.clone()), 0..4)
                .prop_map(|fields| Value::Object(fields.into_iter().collect::<Map<_, _>>())),
            prop::collection::vec((op, arb_operand(inner.clone())), 1..3)
                .prop_map(|fields| Value::Object(fields.into_iter().collect::<Map<_, _>>())),
            (
                arb_operand(inner.clone()),
                prop::option::of(arb_operand(inner))
            )
                .prop_map(|(name, matched)| {
                    let mut map = Map::new();
                    map.insert("$capture".into(), name);
                    if let Some(matched) = matched {
                        map.insert("$match".into(), matched);
                    }
                    Value::Object(map)
                }),
        ]
    })
}

/// YAML a scenario author might write in an `expect:`: flow and block forms, anchors, tags,
/// and the words YAML 1.1 reads as booleans, broken at random places.
fn arb_yaml() -> impl Strategy<Value = String> {
    let piece = prop::sample::select(vec![
        "a: 1\n",
        "b:\n  - x\n  - $string\n",
        "{ $regex: \"^s\" }",
        "[1, 2, {c: $any}]",
        "$contains: [ {name: read} ]\n",
        "&anchor { x: 1 }",
        "*anchor",
        "!!str 5",
        "no",
        "yes",
        "~",
        "\"$$lit\"",
        "  ",
        "\n",
        ": ",
        "- ",
        "{",
        "}",
        "[",
        "]",
        "'",
        "\"",
        "$one_of: [ok, partial]\n",
        "$not: cancelled\n",
        "$len: 3\n",
        "key: $absent\n",
    ]);
    prop_oneof![
        prop::collection::vec(piece, 0..8).prop_map(|p| p.concat()),
        any::<String>(),
    ]
}

/// A value shaped after `pattern`, so that matching goes deep into it instead of failing at
/// the top: placeholders get a value of their type, `$each` an array of examples, `$len` that
/// many elements, and so on; `seed` picks among the choices and sometimes spoils a part.
fn example(pattern: &Value, seed: &mut u64) -> Value {
    fn next(seed: &mut u64) -> u64 {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        *seed
    }
    if next(seed).is_multiple_of(11) {
        return json!(["spoilt"]);
    }
    match pattern {
        Value::String(s) => match s.as_str() {
            "$any" | "$string" => json!("s"),
            "$number" => json!(1.5),
            "$integer" => json!(3),
            "$boolean" => json!(true),
            "$object" => json!({}),
            "$array" => json!([]),
            "$null" | "$none" => Value::Null,
            s => Value::String(
                s.strip_prefix('$')
                    .filter(|r| r.starts_with('$'))
                    .unwrap_or(s)
                    .to_owned(),
            ),
        },
        Value::Array(items) => Value::Array(items.iter().map(|p| example(p, seed)).collect()),
        Value::Object(map)
            if map
                .keys()
                .all(|k| k.starts_with('$') && !k.starts_with("$$")) =>
        {
            let operand = map.values().next().cloned().unwrap_or_default();
            let n = usize::try_from(next(seed) % 4).unwrap_or(0);
            match map.keys().next().map(String::as_str) {
                Some("$each") => Value::Array((0..n).map(|_| example(&operand, seed)).collect()),
                Some("$contains") => {
                    let wanted = operand.as_array().cloned().unwrap_or_default();
                    let mut items: Vec<Value> = wanted.iter().map(|p| example(p, seed)).collect();
                    let turn = n.min(items.len());
                    items.rotate_left(turn);
                    items.push(json!("extra"));
                    Value::Array(items)
                }
                Some("$one_of") => {
                    let alternatives = operand.as_array().cloned().unwrap_or_default();
                    match alternatives.get(n % alternatives.len().max(1)) {
                        Some(p) => example(p, seed),
                        None => Value::Null,
                    }
                }
                Some("$len") => {
                    let len = operand.as_u64().unwrap_or(0).min(64);
                    Value::Array((0..len).map(|i| json!(i)).collect())
                }
                Some("$base64") => {
                    use base64::Engine;
                    let inner = example(&operand, seed);
                    let text = inner
                        .as_str()
                        .map_or_else(|| inner.to_string(), str::to_owned);
                    json!(base64::engine::general_purpose::STANDARD.encode(text))
                }
                Some("$exact") => operand,
                Some("$capture") => map.get("$match").map_or(json!("any"), |p| example(p, seed)),
                _ => json!("s"),
            }
        }
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(_, v)| !matches!(v.as_str(), Some("$absent" | "$none")))
                .map(|(k, v)| {
                    let key = k
                        .strip_prefix('$')
                        .filter(|r| r.starts_with('$'))
                        .unwrap_or(k);
                    (key.to_owned(), example(v, seed))
                })
                .collect(),
        ),
        other => other.clone(),
    }
}

/// What compiling and matching promise, checked on the case's own thread.
fn check(pattern: &Value, actual: &Value) -> Result<(), String> {
    let compiled = match Pattern::compile(pattern) {
        Ok(compiled) => compiled,
        Err(e) => {
            // The author is sent to that place in the pattern: it must be there.
            if pattern.pointer(&e.at).is_none() {
                return Err(format!("error at {:?}, not in {pattern}: {e}", e.at));
            }
            if !e.to_string().starts_with("invalid pattern at ") {
                return Err(format!("an error that does not say where: {e}"));
            }
            return Ok(());
        }
    };
    if compiled.source() != pattern {
        return Err(format!("source {} is not {pattern}", compiled.source()));
    }
    let outcome = compiled.matches(actual);
    if outcome.is_match() != outcome.mismatches.is_empty() {
        return Err(format!("is_match disagrees with {:?}", outcome.mismatches));
    }
    if !outcome.is_match() && !outcome.captures.is_empty() {
        return Err(format!(
            "captures from a failed match: {:?}",
            outcome.captures
        ));
    }
    if !(0.0..=1.0).contains(&outcome.closeness()) {
        return Err(format!("closeness {}", outcome.closeness()));
    }
    let _ = render_diff(pattern, actual, &outcome);
    for mismatch in &outcome.mismatches {
        let _ = mismatch.to_string();
    }
    if nearest(&compiled, [actual, pattern]).is_none() {
        return Err("nearest of two candidates is none".into());
    }
    Ok(())
}

/// `value` written as a pattern that means exactly it: every string and key that starts with
/// `$` doubled, as the language's escape says.
fn literal(value: &Value) -> Value {
    let escape = |s: &str| {
        if s.starts_with('$') {
            format!("${s}")
        } else {
            s.to_owned()
        }
    };
    match value {
        Value::String(s) => Value::String(escape(s)),
        Value::Array(items) => Value::Array(items.iter().map(literal).collect()),
        Value::Object(map) => {
            Value::Object(map.iter().map(|(k, v)| (escape(k), literal(v))).collect())
        }
        other => other.clone(),
    }
}

/// The patterns built around `value` that must match it, and those that must not.
fn check_literal(value: Value) -> Result<(), String> {
    let written = literal(&value);
    let must_match = [
        written.clone(),
        json!({"$exact": value}),
        json!({"$one_of": [{"$exact": [value]}, written]}),
        json!({"$capture": "it", "$match": written}),
        json!({"$not": {"$not": written}}),
    ];
    for pattern in &must_match {
        let compiled = Pattern::compile(pattern).map_err(|e| format!("{pattern}: {e}"))?;
        let outcome = compiled.matches(&value);
        if !outcome.is_match() || outcome.closeness() != 1.0 {
            return Err(format!(
                "{value} does not match {pattern}: {:?}",
                outcome.mismatches
            ));
        }
    }
    let captured = Pattern::compile(&must_match[3])
        .map_err(|e| e.to_string())?
        .matches(&value)
        .captures;
    if captured.get("it") != Some(&value) {
        return Err(format!("captured {captured:?}, not {value}"));
    }
    let not = json!({"$not": written});
    let compiled = Pattern::compile(&not).map_err(|e| format!("{not}: {e}"))?;
    if compiled.matches(&value).is_match() {
        return Err(format!("{value} matches {not}"));
    }
    Ok(())
}

proptest! {
    #![proptest_config(config(512))]

    #[test]
    fn compiling_and_matching_never_panic(pattern in arb_pattern(), actual in arb_value()) {
        within("compile and match", move || check(&pattern, &actual))?
            .map_err(TestCaseError::fail)?;
    }

    #[test]
    fn matching_a_value_shaped_after_the_pattern_never_panics(pattern in arb_pattern(), seed in 1u64..) {
        within("compile and match", move || {
            let mut seed = seed;
            let actual = example(&pattern, &mut seed);
            check(&pattern, &actual)
        })?
        .map_err(TestCaseError::fail)?;
    }

    #[test]
    fn a_pattern_matched_against_a_pattern_never_panics(pattern in arb_pattern(), other in arb_pattern()) {
        within("compile and match", move || check(&pattern, &other))?
            .map_err(TestCaseError::fail)?;
    }

    #[test]
    fn a_value_matches_itself_written_literally(value in arb_value()) {
        within("match itself", move || check_literal(value))?.map_err(TestCaseError::fail)?;
    }

    #[test]
    fn patterns_written_in_yaml_never_panic(yaml in arb_yaml(), actual in arb_value()) {
        within("compile yaml", move || {
            let Ok(pattern) = serde_saphyr::from_str::<Value>(&yaml) else {
                return Ok(());
            };
            check(&pattern, &actual)
        })?
        .map_err(TestCaseError::fail)?;
    }
}

/// `depth` arrays around `inner`.
fn nest(depth: usize, inner: Value) -> Value {
    (0..depth).fold(inner, |v, _| json!([v]))
}

#[test]
fn patterns_and_values_as_deep_as_the_parsers_allow_do_not_overflow() {
    // serde_json stops at 128 levels and serde-saphyr at 64: no pattern or message is deeper.
    for depth in [64, 127] {
        let outcome = within("deep", move || {
            let pattern = nest(depth, json!({"$one_of": ["$string", {"$not": 1}]}));
            check(&pattern, &nest(depth, json!("s")))?;
            check(&pattern, &nest(depth - 1, json!("s")))?;
            check_literal(nest(depth, json!({"$k": "$v"})))
        });
        outcome
            .unwrap_or_else(|e| panic!("{depth} deep: {e}"))
            .unwrap_or_else(|e| panic!("{depth} deep: {e}"));
    }
}
