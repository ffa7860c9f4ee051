//! The device's `remote:` limits: which folders a client may work in, whether they must be
//! trusted, whether remote work is on at all, and the most permissive mode allowed.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

/// The modes, least to most permissive: `plan` reads, `manual` asks before each change, `edit`
/// changes files.
pub const MODES: [&str; 3] = ["plan", "manual", "edit"];

/// The device's limits.
#[derive(Debug, Clone)]
pub struct Limits {
    /// `remote.roots`, absolute and with symlinks resolved.
    pub roots: Vec<PathBuf>,
    /// Folders trusted as projects (inside the roots).
    pub trusted: Vec<PathBuf>,
    /// Folders inside trusted ones that the person has not trusted as projects: they and what
    /// is under them are untrusted.
    pub untrusted: Vec<PathBuf>,
    /// Whether remote work is on.
    pub remote: bool,
    /// `remote.require_trust` (on by default).
    pub require_trust: bool,
    /// `remote.max_mode`.
    pub max_mode: String,
}

fn resolve(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

impl Limits {
    /// Limits over these roots, all trusted, remote work on, `edit` at most.
    pub fn new(roots: &[String]) -> Self {
        let roots: Vec<PathBuf> = roots.iter().map(|r| resolve(Path::new(r))).collect();
        Self {
            trusted: roots.clone(),
            untrusted: Vec::new(),
            roots,
            remote: true,
            require_trust: true,
            max_mode: "edit".into(),
        }
    }

    /// No remote limits (`serve --stdio`, where an editor runs the device as its own user):
    /// any existing directory is a project, trusted, in any mode.
    pub fn local() -> Self {
        let everything = vec![PathBuf::from("/")];
        Self {
            trusted: everything.clone(),
            untrusted: Vec::new(),
            roots: everything,
            remote: true,
            require_trust: false,
            max_mode: "edit".into(),
        }
    }

    /// The roots as hello and initialize say them: none when remote work is off.
    pub fn said_roots(&self) -> Vec<String> {
        if !self.remote {
            return Vec::new();
        }
        self.roots.iter().map(|r| r.display().to_string()).collect()
    }

    /// `limits` in hello and initialize.
    pub fn to_value(&self) -> Value {
        json!({ "roots": self.said_roots(), "max_mode": self.max_mode, "require_trust": self.require_trust })
    }

    /// Whether a path (resolved) is inside a root.
    pub fn inside_roots(&self, path: &Path) -> bool {
        self.remote && self.roots.iter().any(|root| path.starts_with(root))
    }

    /// Checks a `cwd` as `session/new` must: absolute, an existing directory inside the roots,
    /// trusted when trust is required. The error is the reason, for the -32602.
    pub fn check_cwd(&self, cwd: &str) -> Result<PathBuf, String> {
        if !self.remote {
            return Err("remote work is off on this device".into());
        }
        if self.roots.is_empty() {
            return Err("this device allows no folder yet (no remote roots)".into());
        }
        let path = Path::new(cwd);
        if !path.is_absolute() {
            return Err(format!("cwd `{cwd}` is not an absolute path"));
        }
        let resolved = std::fs::canonicalize(path)
            .map_err(|_| format!("cwd `{cwd}` is not a directory here"))?;
        if !resolved.is_dir() {
            return Err(format!("cwd `{cwd}` is not a directory"));
        }
        if !self.inside_roots(&resolved) {
            return Err(format!("cwd `{cwd}` is outside the device's remote roots"));
        }
        if self.require_trust && !self.is_trusted(&resolved) {
            return Err(format!("cwd `{cwd}` is not in a trusted project"));
        }
        Ok(resolved)
    }

    /// Whether a resolved path is in a trusted project: under a trusted folder and under none the
    /// person left untrusted.
    pub fn is_trusted(&self, resolved: &Path) -> bool {
        self.trusted.iter().any(|t| resolved.starts_with(t))
            && !self.untrusted.iter().any(|u| resolved.starts_with(u))
    }

    /// These limits with these folders (existing ones) left untrusted.
    pub fn with_untrusted(mut self, folders: &[String]) -> Self {
        self.untrusted = folders.iter().map(|f| resolve(Path::new(f))).collect();
        self
    }

    /// These limits with `remote.max_mode` set to `mode` (one of [`MODES`]).
    pub fn with_max_mode(mut self, mode: &str) -> Self {
        self.max_mode = mode.to_string();
        self
    }

    /// Adds a trusted root (the person added a folder to `remote.roots`).
    pub fn add_root(&mut self, root: &Path) {
        let root = resolve(root);
        self.trusted.push(root.clone());
        self.roots.push(root);
    }

    /// Lowers a mode to `max_mode`; `None` for a mode that does not exist.
    pub fn lower_mode(&self, mode: &str) -> Option<String> {
        let rank = MODES.iter().position(|m| *m == mode)?;
        let max = MODES
            .iter()
            .position(|m| *m == self.max_mode)
            .unwrap_or(MODES.len() - 1);
        Some(MODES[rank.min(max)].to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cwd_must_be_absolute_inside_a_root_and_trusted() {
        let root = tempfile::tempdir().expect("tmp");
        let inside = root.path().join("project");
        std::fs::create_dir(&inside).expect("dir");
        let limits = Limits::new(&[root.path().display().to_string()]);
        assert!(limits.check_cwd(&inside.display().to_string()).is_ok());
        assert!(
            limits
                .check_cwd("relative/path")
                .unwrap_err()
                .contains("absolute")
        );
        assert!(limits.check_cwd("/").unwrap_err().contains("outside"));
        let mut untrusted = limits.clone();
        untrusted.trusted.clear();
        assert!(
            untrusted
                .check_cwd(&inside.display().to_string())
                .unwrap_err()
                .contains("trusted")
        );
        // A folder left untrusted inside a trusted root, and what is under it, is refused.
        let nested = inside.join("deeper");
        std::fs::create_dir(&nested).expect("dir");
        let left_out = limits
            .clone()
            .with_untrusted(&[inside.display().to_string()]);
        for path in [&inside, &nested] {
            assert!(
                left_out
                    .check_cwd(&path.display().to_string())
                    .unwrap_err()
                    .contains("trusted")
            );
        }
        assert!(
            left_out
                .check_cwd(&root.path().display().to_string())
                .is_ok()
        );
        let mut off = limits.clone();
        off.remote = false;
        assert!(
            off.check_cwd(&inside.display().to_string())
                .unwrap_err()
                .contains("off")
        );
        assert!(off.said_roots().is_empty());
        assert!(
            Limits::new(&[])
                .check_cwd("/tmp")
                .unwrap_err()
                .contains("no folder")
        );
    }

    #[test]
    fn modes_are_lowered_to_the_max() {
        let limits = Limits::new(&[]).with_max_mode("manual");
        assert_eq!(limits.lower_mode("edit").as_deref(), Some("manual"));
        assert_eq!(limits.lower_mode("plan").as_deref(), Some("plan"));
        assert_eq!(limits.lower_mode("yolo"), None);
    }
}
