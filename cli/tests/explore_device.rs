//! `harness explore device` against fake-instance run as a stand-in web server (`--console`,
//! its web UI driven by the hooks in `docs/examples/stand-in-server/hooks.yaml`): a
//! well-behaved one gives no finding in a short budget; one that sends a finished later turn
//! again as a new turn after a dropped link is found, shrunk, written under `device/`, and the
//! written scenario replays with `harness run`, failing on the same rule.

use std::path::{Path, PathBuf};

mod common;

use common::harness;

/// The stand-in server's hooks.
const HOOKS: &str = "docs/examples/stand-in-server/hooks.yaml";

/// fake-instance as the web server under test, breaking `misbehave` when given.
fn server(misbehave: Option<&str>) -> String {
    format!(
        "exec {} --listen 127.0.0.1:{{port}} --token {{token}} --protocol {{protocol}} --spec {{spec}} --console --state-dir {{tmp}}/state{}",
        common::binary("fake-instance").display(),
        misbehave
            .map(|m| format!(" --misbehave {m}"))
            .unwrap_or_default()
    )
}

/// Explores `exec` for at most `runs` sequences from seed 1, four at a time, writing findings
/// to `out`.
fn explore(exec: &str, runs: &str, out: &Path) -> (i32, String) {
    let out = out.display().to_string();
    harness(&[
        "explore", "device", "--exec", exec, "--hooks", HOOKS, "--runs", runs, "--time", "150s",
        "--seed", "1", "--jobs", "4", "--out", &out,
    ])
}

/// Runs a written scenario with `harness run` against `exec`, as the finding's line says.
fn replay(file: &Path, exec: &str) -> (i32, String) {
    let file = file.display().to_string();
    harness(&[
        "run",
        &file,
        "--exec",
        exec,
        "--hooks",
        HOOKS,
        "--protocols",
        "2",
        "--specs",
        "1.1.0",
    ])
}

/// The one scenario a finding wrote, in the device's folder.
fn written(out: &Path) -> PathBuf {
    let mut files: Vec<PathBuf> = std::fs::read_dir(out.join("device"))
        .expect("a findings folder")
        .map(|e| e.expect("an entry").path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    files.remove(0)
}

#[cfg(unix)]
#[test]
fn a_well_behaved_web_server_gives_no_finding() {
    let out = tempfile::tempdir().expect("a folder");
    let (code, said) = explore(&server(None), "4", out.path());
    assert_eq!(code, 0, "{said}");
    assert!(said.contains("nothing found in 4 sequences"), "{said}");
    assert!(
        said.contains("instance.reattach.known") && said.contains("instance.delete.redeliver"),
        "the model's rules are named: {said}"
    );
    assert!(!out.path().join("device").exists(), "{said}");
}

#[cfg(unix)]
#[test]
fn a_finished_turn_sent_again_after_a_drop_is_found_shrunk_and_replayed_on_the_same_rule() {
    let out = tempfile::tempdir().expect("a folder");
    let exec = server(Some("instance.reattach.known/later_turn"));
    let (code, said) = explore(&exec, "30", out.path());
    assert_eq!(code, 1, "{said}");
    assert!(said.contains("instance.reattach.known broken by"), "{said}");
    let file = written(out.path());
    let text = std::fs::read_to_string(&file).expect("the scenario");
    // Both lanes: the web UI's moves and the device's drop and dial.
    assert!(
        text.contains("peer:") && text.contains("close:") && text.contains("- dial:"),
        "{text}"
    );
    let moves = said
        .split("by a sequence of ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse::<usize>().ok())
        .expect("the shrunk sequence's length");
    assert!(moves <= 8, "{said}");
    let (code, replayed) = replay(&file, &exec);
    assert_eq!(code, 1, "{replayed}");
    assert!(
        replayed.contains("broke instance.reattach.known"),
        "{replayed}"
    );
    // The same scenario passes against the well-behaved server: the finding is the bug's.
    let (code, fixed) = replay(&file, &server(None));
    assert_eq!(code, 0, "{fixed}");
}
