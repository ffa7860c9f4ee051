//! Running a compiled pattern against a received message.
//!
//! Matching never stops at the first problem: the run report should show
//! every difference at once, so that one failed CI run is enough to fix a
//! scenario or a peer.
//!
//! This module walks the pattern's tree; `outcome` is what a match gives,
//! `equality` how values compare; the assignment `$contains` needs is here, as it matches each
//! element by walking the tree again.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::pattern::compile::{Node, Pattern, truncate};
use crate::pattern::path;

mod equality;
mod outcome;

use equality::{has_kind, values_equal};
pub use outcome::{MatchOutcome, Mismatch, nearest};

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

/// Matches `actual` (`None`: nothing there) at `at` against `node`, adding what it finds to
/// `acc`.
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
            Some(Value::Object(map)) => match_object(fields, map, at, acc),
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
        Node::OneOf(alternatives, text) => match_one_of(alternatives, text, actual, at, acc),
        // Whatever does not match the inner pattern, an absent key included (it matches nothing
        // but `$absent` and `$none`): `turnId: {$not: T}` is met by a message with no turn id,
        // which is not turn T. Captures under `$not` are dropped: they come from the failing side.
        Node::Not(inner, text) => match Acc::trial(inner, actual, at).mismatches.is_empty() {
            false => acc.pass(1),
            true => acc.fail(1, at, format!("not {text}"), actual),
        },
        Node::Capture(name, inner) => match (actual, inner) {
            (Some(v), inner) => match_capture(name, inner.as_deref(), v, at, acc),
            (None, _) => acc.fail(leaves(node), at, "any value".into(), None),
        },
        Node::Each(inner) => match actual {
            Some(Value::Array(values)) => match_each(inner, values, at, acc),
            _ => acc.fail(1, at, "an array".into(), actual),
        },
        Node::Base64(inner) => match_base64(inner, actual, at, acc),
        Node::Len(n) => match_len(*n, actual, at, acc),
    }
}

/// An object matches partially: each key of the pattern in turn, extra keys let be.
fn match_object(
    fields: &[(String, Node)],
    map: &serde_json::Map<String, Value>,
    at: &str,
    acc: &mut Acc,
) {
    if fields.is_empty() {
        acc.pass(1);
    }
    for (key, sub) in fields {
        match_node(sub, map.get(key), &path::child_key(at, key), acc);
    }
}

/// `$one_of`: the first alternative that matches counts, with its captures.
fn match_one_of(
    alternatives: &[Node],
    text: &str,
    actual: Option<&Value>,
    at: &str,
    acc: &mut Acc,
) {
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

/// `$capture` of a present value: kept when its `$match` (if any) found nothing wrong.
fn match_capture(name: &str, inner: Option<&Node>, v: &Value, at: &str, acc: &mut Acc) {
    match inner {
        None => {
            acc.captures.insert(name.to_string(), v.clone());
            acc.pass(1);
        }
        Some(inner) => {
            let before = acc.mismatches.len();
            match_node(inner, Some(v), at, acc);
            if acc.mismatches.len() == before {
                acc.captures.insert(name.to_string(), v.clone());
            }
        }
    }
}

/// `$each`: every element of the array matches (an empty array passes).
fn match_each(inner: &Node, values: &[Value], at: &str, acc: &mut Acc) {
    if values.is_empty() {
        acc.pass(1);
    }
    for (i, value) in values.iter().enumerate() {
        match_node(inner, Some(value), &path::child_index(at, i), acc);
    }
}

/// `$base64`: the text, decoded, matches the inner pattern.
fn match_base64(inner: &Node, actual: Option<&Value>, at: &str, acc: &mut Acc) {
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

/// `$len`: the elements of an array, characters of a string or keys of an object.
fn match_len(n: usize, actual: Option<&Value>, at: &str, acc: &mut Acc) {
    let len = match actual {
        Some(Value::Array(a)) => Some(a.len()),
        Some(Value::String(s)) => Some(s.chars().count()),
        Some(Value::Object(o)) => Some(o.len()),
        _ => None,
    };
    if len == Some(n) {
        acc.pass(1);
    } else {
        acc.fail(1, at, format!("length {n}"), actual);
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

#[cfg(test)]
mod tests;
