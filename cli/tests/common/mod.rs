//! What the `harness` command's tests share: where the workspace is, and fake-device's binary
//! to spawn as a system under test.

use std::path::{Path, PathBuf};
use std::process::Command;

// fake-instance's tests check the same of the processes their runs start: one copy of the check.
#[allow(dead_code)] // each test file uses what it needs of this module
#[path = "../../../fake-instance/tests/common/pids.rs"]
pub mod pids;

/// The `harness` binary under test.
pub const HARNESS: &str = env!("CARGO_BIN_EXE_harness");

/// The workspace's root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The fake-device binary beside `harness` (the workspace's tests build it), built if missing.
#[allow(dead_code)] // each test file uses what it needs of this module
pub fn fake_device() -> PathBuf {
    binary("fake-device")
}

/// A double's binary beside `harness`, built if missing.
pub fn binary(name: &str) -> PathBuf {
    let path = Path::new(HARNESS).with_file_name(name);
    if !path.exists() {
        let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
            .args(["build", "-q", "-p", name, "--bin", name])
            .current_dir(root())
            .status()
            .expect("cargo runs");
        assert!(status.success(), "{name} does not build");
    }
    path
}

/// Runs `harness` with `args` from the workspace's root, without colours; its exit code and
/// everything it printed (stdout, then stderr).
#[allow(dead_code)] // each test file uses what it needs of this module
pub fn harness<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> (i32, String) {
    let out = Command::new(HARNESS)
        .args(args)
        .current_dir(root())
        .env("NO_COLOR", "1")
        .output()
        .expect("harness runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

/// Words as `sh` splits them, for the quoting the docs and recipes use (single and double
/// quotes; no escapes or expansions).
#[allow(dead_code)] // each test file uses what it needs of this module
pub fn words(command: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut quote: Option<char> = None;
    for c in command.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.get_or_insert_with(String::new).push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                word.get_or_insert_with(String::new);
            }
            (None, c) if c.is_whitespace() => words.extend(word.take()),
            (None, c) => word.get_or_insert_with(String::new).push(c),
        }
    }
    words.extend(word);
    words
}

/// The code block under the README's `<!-- checked: MARKER ... -->` comment.
#[allow(dead_code)] // each test file uses what it needs of this module
pub fn readme_block(readme: &str, marker: &str) -> String {
    let at = readme
        .find(&format!("<!-- checked: {marker}"))
        .unwrap_or_else(|| panic!("README.md has no block checked by `{marker}`"));
    let fence = readme[at..].find("```").expect("a block") + at;
    let start = readme[fence..].find('\n').expect("a fence line") + fence + 1;
    let end = readme[start..].find("```").expect("the block ends") + start;
    readme[start..end].to_string()
}
