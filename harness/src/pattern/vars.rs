//! Scenario variables and `${...}` substitution into message templates.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::pattern::path;

/// Named values available to templates, filled from scenario `vars:` and from
/// `$capture` results of earlier expectations.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Vars {
    // BTreeMap so that dumps of the variable set are deterministic in logs.
    values: BTreeMap<String, Value>,
}

impl Vars {
    /// Creates an empty variable set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets `name` to `value`, returning the previous value if there was one.
    ///
    /// A name containing `.` or `[` can be stored but not reached by
    /// [`Vars::lookup`], because those characters start a path step.
    pub fn set(&mut self, name: impl Into<String>, value: Value) -> Option<Value> {
        self.values.insert(name.into(), value)
    }

    /// Returns the value stored under exactly `name` (no path navigation).
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.values.get(name)
    }

    /// Resolves a path such as `name`, `name.field.sub`, `name.list[0].x` or
    /// `name[2]`; `None` if any step is missing or the path is malformed.
    ///
    /// Field names may contain anything except `.` and `[` (so `x/y-z` is a
    /// single field), which keeps JSON-RPC method-like keys addressable.
    pub fn lookup(&self, path: &str) -> Option<&Value> {
        let name_end = path.find(['.', '[']).unwrap_or(path.len());
        let (name, mut rest) = path.split_at(name_end);
        if name.is_empty() {
            return None;
        }
        let mut current = self.values.get(name)?;
        while !rest.is_empty() {
            if let Some(after_dot) = rest.strip_prefix('.') {
                let end = after_dot.find(['.', '[']).unwrap_or(after_dot.len());
                let (field, tail) = after_dot.split_at(end);
                if field.is_empty() {
                    return None;
                }
                current = current.as_object()?.get(field)?;
                rest = tail;
            } else if let Some(after_bracket) = rest.strip_prefix('[') {
                let close = after_bracket.find(']')?;
                let (digits, tail) = after_bracket.split_at(close);
                // `str::parse::<usize>` accepts a leading `+`; paths should not.
                if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                    return None;
                }
                let index: usize = digits.parse().ok()?;
                current = current.as_array()?.get(index)?;
                rest = tail.get(1..)?;
            } else {
                return None;
            }
        }
        Some(current)
    }

    /// Iterates over all variables in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &Value)> {
        self.values.iter()
    }

    /// Number of variables.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Whether no variable is set.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }
}

impl Extend<(String, Value)> for Vars {
    /// Adds or overwrites variables, e.g. with a match's captures.
    fn extend<I: IntoIterator<Item = (String, Value)>>(&mut self, iter: I) {
        self.values.extend(iter);
    }
}

impl FromIterator<(String, Value)> for Vars {
    fn from_iter<I: IntoIterator<Item = (String, Value)>>(iter: I) -> Self {
        Self {
            values: iter.into_iter().collect(),
        }
    }
}

impl From<BTreeMap<String, Value>> for Vars {
    fn from(values: BTreeMap<String, Value>) -> Self {
        Self { values }
    }
}

/// Why a template could not be filled in.
///
/// `at` is a JSON Pointer into the template (`""` is the whole template).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SubstError {
    /// `${name}` refers to a variable (or path) that is not set.
    #[error("unknown variable `{name}` at {}", path::show_pointer(.at))]
    Unknown {
        /// The path written between `${` and `}`.
        name: String,
        /// Where in the template the reference was found.
        at: String,
    },
    /// A `${` has no closing `}`.
    #[error("unterminated `${{` in {text:?} at {}", path::show_pointer(.at))]
    Unterminated {
        /// The offending string.
        text: String,
        /// Where in the template the string was found.
        at: String,
    },
    /// Two keys of one object became equal after substitution; silently
    /// dropping one would send a message the author did not write.
    #[error("duplicate key {key:?} after substitution at {}", path::show_pointer(.at))]
    DuplicateKey {
        /// The key produced twice.
        key: String,
        /// The object containing it.
        at: String,
    },
}

/// Fills `${path}` references in every string of `template`, including
/// object keys.
///
/// * A string that is exactly one `${path}` becomes the variable's JSON value
///   itself, keeping its type (`"${protocol}"` → `2`). For an object key, where
///   only text is possible, a non-string value is written as compact JSON.
/// * Otherwise each `${path}` is interpolated as text: strings without
///   quotes, other values as compact JSON.
/// * `$${` produces a literal `${`.
pub fn substitute(template: &Value, vars: &Vars) -> Result<Value, SubstError> {
    substitute_at(template, vars, "")
}

fn substitute_at(template: &Value, vars: &Vars, at: &str) -> Result<Value, SubstError> {
    match template {
        Value::String(s) => substitute_string(s, vars, at),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, item)| substitute_at(item, vars, &path::pointer_index(at, i)))
            .collect::<Result<Vec<_>, _>>()
            .map(Value::Array),
        Value::Object(map) => {
            let mut out = Map::with_capacity(map.len());
            for (key, value) in map {
                let child = path::pointer_key(at, key);
                let new_key = match substitute_string(key, vars, &child)? {
                    Value::String(s) => s,
                    other => other.to_string(),
                };
                let new_value = substitute_at(value, vars, &child)?;
                if out.insert(new_key.clone(), new_value).is_some() {
                    return Err(SubstError::DuplicateKey {
                        key: new_key,
                        at: at.to_owned(),
                    });
                }
            }
            Ok(Value::Object(out))
        }
        other => Ok(other.clone()),
    }
}

fn substitute_string(s: &str, vars: &Vars, at: &str) -> Result<Value, SubstError> {
    if !s.contains("${") {
        return Ok(Value::String(s.to_owned()));
    }
    // Whole-string reference: the first `}` is the last byte, so there is
    // exactly one reference and nothing around it.
    if let Some(inner) = s.strip_prefix("${")
        && inner.find('}') == Some(inner.len().saturating_sub(1))
        && let Some(name) = inner.strip_suffix('}')
    {
        return resolve(name, vars, at).map(Cow::into_owned);
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(pos) = rest.find('$') {
        out.push_str(&rest[..pos]);
        let tail = &rest[pos..];
        if let Some(after) = tail.strip_prefix("$${") {
            out.push_str("${");
            rest = after;
        } else if let Some(after) = tail.strip_prefix("${") {
            let close = after.find('}').ok_or_else(|| SubstError::Unterminated {
                text: s.to_owned(),
                at: at.to_owned(),
            })?;
            match resolve(&after[..close], vars, at)?.as_ref() {
                Value::String(text) => out.push_str(text),
                other => out.push_str(&other.to_string()),
            }
            rest = &after[close + 1..];
        } else {
            out.push('$');
            rest = &tail[1..];
        }
    }
    out.push_str(rest);
    Ok(Value::String(out))
}

fn resolve<'v>(name: &str, vars: &'v Vars, at: &str) -> Result<Cow<'v, Value>, SubstError> {
    if let Some(made) = generated(name) {
        return Ok(Cow::Owned(made));
    }
    vars.lookup(name)
        .map(Cow::Borrowed)
        .ok_or_else(|| SubstError::Unknown {
            name: name.to_owned(),
            at: at.to_owned(),
        })
}

/// The prefix of a generated value: `${base64:N}` is the base64 text of N bytes, so a scenario
/// can send a payload of an exact decoded size (an attachment just over a limit) without
/// writing it out.
pub const BASE64_OF: &str = "base64:";

/// The most bytes `${base64:N}` makes.
pub const BASE64_OF_MAX: usize = 64 * 1024 * 1024;

/// A value made from its name, when the name is a generator's (`base64:N`, N at most
/// [`BASE64_OF_MAX`]).
pub fn generated(name: &str) -> Option<Value> {
    let count: usize = name.strip_prefix(BASE64_OF)?.parse().ok()?;
    if count > BASE64_OF_MAX {
        return None;
    }
    // Three `x` bytes are `eHh4`: whole groups, then the padded rest.
    let mut text = "eHh4".repeat(count / 3);
    text.push_str(match count % 3 {
        1 => "eA==",
        2 => "eHg=",
        _ => "",
    });
    Some(Value::String(text))
}

/// Whether `name` can be stored by a capture and read back by `${name}`.
pub(crate) fn is_valid_name(name: &str) -> bool {
    !name.is_empty()
        && !name
            .chars()
            .any(|c| matches!(c, '.' | '[' | ']' | '{' | '}' | '$') || c.is_whitespace())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn vars() -> Vars {
        let mut v = Vars::new();
        v.set("protocol", json!(2));
        v.set("name", json!("lembas"));
        v.set(
            "session",
            json!({"id": "ses_1", "list": [{"x": 10}, {"x": 11}], "a/b-c": true}),
        );
        v.set("items", json!(["zero", "one", "two"]));
        v.set("nothing", Value::Null);
        v
    }

    #[test]
    fn base64_of_n_bytes_decodes_to_exactly_n() {
        for n in [0usize, 1, 2, 3, 4, 10] {
            let Some(Value::String(text)) = generated(&format!("base64:{n}")) else {
                panic!("base64:{n} makes a string");
            };
            assert_eq!(text.len(), n.div_ceil(3) * 4, "{n}: {text}");
            assert!(text.ends_with(match n % 3 {
                1 => "==",
                2 => "=",
                _ => "",
            }));
        }
        assert_eq!(generated("base64:x"), None);
        assert_eq!(generated(&format!("base64:{}", BASE64_OF_MAX + 1)), None);
        let template = json!({"data": "${base64:4}", "mixed": "a${base64:1}b"});
        assert_eq!(
            substitute(&template, &Vars::new()).expect("filled"),
            json!({"data": "eHh4eA==", "mixed": "aeA==b"})
        );
    }

    #[test]
    fn get_and_set() {
        let mut v = Vars::new();
        assert!(v.is_empty());
        assert_eq!(v.set("a", json!(1)), None);
        assert_eq!(v.set("a", json!(2)), Some(json!(1)));
        assert_eq!(v.get("a"), Some(&json!(2)));
        assert_eq!(v.get("b"), None);
        assert_eq!(v.len(), 1);
        v.extend([("b".to_owned(), json!(true))]);
        assert_eq!(v.iter().count(), 2);
    }

    #[test]
    fn lookup_paths() {
        let v = vars();
        assert_eq!(v.lookup("protocol"), Some(&json!(2)));
        assert_eq!(v.lookup("session.id"), Some(&json!("ses_1")));
        assert_eq!(v.lookup("session.list[1].x"), Some(&json!(11)));
        assert_eq!(v.lookup("session.list[0]"), Some(&json!({"x": 10})));
        assert_eq!(v.lookup("items[2]"), Some(&json!("two")));
        assert_eq!(v.lookup("session.a/b-c"), Some(&json!(true)));
        assert_eq!(v.lookup("nothing"), Some(&Value::Null));
    }

    #[test]
    fn lookup_failures() {
        let v = vars();
        for bad in [
            "",
            "missing",
            "session.",
            "session..id",
            "session.nope",
            "items[3]",
            "items[]",
            "items[+1]",
            "items[-1]",
            "items[1",
            "items[1]x",
            "protocol.x",
            "protocol[0]",
            "session[0]",
            ".session",
            "[0]",
            "items[99999999999999999999999]",
        ] {
            assert_eq!(v.lookup(bad), None, "{bad}");
        }
    }

    #[test]
    fn whole_value_keeps_type() {
        let v = vars();
        assert_eq!(substitute(&json!("${protocol}"), &v).ok(), Some(json!(2)));
        assert_eq!(
            substitute(&json!("${session.list[0]}"), &v).ok(),
            Some(json!({"x": 10}))
        );
        assert_eq!(substitute(&json!("${nothing}"), &v).ok(), Some(Value::Null));
        assert_eq!(
            substitute(&json!("${name}"), &v).ok(),
            Some(json!("lembas"))
        );
    }

    #[test]
    fn interpolation_as_text() {
        let v = vars();
        assert_eq!(
            substitute(&json!("v${protocol} of ${name}"), &v).ok(),
            Some(json!("v2 of lembas"))
        );
        assert_eq!(
            substitute(&json!("list=${session.list[0]}"), &v).ok(),
            Some(json!("list={\"x\":10}"))
        );
        // Two references back to back are not a whole-value reference.
        assert_eq!(
            substitute(&json!("${protocol}${protocol}"), &v).ok(),
            Some(json!("22"))
        );
        assert_eq!(
            substitute(&json!("${nothing}!"), &v).ok(),
            Some(json!("null!"))
        );
    }

    #[test]
    fn escapes_and_plain_dollars() {
        let v = vars();
        assert_eq!(
            substitute(&json!("$${protocol}"), &v).ok(),
            Some(json!("${protocol}"))
        );
        assert_eq!(
            substitute(&json!("cost $5, ${protocol} and $${x}"), &v).ok(),
            Some(json!("cost $5, 2 and ${x}"))
        );
        assert_eq!(substitute(&json!("$$x $"), &v).ok(), Some(json!("$$x $")));
        assert_eq!(
            substitute(&json!("no refs"), &v).ok(),
            Some(json!("no refs"))
        );
    }

    #[test]
    fn walks_structure_and_keys() {
        let v = vars();
        let template = json!({
            "jsonrpc": "2.0",
            "params": {"protocol": "${protocol}", "${name}": ["${items[1]}", 3, null]},
            "key-${protocol}": "x"
        });
        let expected = json!({
            "jsonrpc": "2.0",
            "params": {"protocol": 2, "lembas": ["one", 3, null]},
            "key-2": "x"
        });
        assert_eq!(substitute(&template, &v).ok(), Some(expected));
        // A whole-key reference to a non-string becomes its JSON text.
        assert_eq!(
            substitute(&json!({"${protocol}": 1}), &v).ok(),
            Some(json!({"2": 1}))
        );
    }

    #[test]
    fn unknown_variable_names_it_and_location() {
        let v = vars();
        let err = substitute(&json!({"params": {"list": [1, "a ${nope.x} b"]}}), &v);
        assert_eq!(
            err,
            Err(SubstError::Unknown {
                name: "nope.x".into(),
                at: "/params/list/1".into()
            })
        );
        let err = substitute(&json!({"${missing}": 1}), &v);
        assert_eq!(
            err,
            Err(SubstError::Unknown {
                name: "missing".into(),
                at: "/${missing}".into()
            })
        );
        let msg = substitute(&json!("${zzz}"), &v)
            .err()
            .map(|e| e.to_string());
        assert_eq!(msg.as_deref(), Some("unknown variable `zzz` at (root)"));
        assert!(matches!(
            substitute(&json!("${}"), &v),
            Err(SubstError::Unknown { .. })
        ));
    }

    #[test]
    fn unterminated_is_an_error() {
        let v = vars();
        assert!(matches!(
            substitute(&json!(["ok", "abc ${protocol"]), &v),
            Err(SubstError::Unterminated { at, .. }) if at == "/1"
        ));
        assert!(matches!(
            substitute(&json!("${"), &v),
            Err(SubstError::Unterminated { .. })
        ));
    }

    #[test]
    fn duplicate_keys_are_rejected() {
        let v = vars();
        assert!(matches!(
            substitute(&json!({"${name}": 1, "lembas": 2}), &v),
            Err(SubstError::DuplicateKey { key, .. }) if key == "lembas"
        ));
    }

    #[test]
    fn non_strings_pass_through() {
        let v = vars();
        let t = json!([1, 2.5, true, null, {"a": [false]}]);
        assert_eq!(substitute(&t, &v).ok(), Some(t));
    }

    #[test]
    fn names() {
        assert!(is_valid_name("session_id"));
        assert!(is_valid_name("a-b/c"));
        assert!(!is_valid_name(""));
        assert!(!is_valid_name("a.b"));
        assert!(!is_valid_name("a[0]"));
        assert!(!is_valid_name("a b"));
    }
}
