//! What a scenario that does not load says: the error, and where in the file it points.
//!
//! Every error names the file, and the line, column and key path when they are known, so an
//! author goes straight to the fault; the checks build theirs from a step's span or from where
//! a top-level key is written.

use serde_saphyr::Spanned;

/// A scenario that could not be loaded, with where and why.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}", self.render())]
pub struct LoadError {
    /// The file (or the embedded name).
    pub file: String,
    /// 1-based line, when known.
    pub line: Option<u32>,
    /// 1-based column, when known.
    pub column: Option<u32>,
    /// The key path at fault (`steps[2].expect.bogus`), when known.
    pub key_path: Option<String>,
    /// What is wrong.
    pub message: String,
    /// The YAML around the fault, when the parser gave it.
    pub snippet: Option<String>,
}

impl LoadError {
    /// An error of `file` that no line can be given for (a section read after loading).
    pub fn unlocated(file: impl Into<String>, message: impl Into<String>) -> LoadError {
        LoadError {
            file: file.into(),
            line: None,
            column: None,
            key_path: None,
            message: message.into(),
            snippet: None,
        }
    }

    /// An error a check found at `key_path`, written at `at` (line and column); a check has no
    /// parser snippet to show.
    pub(super) fn found(
        file: &str,
        at: (Option<u32>, Option<u32>),
        key_path: String,
        message: String,
    ) -> LoadError {
        let (line, column) = at;
        LoadError {
            file: file.to_string(),
            line,
            column,
            key_path: Some(key_path),
            message,
            snippet: None,
        }
    }

    fn render(&self) -> String {
        let mut out = self.file.clone();
        if let Some(line) = self.line {
            out.push_str(&format!(":{line}"));
            if let Some(col) = self.column {
                out.push_str(&format!(":{col}"));
            }
        }
        out.push_str(": ");
        if let Some(path) = &self.key_path {
            out.push_str(&format!("at `{path}`: "));
        }
        out.push_str(&self.message);
        if let Some(snippet) = &self.snippet {
            out.push('\n');
            out.push_str(snippet);
        }
        out
    }
}

/// Where a value read with its span (a step, a handler, a section) was written, as line and
/// column.
pub(super) fn span_of<T>(at: &Spanned<T>) -> (Option<u32>, Option<u32>) {
    (
        u32::try_from(at.referenced.line()).ok(),
        u32::try_from(at.referenced.column()).ok(),
    )
}

/// A place found or not ([`super::yaml::top_key_at`]) as the line and column of an error.
pub(super) fn place(at: Option<(u32, u32)>) -> (Option<u32>, Option<u32>) {
    (at.map(|(line, _)| line), at.map(|(_, column)| column))
}
