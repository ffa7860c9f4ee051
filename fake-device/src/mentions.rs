//! `@path` mentions in what the person typed (capability `files`), expanded as the TUI's
//! expander does (the spec's `session/prompt` section): a file line-numbered, `@path#10-20` a
//! range, `@dir/` a listing, an image by path. A name's spaces and `#` are escaped with a
//! backslash (`@my\ notes.md`, `@a\#b.md`).
//!
//! Only a path that is, symlinks followed, inside the session's project and inside the device's
//! roots, and not a protected path, is attached; any other `@word` stays plain text and is never
//! opened: every check is made on the resolved path before anything is read.

use std::path::{Component, Path, PathBuf};

use crate::limits::Limits;

/// The most of one file attached (bigger files are named, not read whole).
const MAX_FILE_BYTES: u64 = 1024 * 1024;
/// The most entries one `@dir/` listing names.
const MAX_LISTED: usize = 200;

/// One `@path` as typed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mention {
    /// The path, unescaped.
    pub path: String,
    /// `#10-20` (or `#10`, one line), 1-based and inclusive.
    pub range: Option<(usize, usize)>,
}

/// Finds the mentions in typed text: an `@` at the start or after whitespace, then the path up
/// to the first unescaped whitespace.
pub fn find(text: &str) -> Vec<Mention> {
    let mut mentions = Vec::new();
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let starts = chars[i] == '@' && (i == 0 || chars[i - 1].is_whitespace());
        if !starts {
            i += 1;
            continue;
        }
        i += 1;
        let mut path = String::new();
        let mut range_text: Option<String> = None;
        while i < chars.len() && !chars[i].is_whitespace() {
            match chars[i] {
                '\\' if i + 1 < chars.len() => {
                    path.push(chars[i + 1]);
                    i += 2;
                    continue;
                }
                '#' if range_text.is_none()
                    && chars.get(i + 1).is_some_and(char::is_ascii_digit) =>
                {
                    range_text = Some(String::new());
                }
                // A range is digits and one `-`; what follows it (a comma) is not the path's.
                c => match &mut range_text {
                    Some(range) if c.is_ascii_digit() || c == '-' => range.push(c),
                    Some(_) => {}
                    None => path.push(c),
                },
            }
            i += 1;
        }
        // Sentence punctuation after a mention is not part of it.
        while range_text.is_none() && path.ends_with([',', ';', ':', '!', '?', ')']) {
            path.pop();
        }
        let range = range_text.as_deref().and_then(parse_range);
        if range_text.is_some() && range.is_none() {
            // `#12x` is not a range: the mention is not one this reads.
            continue;
        }
        if !path.is_empty() {
            mentions.push(Mention { path, range });
        }
    }
    mentions
}

fn parse_range(text: &str) -> Option<(usize, usize)> {
    let (from, to) = match text.split_once('-') {
        Some((from, to)) => (from.parse().ok()?, to.parse().ok()?),
        None => {
            let line = text.parse().ok()?;
            (line, line)
        }
    };
    (from >= 1 && to >= from).then_some((from, to))
}

/// A path the device never attaches, wherever it is: version control internals, keys and
/// credentials. (The CLI's own list is its own; this is fake-device's.)
pub fn protected(path: &Path) -> bool {
    let names: Vec<String> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(name) => Some(name.to_string_lossy().to_lowercase()),
            _ => None,
        })
        .collect();
    let inside = |dir: &str| names.iter().rev().skip(1).any(|n| n == dir);
    let file = names.last().map(String::as_str).unwrap_or_default();
    inside(".git")
        || inside(".ssh")
        || inside(".gnupg")
        || file == ".env"
        || file.starts_with(".env.")
        || file.starts_with("id_rsa")
        || file.starts_with("id_ed25519")
        || file == ".netrc"
        || file.ends_with(".pem")
        || file.ends_with(".key")
}

/// What the expander attached.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Expanded {
    /// The text the model gets after the typed text.
    pub text: String,
    /// The files attached (resolved), for frecency.
    pub used: Vec<PathBuf>,
}

/// Where a mention may be read from: the session's project, inside the device's roots.
pub struct Reach<'a> {
    /// The session's project (its working directory).
    pub project: &'a Path,
    /// The device's limits now.
    pub limits: &'a Limits,
    /// How a misbehaving device misreads the mentions.
    pub misreads: Misreads,
}

/// How a misbehaving device reads `@path` mentions (all `false`: as the spec says).
#[derive(Debug, Clone, Copy, Default)]
pub struct Misreads {
    /// Misbehaving: the path is judged as written, before its symlinks are followed.
    pub judges_unresolved: bool,
    /// Misbehaving: an escaped `#` is read as a range's mark, so a name holding one is never
    /// attached.
    pub misreads_hash: bool,
    /// Misbehaving: `@dir/` attaches nothing.
    pub lists_no_dirs: bool,
    /// Misbehaving: a `#from-to` range is left out, the whole file attached.
    pub whole_file: bool,
    /// Misbehaving: an unescaped `#` and digits is read as part of the name.
    pub hash_in_name: bool,
    /// Misbehaving: `@dir/` attaches the project's listing, not the folder's.
    pub lists_project: bool,
}

impl Reach<'_> {
    /// The mention's path, resolved, when it may be read.
    fn allows(&self, mention: &Mention) -> Option<PathBuf> {
        let written = Path::new(&mention.path);
        let candidate = if written.is_absolute() {
            written.to_path_buf()
        } else {
            self.project.join(written)
        };
        // Metadata only: following the links opens no file.
        let resolved = std::fs::canonicalize(&candidate).ok()?;
        let project = std::fs::canonicalize(self.project).ok()?;
        let judged = if self.misreads.judges_unresolved {
            lexical(&candidate)
        } else {
            resolved.clone()
        };
        let inside = judged.starts_with(&project)
            && self
                .limits
                .roots
                .iter()
                .any(|root| judged.starts_with(root))
            && self.limits.remote
            && !protected(&judged)
            && !protected(&resolved);
        inside.then_some(resolved)
    }
}

/// A path with `.` and `..` taken out as written, links not followed.
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// Expands the mentions of `typed` that `reach` allows; the others stay plain text, unread.
pub fn expand(typed: &str, reach: &Reach<'_>) -> Expanded {
    let mut expanded = Expanded::default();
    for mention in find(typed) {
        if reach.misreads.misreads_hash && mention.path.contains('#') {
            continue;
        }
        // Misbehaving: `name#2-3` taken for a file of that name, which there is not.
        if reach.misreads.hash_in_name && mention.range.is_some() {
            continue;
        }
        let Some(path) = reach.allows(&mention) else {
            continue;
        };
        if reach.misreads.lists_no_dirs && path.is_dir() {
            continue;
        }
        let shown = match mention.range {
            Some((from, to)) => format!("@{} (lines {from}-{to})", mention.path),
            None => format!("@{}", mention.path),
        };
        // Misbehaving: the range is dropped; a folder's listing is the project's.
        let range = mention.range.filter(|_| !reach.misreads.whole_file);
        let path = match path.is_dir() && reach.misreads.lists_project {
            true => reach.project.to_path_buf(),
            false => path,
        };
        let Some(body) = attach(&path, range) else {
            continue;
        };
        expanded.text.push_str(&format!("\n\n{shown}:\n{body}"));
        expanded.used.push(path);
    }
    expanded
}

/// What one allowed path attaches: a listing, an image's note, a file's numbered lines.
fn attach(path: &Path, range: Option<(usize, usize)>) -> Option<String> {
    let meta = std::fs::metadata(path).ok()?;
    if meta.is_dir() {
        let mut names: Vec<String> = std::fs::read_dir(path)
            .ok()?
            .flatten()
            .map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    format!("{name}/")
                } else {
                    name
                }
            })
            .collect();
        names.sort();
        names.truncate(MAX_LISTED);
        return Some(names.join("\n"));
    }
    if !meta.is_file() {
        return None;
    }
    let extension = path
        .extension()
        .map(|e| e.to_string_lossy().to_lowercase())
        .unwrap_or_default();
    if ["png", "jpg", "jpeg", "gif", "webp"].contains(&extension.as_str()) {
        return Some(format!("[image attached at {}]", path.display()));
    }
    if meta.len() > MAX_FILE_BYTES {
        return Some(format!("(file too large to attach: {} bytes)", meta.len()));
    }
    let bytes = std::fs::read(path).ok()?;
    let Ok(text) = String::from_utf8(bytes) else {
        return Some(format!("(binary file, {} bytes)", meta.len()));
    };
    let (from, to) = range.unwrap_or((1, usize::MAX));
    Some(
        text.lines()
            .enumerate()
            .filter(|(n, _)| (from..=to).contains(&(n + 1)))
            .map(|(n, line)| format!("{:>5}\t{line}", n + 1))
            .collect::<Vec<_>>()
            .join("\n"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mention(path: &str, range: Option<(usize, usize)>) -> Mention {
        Mention {
            path: path.into(),
            range,
        }
    }

    #[test]
    fn mentions_read_escapes_and_ranges() {
        assert_eq!(
            find(r"see @my\ notes.md and @a\#b.md, @c.md#10-20 @d.md#7 @dir/ mail@example.com"),
            vec![
                mention("my notes.md", None),
                mention("a#b.md", None),
                mention("c.md", Some((10, 20))),
                mention("d.md", Some((7, 7))),
                mention("dir/", None),
            ]
        );
        assert_eq!(find("@x#20-10"), vec![]);
        assert_eq!(find("@ alone"), vec![]);
    }

    #[test]
    fn protected_paths_are_never_attached() {
        for p in [
            "/w/.git/config",
            "/w/.env",
            "/w/.env.local",
            "/h/.ssh/config",
            "/w/cert.pem",
            "/w/id_rsa",
        ] {
            assert!(protected(Path::new(p)), "{p}");
        }
        for p in ["/w/src/main.rs", "/w/.gitignore", "/w/environment.md"] {
            assert!(!protected(Path::new(p)), "{p}");
        }
    }

    /// A root with a project inside, and a directory outside the roots.
    fn layout() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let dir = tempfile::tempdir().expect("dir");
        let root = dir.path().join("root");
        let outside = dir.path().join("outside");
        std::fs::create_dir_all(root.join("src")).expect("mkdir");
        std::fs::create_dir_all(&outside).expect("mkdir");
        std::fs::write(root.join("src/main.rs"), "one\ntwo\nthree\nfour").expect("write");
        std::fs::write(root.join("my notes.md"), "spaced").expect("write");
        std::fs::write(root.join(".env"), "TOKEN=x").expect("write");
        std::fs::write(outside.join("secret.txt"), "the secret").expect("write");
        #[cfg(unix)]
        std::os::unix::fs::symlink(outside.join("secret.txt"), root.join("link.txt"))
            .expect("link");
        (dir, root, outside)
    }

    #[test]
    fn files_inside_are_expanded_and_nothing_outside_is() {
        let (_dir, root, _outside) = layout();
        let limits = Limits::new(&[root.display().to_string()]);
        let reach = Reach {
            project: &root,
            limits: &limits,
            misreads: Misreads::default(),
        };
        let expanded = expand(
            r"look @src/main.rs#2-3 @my\ notes.md @src/ @.env @../outside/secret.txt @link.txt",
            &reach,
        );
        assert!(
            expanded.text.contains("    2\ttwo\n    3\tthree"),
            "{}",
            expanded.text
        );
        assert!(!expanded.text.contains("\tone"));
        assert!(expanded.text.contains("spaced"));
        assert!(expanded.text.contains("main.rs"));
        assert!(!expanded.text.contains("TOKEN"), "protected");
        assert!(!expanded.text.contains("the secret"), "{}", expanded.text);
        assert_eq!(expanded.used.len(), 3);
        // A link to a FIFO outside the roots: opening it would block, so a prompt answered at
        // once proves it was never opened.
        let fifo = root.parent().expect("parent").join("outside/pipe");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        if made.is_ok_and(|s| s.success()) {
            #[cfg(unix)]
            std::os::unix::fs::symlink(&fifo, root.join("pipe-link")).expect("link");
            let (done_tx, done_rx) = std::sync::mpsc::channel();
            let (project, limits) = (root.clone(), limits.clone());
            std::thread::spawn(move || {
                let reach = Reach {
                    project: &project,
                    limits: &limits,
                    misreads: Misreads::default(),
                };
                let _ = done_tx.send(expand("@pipe-link @../outside/pipe", &reach));
            });
            let expanded = done_rx
                .recv_timeout(std::time::Duration::from_secs(5))
                .expect("nothing outside the roots was opened");
            assert!(expanded.used.is_empty());
        }
        let careless = Reach {
            misreads: Misreads {
                judges_unresolved: true,
                ..Misreads::default()
            },
            ..reach
        };
        assert!(expand("@link.txt", &careless).text.contains("the secret"));
    }
}
