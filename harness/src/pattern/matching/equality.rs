//! Equality and types as patterns see them: numbers by value (`1` is `1.0`, large integers
//! exactly), and an integer written with a zero fraction still an integer.

use serde_json::{Number, Value};

use crate::pattern::compile::Kind;

pub(super) fn has_kind(kind: Kind, v: &Value) -> bool {
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
