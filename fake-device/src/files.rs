//! `_lembas/files/search` (capability `files`): the `@` picker over a session's directory, as
//! the spec's section on it describes — the files `rg --files` lists (gitignored and hidden ones
//! left out, with the directories they are in), matched fuzzily, nudged by frecency (what the
//! person attached lately), the recent ones for an empty query.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Instant, SystemTime};

use nucleo_matcher::pattern::{CaseMatching, Normalization, Pattern};
use nucleo_matcher::{Config, Matcher, Utf32Str};
use serde_json::{Value, json};

/// Results unless the client asks for fewer or more.
pub const DEFAULT_LIMIT: usize = 20;
/// The most results one search gives.
pub const MAX_LIMIT: usize = 50;
/// The most entries one walk looks at: a huge tree is cut there, not walked for minutes.
const MAX_WALKED: usize = 100_000;

/// One entry found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Relative to the root, `/`-separated.
    pub path: String,
    /// A directory, not a file.
    pub dir: bool,
    /// When it last changed (for "recent").
    modified: Option<SystemTime>,
}

impl Entry {
    /// As the answer lists it.
    pub fn to_value(&self) -> Value {
        json!({ "path": self.path, "kind": if self.dir { "dir" } else { "file" } })
    }
}

/// The files and directories under `root` as `rg --files` sees them: `.gitignore` (and
/// `.ignore`, git's global and exclude files) honoured and hidden entries left out. With
/// `ignore_gitignore` (a misbehaving device) gitignored files are listed too.
pub fn list(root: &Path, ignore_gitignore: bool) -> Vec<Entry> {
    let walker = ignore::WalkBuilder::new(root)
        .hidden(true)
        .git_ignore(!ignore_gitignore)
        .git_exclude(!ignore_gitignore)
        .git_global(!ignore_gitignore)
        .ignore(!ignore_gitignore)
        // A `.gitignore` counts even outside a git repository, as a project's picker expects.
        .require_git(false)
        .follow_links(false)
        .build();
    let mut entries = Vec::new();
    for found in walker.flatten().take(MAX_WALKED) {
        let Ok(relative) = found.path().strip_prefix(root) else {
            continue;
        };
        if relative.as_os_str().is_empty() {
            continue;
        }
        let path = relative
            .components()
            .map(|c| c.as_os_str().to_string_lossy())
            .collect::<Vec<_>>()
            .join("/");
        let dir = found.file_type().is_some_and(|t| t.is_dir());
        let modified = found.metadata().ok().and_then(|m| m.modified().ok());
        entries.push(Entry {
            path,
            dir,
            modified,
        });
    }
    entries
}

/// What the person attached lately, by path under a root: how often and when last. It nudges
/// the picker's order (frecency) and makes "recent" for an empty query.
#[derive(Debug, Default)]
pub struct Frecency {
    used: Mutex<HashMap<PathBuf, (u32, Instant)>>,
}

impl Frecency {
    /// The person used this file (attached it with `@path`).
    pub fn used(&self, path: &Path) {
        if let Ok(mut used) = self.used.lock() {
            let entry = used
                .entry(path.to_path_buf())
                .or_insert((0, Instant::now()));
            entry.0 += 1;
            entry.1 = Instant::now();
        }
    }

    /// A bonus for a path: more for often and lately used.
    fn bonus(&self, path: &Path) -> u32 {
        let Ok(used) = self.used.lock() else {
            return 0;
        };
        used.get(path).map_or(0, |(count, at)| {
            let minutes = u32::try_from(at.elapsed().as_secs() / 60).unwrap_or(u32::MAX);
            count.saturating_mul(40) / (1 + minutes / 30)
        })
    }
}

/// Searches `root` for `query` (fuzzy), at most `limit` results, best first; an empty query
/// gives what was used lately, then the most recently changed files.
pub fn search(
    root: &Path,
    query: &str,
    limit: usize,
    frecency: &Frecency,
    ignore_gitignore: bool,
) -> Vec<Entry> {
    // The caller holds `limit` to the spec's bounds.
    let mut entries = list(root, ignore_gitignore);
    if query.trim().is_empty() {
        entries.retain(|e| !e.dir);
        entries.sort_by(|a, b| {
            let (ua, ub) = (
                frecency.bonus(&root.join(&a.path)),
                frecency.bonus(&root.join(&b.path)),
            );
            ub.cmp(&ua)
                .then(b.modified.cmp(&a.modified))
                .then(a.path.cmp(&b.path))
        });
        entries.truncate(limit);
        return entries;
    }
    let mut matcher = Matcher::new(Config::DEFAULT.match_paths());
    let pattern = Pattern::parse(query, CaseMatching::Smart, Normalization::Smart);
    let mut buffer = Vec::new();
    let mut scored: Vec<(u32, Entry)> = entries
        .into_iter()
        .filter_map(|entry| {
            let score = pattern.score(Utf32Str::new(&entry.path, &mut buffer), &mut matcher)?;
            let nudged = score.saturating_add(frecency.bonus(&root.join(&entry.path)));
            Some((nudged, entry))
        })
        .collect();
    scored.sort_by(|(sa, a), (sb, b)| {
        sb.cmp(sa)
            .then(a.path.len().cmp(&b.path.len()))
            .then(a.path.cmp(&b.path))
    });
    scored.truncate(limit);
    scored.into_iter().map(|(_, entry)| entry).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn project() -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("dir");
        let root = dir.path();
        for (path, text) in [
            ("src/main.rs", "fn main() {}"),
            ("src/lib.rs", ""),
            ("README.md", "# hi"),
            ("target/debug/junk.o", ""),
            (".hidden/secret", ""),
            ("docs/guide.md", ""),
        ] {
            let path = root.join(path);
            std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            std::fs::write(path, text).expect("write");
        }
        std::fs::write(root.join(".gitignore"), "target/\n").expect("write");
        dir
    }

    fn paths(entries: &[Entry]) -> Vec<&str> {
        entries.iter().map(|e| e.path.as_str()).collect()
    }

    #[test]
    fn the_list_leaves_out_ignored_and_hidden_entries() {
        let dir = project();
        let listed = list(dir.path(), false);
        let names = paths(&listed);
        assert!(
            names.contains(&"src/main.rs")
                && names.contains(&"src")
                && names.contains(&"README.md")
        );
        assert!(
            !names
                .iter()
                .any(|n| n.starts_with("target") || n.starts_with(".hidden") || *n == ".gitignore"),
            "{names:?}"
        );
        assert!(
            listed
                .iter()
                .find(|e| e.path == "src")
                .is_some_and(|e| e.dir)
        );
        let careless = list(dir.path(), true);
        assert!(paths(&careless).contains(&"target/debug/junk.o"));
    }

    #[test]
    fn a_fuzzy_query_finds_the_best_match_first_and_frecency_nudges() {
        let dir = project();
        let frecency = Frecency::default();
        let found = search(dir.path(), "mainrs", 20, &frecency, false);
        assert_eq!(found.first().map(|e| e.path.as_str()), Some("src/main.rs"));
        let md = search(dir.path(), "md", 20, &frecency, false);
        assert!(paths(&md).contains(&"docs/guide.md") && paths(&md).contains(&"README.md"));
        for _ in 0..5 {
            frecency.used(&dir.path().join("docs/guide.md"));
        }
        let nudged = search(dir.path(), "md", 20, &frecency, false);
        assert_eq!(
            nudged.first().map(|e| e.path.as_str()),
            Some("docs/guide.md")
        );
        assert!(search(dir.path(), "zzzz", 20, &frecency, false).is_empty());
    }

    #[test]
    fn an_empty_query_gives_recent_files_and_the_limit_holds() {
        let dir = project();
        let frecency = Frecency::default();
        frecency.used(&dir.path().join("src/lib.rs"));
        let recent = search(dir.path(), "", 2, &frecency, false);
        assert_eq!(recent.len(), 2);
        assert_eq!(recent[0].path, "src/lib.rs");
        assert!(recent.iter().all(|e| !e.dir));
        assert_eq!(
            search(dir.path(), "", 500, &frecency, false).len(),
            4,
            "every file"
        );
    }
}
