//! What matching one message gives: the captures, every mismatch, and how close a miss came,
//! which ranks the received messages when an expectation was never met.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fmt;

use serde_json::Value;

use crate::pattern::compile::{Pattern, truncate};

/// The result of matching one message: captures and every mismatch found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MatchOutcome {
    /// Values captured by `$capture`; empty unless the whole pattern matched,
    /// so a partial match can never leak half-filled variables.
    pub captures: BTreeMap<String, Value>,
    /// Every place where the message differs from the pattern.
    pub mismatches: Vec<Mismatch>,
    // Leaf checks performed and failed; they rank near misses in `nearest`.
    pub(super) checked: usize,
    pub(super) failed: usize,
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
