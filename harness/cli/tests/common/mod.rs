//! What the `harness` command's tests share: where the workspace is, and fake-device's binary
//! to spawn as a system under test.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The `harness` binary under test.
pub const HARNESS: &str = env!("CARGO_BIN_EXE_harness");

/// The workspace's root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The fake-device binary beside `harness` (the workspace's tests build it), built if missing.
pub fn fake_device() -> PathBuf {
    let path = Path::new(HARNESS).with_file_name("fake-device");
    if !path.exists() {
        let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
            .args(["build", "-q", "-p", "fake-device", "--bin", "fake-device"])
            .current_dir(root())
            .status()
            .expect("cargo runs");
        assert!(status.success(), "fake-device does not build");
    }
    path
}
