//! The check that no process a run started outlives it: the system under test writes each pid
//! it starts to a file, and after the run none of them may still run. The `harness` command's
//! tests include this file too (by path), as they check the same of the processes they spawn.

use std::path::Path;
use std::time::{Duration, Instant};

/// Whether `pid` runs (a zombie, killed and not yet reaped, does not).
pub fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            stat.rsplit_once(") ")
                .map(|(_, rest)| !rest.starts_with('Z'))
        })
        .unwrap_or(false)
}

/// The pids written to `path`, one a line.
pub fn pids_in(path: &Path) -> Vec<i32> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

/// Every pid written to `path` is gone within `within` (the kill is asynchronous); `started`
/// says what it means that none was written.
pub fn assert_none_outlived(path: &Path, within: Duration, started: &str) {
    let pids = pids_in(path);
    assert!(!pids.is_empty(), "{started}");
    let deadline = Instant::now() + within;
    while pids.iter().any(|p| alive(*p)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let left: Vec<_> = pids.into_iter().filter(|p| alive(*p)).collect();
    assert!(left.is_empty(), "these outlived the run: {left:?}");
}
