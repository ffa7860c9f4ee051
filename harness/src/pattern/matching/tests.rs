//! Matching case by case: which messages match, and the mismatch lines the others give.

use super::*;
use serde_json::json;

fn pat(v: Value) -> Pattern {
    match Pattern::compile(&v) {
        Ok(p) => p,
        Err(e) => panic!("{v} did not compile: {e}"),
    }
}

fn ok(p: Value, v: Value) -> MatchOutcome {
    let out = pat(p.clone()).matches(&v);
    assert!(out.is_match(), "{p} should match {v}: {:?}", out.mismatches);
    out
}

fn bad(p: Value, v: Value) -> Vec<String> {
    let out = pat(p.clone()).matches(&v);
    assert!(!out.is_match(), "{p} should not match {v}");
    assert!(out.captures.is_empty());
    out.mismatches.iter().map(ToString::to_string).collect()
}

#[test]
fn base64_decodes_before_matching() {
    // "lembas-42\n" and "\x1b]133;D;1\x07".
    ok(
        json!({"$base64": {"$regex": "lembas-42"}}),
        json!("bGVtYmFzLTQyCg=="),
    );
    ok(
        json!({"$base64": {"$regex": "133;D;1"}}),
        json!("G10xMzM7RDsxBw=="),
    );
    bad(
        json!({"$base64": {"$regex": "lembas-43"}}),
        json!("bGVtYmFzLTQyCg=="),
    );
    assert_eq!(
        bad(json!({"$base64": "x"}), json!("***")),
        ["$: expected base64 text, got \"***\""]
    );
}

#[test]
fn scalars_and_numbers() {
    ok(json!(1), json!(1.0));
    ok(json!(2.5), json!(2.5));
    ok(json!("a"), json!("a"));
    ok(json!(null), json!(null));
    ok(json!(true), json!(true));
    assert_eq!(bad(json!(2), json!(1)), ["$: expected 2, got 1"]);
    assert_eq!(bad(json!("1"), json!(1)), ["$: expected \"1\", got 1"]);
    bad(json!(null), json!(false));
    bad(json!(0), json!(null));
    // Large integers do not collapse through f64.
    bad(
        json!(9_007_199_254_740_993_u64),
        json!(9_007_199_254_740_992_u64),
    );
    ok(json!(u64::MAX), json!(u64::MAX));
    bad(json!(-1), json!(u64::MAX));
}

#[test]
fn objects_match_partially() {
    ok(json!({"a": 1}), json!({"a": 1, "b": 2}));
    ok(json!({}), json!({"x": 1}));
    assert_eq!(
        bad(
            json!({"params": {"protocol": 2, "x": "$string"}}),
            json!({"params": {"protocol": 1}})
        ),
        [
            "params.protocol: expected 2, got 1",
            "params.x: expected a string, got nothing"
        ]
    );
    assert_eq!(bad(json!({}), json!([])), ["$: expected an object, got []"]);
    assert_eq!(
        bad(json!({"a": 1}), json!({})),
        ["a: expected 1, got nothing"]
    );
}

#[test]
fn arrays_match_elementwise() {
    ok(json!([1, {"a": 2}]), json!([1.0, {"a": 2, "b": 3}]));
    ok(json!([]), json!([]));
    assert_eq!(
        bad(json!([1, 2]), json!([2, 1])),
        ["[0]: expected 1, got 2", "[1]: expected 2, got 1"]
    );
    assert_eq!(
        bad(json!([1, 2]), json!([1])),
        [
            "$: expected an array of 2 elements, got [1]",
            "[1]: expected 2, got nothing"
        ]
    );
    assert_eq!(
        bad(json!([1]), json!([1, 2])),
        ["$: expected an array of 1 element, got [1,2]"]
    );
    bad(json!([]), json!({}));
}

#[test]
fn mismatch_paths() {
    let p = json!({"result": {"items": [{"name": "a"}, {"name": "b"}, {"name": "c"}]}, "params": {"_meta": {"lembas": {"protocol": 2}}}});
    let v = json!({"result": {"items": [{"name": "a"}, {"name": "b"}, {"name": "x"}]}, "params": {"_meta": {"lembas": {"protocol": 3}}}});
    let out = pat(p).matches(&v);
    let paths: Vec<&str> = out.mismatches.iter().map(|m| m.path.as_str()).collect();
    assert_eq!(
        paths,
        ["result.items[2].name", "params._meta.lembas.protocol"]
    );
    assert_eq!(out.mismatches[0].actual, Some(json!("x")));
    let out = pat(json!({"a.b": {"c d": 1}})).matches(&json!({"a.b": {"c d": 2}}));
    assert_eq!(out.mismatches[0].path, "[\"a.b\"][\"c d\"]");
}

#[test]
fn type_placeholders() {
    let cases = [
        ("$any", json!(null), json!("whatever")),
        ("$string", json!(""), json!(1)),
        ("$number", json!(1.5), json!("1")),
        ("$integer", json!(-3), json!(1.5)),
        ("$integer", json!(3.0), json!("3")),
        ("$boolean", json!(false), json!(0)),
        ("$object", json!({}), json!([])),
        ("$array", json!([1]), json!({})),
        ("$null", json!(null), json!(false)),
    ];
    for (placeholder, good, wrong) in cases {
        ok(json!(placeholder), good.clone());
        ok(json!({"k": placeholder}), json!({"k": good}));
        if placeholder != "$any" {
            bad(json!(placeholder), wrong);
        }
        bad(json!({"k": placeholder}), json!({}));
    }
    assert_eq!(
        bad(json!({"k": "$any"}), json!({})),
        ["k: expected any value, got nothing"]
    );
    assert_eq!(
        bad(json!("$integer"), json!(1.5)),
        ["$: expected an integer, got 1.5"]
    );
}

#[test]
fn none_is_absent_or_null() {
    ok(json!({"turnId": "$none"}), json!({}));
    ok(json!({"turnId": "$none"}), json!({"turnId": null}));
    assert_eq!(
        bad(json!({"turnId": "$none"}), json!({"turnId": "t1"})),
        ["turnId: expected absent or null, got \"t1\""]
    );
    ok(
        json!({"e": {"$one_of": ["$none", [1]]}}),
        json!({"e": null}),
    );
}

#[test]
fn absent() {
    ok(json!({"error": "$absent"}), json!({"result": 1}));
    assert_eq!(
        bad(json!({"error": "$absent"}), json!({"error": null})),
        ["error: expected absent, got null"]
    );
    ok(json!({"e": {"$one_of": ["$absent", "$string"]}}), json!({}));
    ok(
        json!({"e": {"$one_of": ["$absent", "$string"]}}),
        json!({"e": "x"}),
    );
    bad(
        json!({"e": {"$one_of": ["$absent", "$string"]}}),
        json!({"e": 1}),
    );
    ok(json!({"e": {"$not": "$absent"}}), json!({"e": 1}));
    bad(json!({"e": {"$not": "$absent"}}), json!({}));
}

#[test]
fn string_escapes() {
    ok(json!("$$string"), json!("$string"));
    bad(json!("$$string"), json!("$$string"));
    bad(json!("$$string"), json!("x"));
    ok(json!("$5"), json!("$5"));
    ok(json!("$"), json!("$"));
    ok(json!({"$$schema": 1}), json!({"$schema": 1}));
    assert_eq!(
        bad(json!({"$$schema": 1}), json!({"$$schema": 1})),
        ["$schema: expected 1, got nothing"]
    );
}

#[test]
fn regex() {
    ok(json!({"$regex": "^ses_"}), json!("ses_123"));
    ok(json!({"$regex": "\\d+"}), json!("abc42def"));
    assert_eq!(
        bad(json!({"$regex": "^ses_"}), json!("xses_")),
        ["$: expected matching /^ses_/, got \"xses_\""]
    );
    bad(json!({"$regex": "1"}), json!(1));
}

#[test]
fn contains() {
    let p = json!({"$contains": [{"a": 1}, 2]});
    ok(p.clone(), json!([3, 2, {"a": 1, "b": 0}]));
    assert_eq!(
        bad(p.clone(), json!([2, {"a": 2}])),
        ["$: expected an array containing {\"a\":1}, got [2,{\"a\":2}]"]
    );
    bad(p.clone(), json!({"a": 1}));
    ok(json!({"$contains": []}), json!([]));
    ok(json!({"$each": "$string"}), json!(["a", "b"]));
    ok(json!({"$each": "$string"}), json!([]));
    bad(json!({"$each": {"$one_of": ["a", "b"]}}), json!(["a", "c"]));
    bad(json!({"$each": "$string"}), json!("a"));
    // Distinct elements: one element cannot satisfy two patterns.
    bad(json!({"$contains": ["$number", "$number"]}), json!([1]));
    // Greedy would give 1 to "$number" and fail; the assignment must backtrack.
    ok(json!({"$contains": ["$number", 1]}), json!([1, 2]));
    let out = ok(
        json!({"$contains": [{"id": {"$capture": "x"}, "k": "b"}]}),
        json!([{"id": 1, "k": "a"}, {"id": 2, "k": "b"}]),
    );
    assert_eq!(out.captures.get("x"), Some(&json!(2)));
}

#[test]
fn exact() {
    ok(
        json!({"$exact": {"a": [1, {"b": 2}]}}),
        json!({"a": [1.0, {"b": 2}]}),
    );
    assert_eq!(
        bad(json!({"$exact": {"a": 1}}), json!({"a": 1, "b": 2})),
        ["$: expected exactly {\"a\":1}, got {\"a\":1,\"b\":2}"]
    );
    bad(
        json!({"k": {"$exact": {"a": {"b": 1}}}}),
        json!({"k": {"a": {"b": 1, "c": 1}}}),
    );
    ok(json!({"$exact": "$string"}), json!("$string"));
    bad(json!({"k": {"$exact": null}}), json!({}));
}

#[test]
fn one_of() {
    ok(json!({"$one_of": [1, 2]}), json!(2));
    assert_eq!(
        bad(json!({"$one_of": [1, 2]}), json!(3)),
        ["$: expected one of: 1, 2, got 3"]
    );
    let out = ok(
        json!({"$one_of": [{"a": {"$capture": "v"}, "t": 1}, {"b": {"$capture": "v"}}]}),
        json!({"b": 7}),
    );
    assert_eq!(out.captures.get("v"), Some(&json!(7)));
}

#[test]
fn not() {
    ok(json!({"$not": "$string"}), json!(1));
    assert_eq!(
        bad(json!({"$not": "$string"}), json!("x")),
        ["$: expected not \"$string\", got \"x\""]
    );
    // An absent key is not 1: `$not` takes it (a prompt without a turn id is not turn T).
    ok(json!({"k": {"$not": 1}}), json!({}));
    assert_eq!(
        bad(json!({"k": {"$not": 1}}), json!({"k": 1})),
        ["k: expected not 1, got 1"]
    );
    let out = ok(json!({"$not": {"$capture": "z", "$match": 1}}), json!(2));
    assert!(out.captures.is_empty());
}

#[test]
fn capture() {
    let out = ok(
        json!({"result": {"sessionId": {"$capture": "sid"}, "obj": {"$capture": "o"}}}),
        json!({"result": {"sessionId": "ses_1", "obj": {"x": [1]}}}),
    );
    assert_eq!(out.captures.get("sid"), Some(&json!("ses_1")));
    assert_eq!(out.captures.get("o"), Some(&json!({"x": [1]})));
    let out = ok(
        json!({"$capture": "n", "$match": {"$regex": "^t"}}),
        json!("tok"),
    );
    assert_eq!(out.captures.get("n"), Some(&json!("tok")));
    bad(
        json!({"$capture": "n", "$match": {"$regex": "^t"}}),
        json!("x"),
    );
    assert_eq!(
        bad(json!({"k": {"$capture": "n"}}), json!({})),
        ["k: expected any value, got nothing"]
    );
    // Captures are withheld when something else failed.
    let out = pat(json!({"a": {"$capture": "x"}, "b": 1})).matches(&json!({"a": 1, "b": 2}));
    assert!(out.captures.is_empty());
    ok(json!({"k": {"$capture": "n"}}), json!({"k": null}));
}

#[test]
fn len() {
    ok(json!({"$len": 2}), json!([1, 2]));
    ok(json!({"$len": 2}), json!("éa"));
    ok(json!({"$len": 1}), json!({"a": 1}));
    ok(json!({"$len": 0}), json!(""));
    assert_eq!(
        bad(json!({"$len": 3}), json!([1])),
        ["$: expected length 3, got [1]"]
    );
    bad(json!({"$len": 1}), json!(1));
    bad(json!({"k": {"$len": 0}}), json!({}));
}

#[test]
fn display_truncates_huge_values() {
    let huge = json!("x".repeat(1000));
    let text = bad(json!(1), huge).join("");
    assert!(text.chars().count() < 200, "{text}");
    assert!(text.ends_with('…'));
}

#[test]
fn closeness_and_nearest() {
    let p = pat(json!({"method": "a", "params": {"x": 1, "y": 2, "z": 3}}));
    let far = json!({"method": "b"});
    let near = json!({"method": "a", "params": {"x": 1, "y": 2, "z": 4}});
    let wrong_type = json!({"method": "a", "params": 5});
    let exact = json!({"method": "a", "params": {"x": 1, "y": 2, "z": 3}});
    assert!(p.matches(&near).closeness() > p.matches(&wrong_type).closeness());
    assert!((p.matches(&near).closeness() - 0.75).abs() < 1e-9);
    assert!((p.matches(&exact).closeness() - 1.0).abs() < 1e-9);
    assert_eq!(p.matches(&far).closeness(), 0.0);

    let candidates = [far.clone(), wrong_type.clone(), near.clone()];
    let found = nearest(&p, &candidates);
    assert_eq!(found.as_ref().map(|(v, _)| *v), Some(&near));
    let found = nearest(&p, [&far, &exact, &near]);
    assert!(found.is_some_and(|(v, o)| v == &exact && o.is_match()));
    assert!(nearest(&p, []).is_none());
    // Ties go to the earliest candidate.
    let twin = near.clone();
    let found = nearest(&p, [&twin, &near]);
    assert!(found.is_some_and(|(v, _)| std::ptr::eq(v, &twin)));
}

#[test]
fn empty_pattern_closeness() {
    let p = pat(json!({}));
    assert_eq!(p.matches(&json!({})).closeness(), 1.0);
    assert_eq!(p.matches(&json!(1)).closeness(), 0.0);
}
