//! Turning a pattern written in a scenario into a checked, ready-to-run tree.
//!
//! Everything that can be wrong with a pattern is reported here, once, when
//! the scenario is loaded, so that a typo such as `$strnig` fails the run
//! up front instead of silently never matching.

use std::fmt;

use regex::Regex;
use serde_json::{Map, Value};

use crate::pattern::{path, vars};

/// A compiled pattern; see the [module documentation](crate::pattern) for
/// the language.
#[derive(Debug, Clone)]
pub struct Pattern {
    pub(crate) root: Node,
    source: Value,
}

impl Pattern {
    /// Compiles a pattern written in a scenario.
    pub fn compile(source: &Value) -> Result<Pattern, PatternError> {
        let root = compile_node(source, "", Position::Value)?;
        Ok(Pattern {
            root,
            source: source.clone(),
        })
    }

    /// The pattern as written, e.g. for [`render_diff`](crate::pattern::render_diff).
    pub fn source(&self) -> &Value {
        &self.source
    }
}

/// Why a pattern was rejected, and where (a JSON Pointer into the pattern).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid pattern at {}: {kind}", path::show_pointer(.at))]
pub struct PatternError {
    /// JSON Pointer to the offending part of the pattern (`""` = the whole).
    pub at: String,
    /// What is wrong there.
    pub kind: PatternErrorKind,
}

/// The different ways a pattern can be invalid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PatternErrorKind {
    /// A `$word` string that is not a known placeholder (usually a typo).
    UnknownPlaceholder(String),
    /// A `$key` in an operator object that is not a known operator.
    UnknownOperator(String),
    /// An object mixing `$operator` keys with plain keys.
    MixedKeys,
    /// Operators that cannot appear together in one object.
    BadCombination(Vec<String>),
    /// An operator's operand has the wrong type or value.
    BadOperand {
        /// The operator.
        operator: String,
        /// What the operand should have been.
        expected: &'static str,
    },
    /// `$regex` did not compile; carries the regex crate's explanation.
    BadRegex(String),
    /// `$absent` used where there is no parent key that could be absent.
    AbsentNotAllowed,
    /// A `$capture` name that could not be referred to as `${name}`.
    BadCaptureName(String),
}

impl fmt::Display for PatternErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UnknownPlaceholder(p) => write!(
                f,
                "unknown placeholder {p:?} (known: $any, $string, $number, $integer, \
                 $boolean, $object, $array, $null, $absent, $none; write $${} for a literal)",
                p.get(1..).unwrap_or_default()
            ),
            Self::UnknownOperator(op) => write!(
                f,
                "unknown operator {op:?} (known: $regex, $contains, $each, $exact, $one_of, \
                 $not, $capture, $match, $len; write \"$$key\" for a literal key)"
            ),
            Self::MixedKeys => f.write_str(
                "an object cannot mix $operator keys with plain keys \
                 (escape a literal key as \"$$key\")",
            ),
            Self::BadCombination(ops) => write!(
                f,
                "operators {} cannot be combined (only $capture with $match)",
                ops.join(", ")
            ),
            Self::BadOperand { operator, expected } => {
                write!(f, "{operator} expects {expected}")
            }
            Self::BadRegex(msg) => write!(f, "bad regex: {msg}"),
            Self::AbsentNotAllowed => f.write_str(
                "$absent and $none are only allowed as the value of an object key \
                 (or inside $one_of/$not there)",
            ),
            Self::BadCaptureName(name) => write!(
                f,
                "bad capture name {name:?}: must be non-empty without '.', '[', ']', \
                 '{{', '}}', '$' or spaces"
            ),
        }
    }
}

/// Where a sub-pattern sits, which decides whether `$absent` makes sense.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Position {
    /// The value of an object key: the key may be missing.
    Field,
    /// Anywhere else: there is always a value.
    Value,
}

/// Types checked by `$string`, `$number` and friends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    String,
    Number,
    Integer,
    Boolean,
    Object,
    Array,
    Null,
}

impl Kind {
    pub(crate) fn phrase(self) -> &'static str {
        match self {
            Kind::String => "a string",
            Kind::Number => "a number",
            Kind::Integer => "an integer",
            Kind::Boolean => "a boolean",
            Kind::Object => "an object",
            Kind::Array => "an array",
            Kind::Null => "null",
        }
    }
}

/// The compiled form. Operators that report their operand in mismatch
/// messages keep a short rendering of it, computed once here.
#[derive(Debug, Clone)]
pub(crate) enum Node {
    Literal(Value),
    Any,
    Absent,
    /// Absent or `null`: an optional field (the spec's `x?`) left out either way.
    Nothing,
    Type(Kind),
    Object(Vec<(String, Node)>),
    Array(Vec<Node>),
    Regex(Regex),
    Contains(Vec<(Node, String)>),
    Exact(Value),
    OneOf(Vec<Node>, String),
    Not(Box<Node>, String),
    Capture(String, Option<Box<Node>>),
    Len(usize),
    Each(Box<Node>),
    Base64(Box<Node>),
}

/// Whether an object key is an operator (`$x`) rather than a literal key
/// (plain, or escaped as `$$x`).
pub(crate) fn is_operator_key(key: &str) -> bool {
    key.starts_with('$') && !key.starts_with("$$")
}

/// The received-message key that a pattern key refers to.
pub(crate) fn unescape_key(key: &str) -> &str {
    if key.starts_with("$$") {
        key.get(1..).unwrap_or(key)
    } else {
        key
    }
}

/// Short text for a sub-pattern inside a mismatch message; long operands are
/// cut so one line of a CI log stays one line.
pub(crate) fn brief(value: &Value) -> String {
    truncate(value.to_string(), 80)
}

pub(crate) fn truncate(mut text: String, max_chars: usize) -> String {
    if let Some((cut, _)) = text.char_indices().nth(max_chars) {
        text.truncate(cut);
        text.push('…');
    }
    text
}

fn err(at: &str, kind: PatternErrorKind) -> PatternError {
    PatternError {
        at: at.to_owned(),
        kind,
    }
}

fn compile_node(value: &Value, at: &str, pos: Position) -> Result<Node, PatternError> {
    match value {
        Value::String(s) => compile_string(s, at, pos),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, item)| compile_node(item, &path::pointer_index(at, i), Position::Value))
            .collect::<Result<Vec<_>, _>>()
            .map(Node::Array),
        Value::Object(map) => {
            let operators = map.keys().filter(|k| is_operator_key(k)).count();
            if operators == 0 {
                map.iter()
                    .map(|(key, sub)| {
                        let node = compile_node(sub, &path::pointer_key(at, key), Position::Field)?;
                        Ok((unescape_key(key).to_owned(), node))
                    })
                    .collect::<Result<Vec<_>, _>>()
                    .map(Node::Object)
            } else if operators == map.len() {
                compile_operator(map, at, pos)
            } else {
                Err(err(at, PatternErrorKind::MixedKeys))
            }
        }
        scalar => Ok(Node::Literal(scalar.clone())),
    }
}

fn compile_string(s: &str, at: &str, pos: Position) -> Result<Node, PatternError> {
    if let Some(unescaped) = s.strip_prefix('$').filter(|rest| rest.starts_with('$')) {
        return Ok(Node::Literal(Value::String(unescaped.to_owned())));
    }
    let Some(name) = s.strip_prefix('$') else {
        return Ok(Node::Literal(Value::String(s.to_owned())));
    };
    // Only `$` + letter is reserved, so amounts like "$5" stay literal.
    if !name.starts_with(|c: char| c.is_ascii_alphabetic()) {
        return Ok(Node::Literal(Value::String(s.to_owned())));
    }
    Ok(match name {
        "any" => Node::Any,
        "string" => Node::Type(Kind::String),
        "number" => Node::Type(Kind::Number),
        "integer" => Node::Type(Kind::Integer),
        "boolean" => Node::Type(Kind::Boolean),
        "object" => Node::Type(Kind::Object),
        "array" => Node::Type(Kind::Array),
        "null" => Node::Type(Kind::Null),
        "absent" if pos == Position::Field => Node::Absent,
        "none" if pos == Position::Field => Node::Nothing,
        "absent" | "none" => return Err(err(at, PatternErrorKind::AbsentNotAllowed)),
        _ => return Err(err(at, PatternErrorKind::UnknownPlaceholder(s.to_owned()))),
    })
}

/// The operators a pattern object may use (`{"$regex": …}`); any other `$` key is an error.
pub const OPERATORS: [&str; 10] = [
    "$base64",
    "$regex",
    "$each",
    "$contains",
    "$exact",
    "$one_of",
    "$not",
    "$capture",
    "$match",
    "$len",
];

fn compile_operator(
    map: &Map<String, Value>,
    at: &str,
    pos: Position,
) -> Result<Node, PatternError> {
    if let Some(unknown) = map.keys().find(|k| !OPERATORS.contains(&k.as_str())) {
        return Err(err(
            &path::pointer_key(at, unknown),
            PatternErrorKind::UnknownOperator(unknown.clone()),
        ));
    }
    let operand_at = |op: &str| path::pointer_key(at, op);
    let bad_operand = |op: &str, expected: &'static str| {
        err(
            &operand_at(op),
            PatternErrorKind::BadOperand {
                operator: op.to_owned(),
                expected,
            },
        )
    };

    if let Some(name) = map.get("$capture") {
        if map.len() > 2 || (map.len() == 2 && !map.contains_key("$match")) {
            return Err(err(
                at,
                PatternErrorKind::BadCombination(map.keys().cloned().collect()),
            ));
        }
        let Value::String(name) = name else {
            return Err(bad_operand("$capture", "a variable name (string)"));
        };
        if !vars::is_valid_name(name) {
            return Err(err(
                &operand_at("$capture"),
                PatternErrorKind::BadCaptureName(name.clone()),
            ));
        }
        let inner = match map.get("$match") {
            Some(sub) => Some(Box::new(compile_node(
                sub,
                &operand_at("$match"),
                Position::Value,
            )?)),
            None => None,
        };
        return Ok(Node::Capture(name.clone(), inner));
    }

    let mut ops = map.iter();
    let (Some((op, operand)), None) = (ops.next(), ops.next()) else {
        return Err(err(
            at,
            PatternErrorKind::BadCombination(map.keys().cloned().collect()),
        ));
    };
    let here = operand_at(op);
    match op.as_str() {
        "$regex" => {
            let Value::String(re) = operand else {
                return Err(bad_operand(op, "a regular expression (string)"));
            };
            Regex::new(re)
                .map(Node::Regex)
                .map_err(|e| err(&here, PatternErrorKind::BadRegex(e.to_string())))
        }
        "$contains" => {
            let Value::Array(items) = operand else {
                return Err(bad_operand(op, "a list of patterns"));
            };
            items
                .iter()
                .enumerate()
                .map(|(i, item)| {
                    compile_node(item, &path::pointer_index(&here, i), Position::Value)
                        .map(|node| (node, brief(item)))
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Node::Contains)
        }
        "$exact" => Ok(Node::Exact(operand.clone())),
        "$one_of" => {
            let Value::Array(items) = operand else {
                return Err(bad_operand(op, "a non-empty list of patterns"));
            };
            if items.is_empty() {
                return Err(bad_operand(op, "a non-empty list of patterns"));
            }
            let alternatives = items
                .iter()
                .enumerate()
                .map(|(i, item)| compile_node(item, &path::pointer_index(&here, i), pos))
                .collect::<Result<Vec<_>, _>>()?;
            let text = items.iter().map(brief).collect::<Vec<_>>().join(", ");
            Ok(Node::OneOf(alternatives, truncate(text, 120)))
        }
        "$not" => {
            let inner = compile_node(operand, &here, pos)?;
            Ok(Node::Not(Box::new(inner), brief(operand)))
        }
        "$len" => operand
            .as_u64()
            .and_then(|n| usize::try_from(n).ok())
            .map(Node::Len)
            .ok_or_else(|| bad_operand(op, "a non-negative integer")),
        "$each" => {
            compile_node(operand, &here, Position::Value).map(|node| Node::Each(Box::new(node)))
        }
        "$base64" => {
            compile_node(operand, &here, Position::Value).map(|node| Node::Base64(Box::new(node)))
        }
        // `$match` alone: `$capture` was handled above.
        _ => Err(err(
            at,
            PatternErrorKind::BadCombination(map.keys().cloned().collect()),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn compile_err(v: Value) -> PatternError {
        match Pattern::compile(&v) {
            Ok(p) => panic!("expected an error for {v}, compiled {p:?}"),
            Err(e) => e,
        }
    }

    #[test]
    fn valid_patterns_compile() {
        for v in [
            json!(1),
            json!("plain"),
            json!("$5 and more"),
            json!("$"),
            json!("$$strnig"),
            json!({"a": "$absent", "b": {"$one_of": ["$absent", 1]}, "c": {"$not": "$absent"}}),
            json!({"$capture": "id", "$match": {"$regex": "^x"}}),
            json!({"$$schema": "x", "plain": [1, "$any"]}),
            json!({"$len": 0}),
            json!({"$exact": {"$weird": "$strnig"}}),
            json!({"$contains": []}),
            json!({}),
            json!([]),
        ] {
            assert!(Pattern::compile(&v).is_ok(), "{v}");
        }
    }

    #[test]
    fn unknown_placeholder() {
        let e = compile_err(json!({"params": {"id": "$strnig"}}));
        assert_eq!(e.at, "/params/id");
        assert_eq!(
            e.kind,
            PatternErrorKind::UnknownPlaceholder("$strnig".into())
        );
        assert!(
            e.to_string()
                .starts_with("invalid pattern at /params/id: unknown placeholder")
        );
    }

    #[test]
    fn absent_only_under_a_key() {
        assert_eq!(
            compile_err(json!("$absent")).kind,
            PatternErrorKind::AbsentNotAllowed
        );
        assert_eq!(compile_err(json!("$absent")).at, "");
        let e = compile_err(json!({"a": [1, "$absent"]}));
        assert_eq!(
            (e.at.as_str(), e.kind),
            ("/a/1", PatternErrorKind::AbsentNotAllowed)
        );
        let e = compile_err(json!({"$contains": ["$absent"]}));
        assert_eq!(e.at, "/$contains/0");
        let e = compile_err(json!({"a": {"$capture": "x", "$match": "$absent"}}));
        assert_eq!(e.kind, PatternErrorKind::AbsentNotAllowed);
    }

    #[test]
    fn operator_errors() {
        let e = compile_err(json!({"x": {"$regx": "a"}}));
        assert_eq!(e.at, "/x/$regx");
        assert_eq!(e.kind, PatternErrorKind::UnknownOperator("$regx".into()));

        let e = compile_err(json!({"x": {"$regex": "a", "plain": 1}}));
        assert_eq!((e.at.as_str(), e.kind), ("/x", PatternErrorKind::MixedKeys));

        let e = compile_err(json!({"$regex": "(unclosed"}));
        assert_eq!(e.at, "/$regex");
        assert!(matches!(e.kind, PatternErrorKind::BadRegex(_)));

        let e = compile_err(json!({"$regex": 5}));
        assert!(
            matches!(e.kind, PatternErrorKind::BadOperand { ref operator, .. } if operator == "$regex")
        );

        for bad in [
            json!({"$contains": {"a": 1}}),
            json!({"$one_of": []}),
            json!({"$one_of": 1}),
            json!({"$len": -1}),
            json!({"$len": 1.5}),
            json!({"$len": "3"}),
            json!({"$capture": 7}),
        ] {
            assert!(
                matches!(
                    compile_err(bad.clone()).kind,
                    PatternErrorKind::BadOperand { .. }
                ),
                "{bad}"
            );
        }

        for bad in [
            json!({"$len": 1, "$regex": "a"}),
            json!({"$match": 1}),
            json!({"$capture": "a", "$len": 1}),
            json!({"$capture": "a", "$match": 1, "$len": 1}),
        ] {
            assert!(
                matches!(
                    compile_err(bad.clone()).kind,
                    PatternErrorKind::BadCombination(_)
                ),
                "{bad}"
            );
        }

        let e = compile_err(json!({"$capture": "a.b"}));
        assert_eq!(e.kind, PatternErrorKind::BadCaptureName("a.b".into()));
    }

    #[test]
    fn nested_error_paths() {
        let e = compile_err(json!({"a": {"$one_of": [1, {"$not": {"b": "$nope"}}]}}));
        assert_eq!(e.at, "/a/$one_of/1/$not/b");
        let e = compile_err(json!({"a/b": "$nope"}));
        assert_eq!(e.at, "/a~1b");
    }

    #[test]
    fn truncation_is_char_safe() {
        assert_eq!(truncate("ééé".into(), 2), "éé…");
        assert_eq!(truncate("ab".into(), 2), "ab");
    }
}
