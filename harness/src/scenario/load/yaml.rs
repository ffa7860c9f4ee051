//! Reading YAML as the loader does: one set of parser options for every file (only `true` and
//! `false` are booleans), and a parse error turned into a [`LoadError`] with the line, column
//! and key path the author wrote, not the ones serde sees.

use std::cell::RefCell;
use std::path::Path;

use serde_saphyr::Spanned;

use super::error::LoadError;

/// A file's text and the name errors give it.
pub(super) fn read(path: &Path) -> Result<(String, String), LoadError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path)
        .map_err(|e| LoadError::unlocated(file.clone(), format!("cannot read it: {e}")))?;
    Ok((text, file))
}

/// Reads `text` as a `T`; an error names `file` and where in it the parse failed.
pub(crate) fn parse<T: serde::de::DeserializeOwned>(
    text: &str,
    file: &str,
) -> Result<T, LoadError> {
    // YAML 1.1 reads `NO`, `yes`, `on` as booleans inside free-form JSON values; a protocol
    // double must send what the author wrote, so only `true` and `false` are booleans.
    let options = serde_saphyr::options! { strict_booleans: true };
    let key_path: RefCell<Option<String>> = RefCell::new(None);
    let parsed = serde_saphyr::with_deserializer_from_str_with_options(text, options, |de| {
        serde_path_to_error::deserialize(de).map_err(|e| {
            let path = without_span_segments(&e.path().to_string());
            if path != "." && !path.is_empty() {
                *key_path.borrow_mut() = Some(path);
            }
            e.into_inner()
        })
    });
    parsed.map_err(|e| {
        let location = e.location();
        let rendered = e.to_string().replace("<input>", file);
        let (message, snippet) = split_rendered(&rendered);
        LoadError {
            file: file.to_string(),
            line: location.and_then(|l| u32::try_from(l.line()).ok()),
            column: location.and_then(|l| u32::try_from(l.column()).ok()),
            key_path: key_path.borrow().clone(),
            message,
            snippet,
        }
    })
}

/// Steps and handlers are wrapped in serde-saphyr's `Spanned` (for their line numbers), which
/// serde_path_to_error sees as a field `value`; the author never wrote it, so it leaves the path.
fn without_span_segments(path: &str) -> String {
    let mut out = path.replace("].value.", "].");
    if let Some(stripped) = out.strip_suffix("].value") {
        out = format!("{stripped}]");
    }
    out
}

/// serde-saphyr renders `error: line L column C: MESSAGE` and then a snippet; we keep the
/// message and the snippet, and say the location our own way.
fn split_rendered(rendered: &str) -> (String, Option<String>) {
    let mut lines = rendered.lines();
    let first = lines.next().unwrap_or_default();
    let first = first.strip_prefix("error: ").unwrap_or(first);
    let message = match first.find(": ") {
        Some(i) if first.starts_with("line ") => first[i + 2..].to_string(),
        _ => first.to_string(),
    };
    let snippet: Vec<&str> = lines.collect();
    let snippet = (!snippet.is_empty()).then(|| snippet.join("\n"));
    (message, snippet)
}
/// Where a top-level key (`matrix:`) is written, as line and column, for errors about a whole
/// section. Read back by the parser, not searched for in the text: a key in flow style, quoted
/// (a scenario written as JSON) or after `? ` is found too.
///
/// Where the parser cannot read the keys back (the text reads as a scenario, but not as a map of
/// keys: a value no key type takes), the first line that starts with the key is taken, and
/// failing that the file's first line: an error always names a line.
pub(super) fn top_key_at(text: &str, key: &str) -> Option<(u32, u32)> {
    let parsed = || {
        let keys: std::collections::HashMap<Spanned<String>, serde::de::IgnoredAny> =
            parse(text, "").ok()?;
        let (found, _) = keys.iter().find(|(k, _)| k.value == key)?;
        Some((
            u32::try_from(found.referenced.line()).ok()?,
            u32::try_from(found.referenced.column()).ok()?,
        ))
    };
    let searched = || {
        text.lines().enumerate().find_map(|(n, line)| {
            let indent = line.len() - line.trim_start().len();
            let rest = line.trim_start().trim_start_matches(['"', '\'']);
            let written = rest
                .strip_prefix(key)
                .is_some_and(|after| after.trim_start_matches(['"', '\'']).starts_with(':'));
            written.then(|| (u32::try_from(n + 1).ok(), u32::try_from(indent + 1).ok()))
        })
    };
    parsed()
        .or_else(|| match searched() {
            Some((Some(line), Some(column))) => Some((line, column)),
            _ => None,
        })
        .or(Some((1, 1)))
}
