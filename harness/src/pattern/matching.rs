//! Running a compiled pattern against a received message.
//!
//! Matching never stops at the first problem: the run report should show
//! every difference at once, so that one failed CI run is enough to fix a
//! scenario or a peer.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fmt;

use serde_json::{Number, Value};

use crate::pattern::compile::{Kind, Node, Pattern, truncate};
use crate::pattern::path;

/// The result of matching one message: captures and every mismatch found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MatchOutcome {
    /// Values captured by `$capture`; empty unless the whole pattern matched,
    /// so a partial match can never leak half-filled variables.
    pub captures: BTreeMap<String, Value>,
    /// Every place where the message differs from the pattern.
    pub mismatches: Vec<Mismatch>,
    // Leaf checks performed and failed; they rank near misses in `nearest`.
    checked: usize,
    failed: usize,
}

impl MatchOutcome {
    /// Whether the message matched (no mismatches).
    pub fn is_match(&self) -> bool {
        self.mismatches.is_empty()
    }

    /// Fraction (0.0 ..= 1.0) of the pattern's leaf checks that passed; 1.0
    /// for a match. Used to pick the received message closest to a failed
    /// expectation.
    pub fn closeness(&self) -> f64 {
        if self.checked == 0 {
            return if self.is_match() { 1.0 } else { 0.0 };
        }
        let passed = self.checked.saturating_sub(self.failed);
        // Counts are tiny compared to f64 precision.
        passed as f64 / self.checked as f64
    }

    /// Orders outcomes from worse to better; exact integer arithmetic so that
    /// ties are real ties and the first candidate wins them.
    fn compare_closeness(&self, other: &Self) -> Ordering {
        let (a_passed, a_total) = self.ratio();
        let (b_passed, b_total) = other.ratio();
        (a_passed * b_total)
            .cmp(&(b_passed * a_total))
            .then_with(|| other.mismatches.len().cmp(&self.mismatches.len()))
    }

    fn ratio(&self) -> (u128, u128) {
        if self.checked == 0 {
            return (u128::from(self.is_match()), 1);
        }
        let passed = self.checked.saturating_sub(self.failed);
        (passed as u128, self.checked as u128)
    }
}

/// One difference between the pattern and the received message.
#[derive(Debug, Clone, PartialEq)]
pub struct Mismatch {
    /// Where in the received message, e.g. `result.items[2].name`; `$` is the
    /// whole message.
    pub path: String,
    /// What the pattern wanted, as a short phrase (`2`, `a string`, `absent`,
    /// `matching /^ses_/`).
    pub expected: String,
    /// What was received there; `None` when nothing was.
    pub actual: Option<Value>,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.actual {
            // A huge received object would swamp the log line; the diff below
            // the mismatch list shows it in full where it matters.
            Some(value) => write!(
                f,
                "{}: expected {}, got {}",
                self.path,
                self.expected,
                truncate(value.to_string(), 120)
            ),
            None => write!(f, "{}: expected {}, got nothing", self.path, self.expected),
        }
    }
}

impl Pattern {
    /// Matches a received message against this pattern.
    pub fn matches(&self, actual: &Value) -> MatchOutcome {
        let mut acc = Acc::default();
        match_node(&self.root, Some(actual), "", &mut acc);
        let matched = acc.mismatches.is_empty();
        MatchOutcome {
            captures: if matched {
                acc.captures
            } else {
                BTreeMap::new()
            },
            mismatches: acc.mismatches,
            checked: acc.checked,
            failed: acc.failed,
        }
    }
}

/// Picks the candidate that matches `pattern` best (a matching one if any),
/// with its outcome; the earliest wins ties. `None` only when there are no
/// candidates.
pub fn nearest<'a>(
    pattern: &Pattern,
    candidates: impl IntoIterator<Item = &'a Value>,
) -> Option<(&'a Value, MatchOutcome)> {
    let mut best: Option<(&'a Value, MatchOutcome)> = None;
    for candidate in candidates {
        let outcome = pattern.matches(candidate);
        let better = match &best {
            None => true,
            Some((_, current)) => outcome.compare_closeness(current) == Ordering::Greater,
        };
        if better {
            let done = outcome.is_match();
            best = Some((candidate, outcome));
            if done {
                break;
            }
        }
    }
    best
}

#[derive(Default)]
struct Acc {
    captures: BTreeMap<String, Value>,
    mismatches: Vec<Mismatch>,
    checked: usize,
    failed: usize,
}

impl Acc {
    fn pass(&mut self, leaves: usize) {
        self.checked += leaves;
    }

    fn fail(&mut self, leaves: usize, path: &str, expected: String, actual: Option<&Value>) {
        self.checked += leaves;
        self.failed += leaves;
        self.mismatches.push(Mismatch {
            path: path::display(path).to_owned(),
            expected,
            actual: actual.cloned(),
        });
    }

    /// Runs `node` in isolation, for operators that must look at a result
    /// before deciding whether it counts (`$one_of`, `$not`, `$contains`).
    fn trial(node: &Node, actual: Option<&Value>, at: &str) -> Acc {
        let mut acc = Acc::default();
        match_node(node, actual, at, &mut acc);
        acc
    }
}

/// How many leaf checks a node stands for, so that a wrong type at the top
/// of a big sub-pattern weighs as much as all the checks it prevented.
fn leaves(node: &Node) -> usize {
    match node {
        Node::Object(fields) => fields.iter().map(|(_, n)| leaves(n)).sum::<usize>().max(1),
        Node::Array(items) => items.iter().map(leaves).sum::<usize>().max(1),
        Node::Capture(_, Some(inner)) => leaves(inner),
        _ => 1,
    }
}

fn match_node(node: &Node, actual: Option<&Value>, at: &str, acc: &mut Acc) {
    match node {
        Node::Absent => match actual {
            None => acc.pass(1),
            Some(v) => acc.fail(1, at, "absent".into(), Some(v)),
        },
        Node::Nothing => match actual {
            None | Some(Value::Null) => acc.pass(1),
            Some(v) => acc.fail(1, at, "absent or null".into(), Some(v)),
        },
        Node::Any => match actual {
            Some(_) => acc.pass(1),
            None => acc.fail(1, at, "any value".into(), None),
        },
        Node::Literal(expected) => match actual {
            Some(v) if values_equal(expected, v) => acc.pass(1),
            _ => acc.fail(1, at, expected.to_string(), actual),
        },
        Node::Type(kind) => match actual {
            Some(v) if has_kind(*kind, v) => acc.pass(1),
            _ => acc.fail(1, at, kind.phrase().into(), actual),
        },
        Node::Object(fields) => match actual {
            Some(Value::Object(map)) => {
                if fields.is_empty() {
                    acc.pass(1);
                }
                for (key, sub) in fields {
                    match_node(sub, map.get(key), &path::child_key(at, key), acc);
                }
            }
            _ => acc.fail(leaves(node), at, "an object".into(), actual),
        },
        Node::Array(items) => match actual {
            Some(Value::Array(values)) => match_array(items, values, at, acc),
            _ => acc.fail(
                leaves(node),
                at,
                format!("an array of {}", count(items.len(), "element")),
                actual,
            ),
        },
        Node::Regex(re) => match actual {
            Some(Value::String(s)) if re.is_match(s) => acc.pass(1),
            _ => acc.fail(1, at, format!("matching /{}/", re.as_str()), actual),
        },
        Node::Contains(wanted) => match actual {
            Some(Value::Array(values)) => match_contains(wanted, values, at, acc),
            _ => {
                let list = wanted.iter().map(|(_, t)| t.as_str()).collect::<Vec<_>>();
                let expected = format!("an array containing {}", list.join(", "));
                acc.fail(wanted.len().max(1), at, truncate(expected, 160), actual)
            }
        },
        Node::Exact(expected) => match actual {
            Some(v) if values_equal(expected, v) => acc.pass(1),
            _ => acc.fail(
                1,
                at,
                format!("exactly {}", truncate(expected.to_string(), 80)),
                actual,
            ),
        },
        Node::OneOf(alternatives, text) => {
            let hit = alternatives
                .iter()
                .map(|alt| Acc::trial(alt, actual, at))
                .find(|trial| trial.mismatches.is_empty());
            match hit {
                Some(trial) => {
                    acc.captures.extend(trial.captures);
                    acc.pass(1);
                }
                None => acc.fail(1, at, format!("one of: {text}"), actual),
            }
        }
        // Whatever does not match the inner pattern, an absent key included (it matches nothing
        // but `$absent` and `$none`): `turnId: {$not: T}` is met by a message with no turn id,
        // which is not turn T. Captures under `$not` are dropped: they come from the failing side.
        Node::Not(inner, text) => match Acc::trial(inner, actual, at).mismatches.is_empty() {
            false => acc.pass(1),
            true => acc.fail(1, at, format!("not {text}"), actual),
        },
        Node::Capture(name, inner) => match (actual, inner) {
            (Some(v), None) => {
                acc.captures.insert(name.clone(), v.clone());
                acc.pass(1);
            }
            (Some(v), Some(inner)) => {
                let before = acc.mismatches.len();
                match_node(inner, Some(v), at, acc);
                if acc.mismatches.len() == before {
                    acc.captures.insert(name.clone(), v.clone());
                }
            }
            (None, _) => acc.fail(leaves(node), at, "any value".into(), None),
        },
        Node::Each(inner) => match actual {
            Some(Value::Array(values)) => {
                if values.is_empty() {
                    acc.pass(1);
                }
                for (i, value) in values.iter().enumerate() {
                    match_node(inner, Some(value), &path::child_index(at, i), acc);
                }
            }
            _ => acc.fail(1, at, "an array".into(), actual),
        },
        Node::Base64(inner) => {
            use base64::Engine;
            let decoded = actual
                .and_then(Value::as_str)
                .and_then(|s| base64::engine::general_purpose::STANDARD.decode(s).ok())
                .map(|bytes| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
            match decoded {
                Some(text) => match_node(inner, Some(&text), at, acc),
                None => acc.fail(1, at, "base64 text".into(), actual),
            }
        }
        Node::Len(n) => {
            let len = match actual {
                Some(Value::Array(a)) => Some(a.len()),
                Some(Value::String(s)) => Some(s.chars().count()),
                Some(Value::Object(o)) => Some(o.len()),
                _ => None,
            };
            if len == Some(*n) {
                acc.pass(1);
            } else {
                acc.fail(1, at, format!("length {n}"), actual);
            }
        }
    }
}

fn count(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

fn match_array(items: &[Node], values: &[Value], at: &str, acc: &mut Acc) {
    if items.len() != values.len() {
        acc.fail(
            1,
            at,
            format!("an array of {}", count(items.len(), "element")),
            Some(&Value::Array(values.to_vec())),
        );
    } else if items.is_empty() {
        acc.pass(1);
    }
    // Missing elements are reported one by one ("got nothing") because that
    // tells the author which expected entries are gone.
    for (i, item) in items.iter().enumerate() {
        match_node(item, values.get(i), &path::child_index(at, i), acc);
    }
}

/// `$contains`: each wanted pattern needs its own element. Finds a maximum
/// assignment with augmenting paths (Kuhn), which unlike a greedy pass never
/// fails when an assignment exists, and stays cheap for message-sized arrays.
fn match_contains(wanted: &[(Node, String)], values: &[Value], at: &str, acc: &mut Acc) {
    // trials[w][e]: outcome of wanted pattern w against element e.
    let trials: Vec<Vec<Acc>> = wanted
        .iter()
        .map(|(node, _)| {
            values
                .iter()
                .enumerate()
                .map(|(e, v)| Acc::trial(node, Some(v), &path::child_index(at, e)))
                .collect()
        })
        .collect();
    let fits = |w: usize, e: usize| {
        trials
            .get(w)
            .and_then(|row| row.get(e))
            .is_some_and(|t| t.mismatches.is_empty())
    };
    // owner[e] = wanted pattern currently assigned to element e.
    let mut owner: Vec<Option<usize>> = vec![None; values.len()];
    for w in 0..wanted.len() {
        let mut seen = vec![false; values.len()];
        augment(w, &fits, &mut owner, &mut seen);
    }
    let mut assigned = vec![false; wanted.len()];
    for (e, o) in owner.iter().enumerate() {
        if let Some(w) = *o {
            assigned[w] = true;
            if let Some(trial) = trials.get(w).and_then(|row| row.get(e)) {
                acc.captures.extend(trial.captures.clone());
            }
        }
    }
    let missing: Vec<&str> = wanted
        .iter()
        .zip(&assigned)
        .filter(|(_, a)| !**a)
        .map(|((_, text), _)| text.as_str())
        .collect();
    acc.pass(wanted.len() - missing.len());
    if wanted.is_empty() {
        acc.pass(1);
    }
    if !missing.is_empty() {
        let expected = truncate(format!("an array containing {}", missing.join(", ")), 160);
        acc.fail(
            missing.len(),
            at,
            expected,
            Some(&Value::Array(values.to_vec())),
        );
    }
}

fn augment(
    w: usize,
    fits: &impl Fn(usize, usize) -> bool,
    owner: &mut [Option<usize>],
    seen: &mut [bool],
) -> bool {
    for e in 0..owner.len() {
        if !fits(w, e) || seen[e] {
            continue;
        }
        seen[e] = true;
        let free = match owner[e] {
            None => true,
            Some(other) => augment(other, fits, owner, seen),
        };
        if free {
            owner[e] = Some(w);
            return true;
        }
    }
    false
}

fn has_kind(kind: Kind, v: &Value) -> bool {
    match kind {
        Kind::String => v.is_string(),
        Kind::Number => v.is_number(),
        Kind::Integer => v.as_number().is_some_and(is_integral),
        Kind::Boolean => v.is_boolean(),
        Kind::Object => v.is_object(),
        Kind::Array => v.is_array(),
        Kind::Null => v.is_null(),
    }
}

/// 1.0 counts as an integer: JSON does not distinguish, and peers written in
/// languages with only floats send integers that way.
fn is_integral(n: &Number) -> bool {
    n.is_i64()
        || n.is_u64()
        || n.as_f64()
            .is_some_and(|f| f.is_finite() && f.fract() == 0.0)
}

/// Deep equality where numbers compare by value (1 == 1.0).
pub(crate) fn values_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => numbers_equal(x, y),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| values_equal(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| values_equal(v, w)))
        }
        _ => a == b,
    }
}

fn numbers_equal(a: &Number, b: &Number) -> bool {
    // Integers compare exactly: going through f64 would make distinct large
    // ids (above 2^53) look equal.
    let int = |n: &Number| {
        n.as_i64()
            .map(i128::from)
            .or_else(|| n.as_u64().map(i128::from))
    };
    match (int(a), int(b)) {
        (Some(x), Some(y)) => x == y,
        _ => matches!((a.as_f64(), b.as_f64()), (Some(x), Some(y)) if x == y),
    }
}

#[cfg(test)]
mod tests {
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
}
