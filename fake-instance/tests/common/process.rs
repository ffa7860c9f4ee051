//! A double's command run as a process to its end, for the tests of its command-line contract:
//! its exit code and what it printed. fake-device's tests include this file too (by path), as
//! both doubles' commands are tested the same way.

use std::process::Command;

/// Runs `bin` with `args`; its exit code (-1 for a signal), stdout and stderr.
pub fn run(bin: &str, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(bin).args(args).output().expect("runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}
