//! `$contains`: an array with a distinct element for each wanted pattern, in any order.

use serde_json::Value;

use super::Acc;
use crate::pattern::compile::{Node, truncate};
use crate::pattern::path;

/// `$contains`: each wanted pattern needs its own element. Finds a maximum
/// assignment with augmenting paths (Kuhn), which unlike a greedy pass never
/// fails when an assignment exists, and stays cheap for message-sized arrays.
pub(super) fn match_contains(wanted: &[(Node, String)], values: &[Value], at: &str, acc: &mut Acc) {
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
