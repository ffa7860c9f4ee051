//! The two path notations used by this module.
//!
//! Locations inside a *received message* (mismatch reports) use the dotted
//! notation scenario authors already read in JSON-RPC traces:
//! `params._meta.lembas.protocol`, `result.items[2].name`, `$` for the root.
//! Locations inside a *scenario document* (compile and substitution errors)
//! use JSON Pointer (`/params/items/0`), because that is what YAML/JSON
//! tooling understands and it can spell every key unambiguously.

/// Rendering of the root in dotted notation; internally the root is `""`
/// so that children can be appended without special cases at every call.
pub(crate) const ROOT: &str = "$";

/// Turns an internal dotted path into the form shown to users.
pub(crate) fn display(path: &str) -> &str {
    if path.is_empty() { ROOT } else { path }
}

/// Appends an object key in dotted notation.
///
/// Keys that would make the path ambiguous (dots, brackets, quotes, spaces,
/// empty) are written as `["key"]` so the path can still be read back.
pub(crate) fn child_key(parent: &str, key: &str) -> String {
    let plain = !key.is_empty()
        && !key
            .chars()
            .any(|c| matches!(c, '.' | '[' | ']' | '"') || c.is_whitespace());
    if plain {
        if parent.is_empty() {
            key.to_owned()
        } else {
            format!("{parent}.{key}")
        }
    } else {
        // serde_json's string escaping gives an unambiguous quoted form.
        let quoted = serde_json::Value::String(key.to_owned()).to_string();
        format!("{parent}[{quoted}]")
    }
}

/// Appends an array index in dotted notation.
pub(crate) fn child_index(parent: &str, index: usize) -> String {
    format!("{parent}[{index}]")
}

/// Appends an object key to a JSON Pointer (RFC 6901 escaping).
pub(crate) fn pointer_key(parent: &str, key: &str) -> String {
    format!("{parent}/{}", key.replace('~', "~0").replace('/', "~1"))
}

/// Appends an array index to a JSON Pointer.
pub(crate) fn pointer_index(parent: &str, index: usize) -> String {
    format!("{parent}/{index}")
}

/// Renders a JSON Pointer for error messages; the empty pointer (the whole
/// document) would otherwise print as nothing at all.
pub(crate) fn show_pointer(pointer: &str) -> &str {
    if pointer.is_empty() {
        "(root)"
    } else {
        pointer
    }
}

/// Whether `path` is `prefix` itself or lies underneath it.
pub(crate) fn is_within(path: &str, prefix: &str) -> bool {
    if prefix.is_empty() || prefix == ROOT {
        return true;
    }
    match path.strip_prefix(prefix) {
        Some(rest) => rest.is_empty() || rest.starts_with('.') || rest.starts_with('['),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dotted_paths() {
        assert_eq!(child_key("", "params"), "params");
        assert_eq!(child_key("params", "_meta"), "params._meta");
        assert_eq!(child_key("a", "x/y-z"), "a.x/y-z");
        assert_eq!(child_key("a", "b.c"), "a[\"b.c\"]");
        assert_eq!(child_key("", ""), "[\"\"]");
        assert_eq!(child_index("result.items", 2), "result.items[2]");
        assert_eq!(child_index("", 0), "[0]");
        assert_eq!(display(""), "$");
    }

    #[test]
    fn pointers() {
        assert_eq!(pointer_key("", "a/b~c"), "/a~1b~0c");
        assert_eq!(pointer_index("/x", 3), "/x/3");
        assert_eq!(show_pointer(""), "(root)");
    }

    #[test]
    fn within() {
        assert!(is_within("a.b", "a"));
        assert!(is_within("a[0]", "a"));
        assert!(is_within("a", "a"));
        assert!(!is_within("ab", "a"));
        assert!(is_within("anything", "$"));
    }
}
