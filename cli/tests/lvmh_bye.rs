//! The lvmh plugin's graceful end: pi told to stop (SIGTERM or SIGINT) says `bye` with reason
//! `shutdown` before its link closes (lvmh v1, Transport 1), where a killed one goes silent.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::binary;

/// Polls `journal` (JSON lines of messages) until `found` holds for one, at most `within`.
fn journal_has(
    journal: &std::path::Path,
    within: Duration,
    found: impl Fn(&serde_json::Value) -> bool,
) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        let text = std::fs::read_to_string(journal).unwrap_or_default();
        if text
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .any(|l| found(&l["msg"]))
        {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// A fake daemon journaling what plugins send it; its URL.
fn daemon(journal: &std::path::Path) -> (Child, String) {
    let mut daemon = Command::new(binary("fake-instance"))
        .args(["--family", "lvmh", "--listen", "127.0.0.1:0", "--journal"])
        .arg(journal)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the daemon starts");
    let mut line = String::new();
    BufReader::new(daemon.stdout.take().expect("its stdout"))
        .read_line(&mut line)
        .expect("its ready line");
    let url = line
        .trim()
        .strip_prefix("listening ")
        .expect("listening URL")
        .to_string();
    (daemon, url)
}

#[cfg(unix)]
#[test]
fn a_plugin_told_to_stop_says_bye_with_reason_shutdown() {
    for signal in ["TERM", "INT"] {
        let dir = tempfile::tempdir().expect("dir");
        let journal = dir.path().join("daemon.jsonl");
        let (mut daemon, url) = daemon(&journal);
        let mut plugin = Command::new(binary("fake-device"))
            .args(["--family", "lvmh", "--instance", &url])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("the plugin starts");
        assert!(
            journal_has(&journal, Duration::from_secs(10), |m| m["type"] == "hello"),
            "the plugin never said hello"
        );
        let status = Command::new("kill")
            .args([&format!("-{signal}"), &plugin.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success());
        let deadline = Instant::now() + Duration::from_secs(10);
        while plugin.try_wait().expect("wait").is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let ended = plugin.try_wait().expect("wait");
        let _ = plugin.kill();
        let said_bye = journal_has(&journal, Duration::from_secs(5), |m| {
            m["type"] == "bye" && m["reason"] == "shutdown"
        });
        let _ = daemon.kill();
        let _ = daemon.wait();
        assert!(ended.is_some(), "SIG{signal}: the plugin did not end");
        assert!(
            said_bye,
            "SIG{signal}: no bye with reason shutdown came before the plugin ended"
        );
    }
}
