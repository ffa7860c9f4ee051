//! `/review` with nothing to review: the built-in reviews the project's uncommitted changes, and
//! a project with none (or no repository to have them) gets a message instead of a model turn
//! (spec, `session/prompt`: a command with nothing to do says so).

use std::path::Path;
use std::process::Command;

/// What the answer's `message` says when there is nothing to review.
pub const NOTHING: &str = "Nothing to review: the project has no uncommitted changes.";

/// Whether `project` is a git work tree with changes not yet committed.
pub fn has_changes(project: &Path) -> bool {
    Command::new("git")
        .arg("-C")
        .arg(project)
        .args(["status", "--porcelain"])
        .output()
        .is_ok_and(|out| out.status.success() && !out.stdout.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_outside_any_repository_has_nothing_to_review() {
        let dir = tempfile::tempdir().expect("a directory");
        assert!(!has_changes(dir.path()));
    }
}
