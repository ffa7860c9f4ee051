//! What every check of a file's parts shares: the file its errors name, where a pattern must
//! compile, and how many answer patterns a request gives.

use serde_saphyr::Spanned;

use super::error::{LoadError, span_of};
use crate::pattern::Pattern;
use crate::scenario::model::Step;

/// Checks the parts of one file, whose errors name it.
pub(super) struct Checker<'a> {
    pub(super) file: &'a str,
}

impl Checker<'_> {
    /// An error at `key_path` of the step or handler `at`.
    pub(super) fn error<T>(&self, at: &Spanned<T>, key_path: String, message: String) -> LoadError {
        LoadError::found(self.file, span_of(at), key_path, message)
    }

    /// A pattern given at `path` of the step `at` must compile.
    pub(super) fn pattern(
        &self,
        at: &Spanned<Step>,
        path: &str,
        value: Option<&serde_json::Value>,
    ) -> Result<(), LoadError> {
        if let Some(value) = value {
            Pattern::compile(value)
                .map_err(|e| self.error(at, path.to_string(), format!("bad pattern: {e}")))?;
        }
        Ok(())
    }
}

/// How many of a request's answer patterns are given (at most one may be).
pub(super) fn answer_patterns(
    result: &Option<serde_json::Value>,
    error: &Option<serde_json::Value>,
    answer: &Option<serde_json::Value>,
) -> usize {
    [result, error, answer]
        .iter()
        .filter(|p| p.is_some())
        .count()
}
