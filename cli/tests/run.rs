//! `harness run` against a real system under test it spawns: fake-device as a separate process
//! with reduced capabilities (a stand-in CLI), its terminal person and limits change done by
//! `stdin` hooks. The whole instance catalogue, in every cell, is passed or not applicable; each
//! cell has its JUnit file; the baseline's three outcomes come out as they should; and no
//! process of the run outlives it.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

mod common;

use common::{HARNESS, fake_device, harness, root};

/// The stand-in CLI's command: fake-device with the capabilities of a CLI that implements part
/// of the spec, following the instance's model, reading its terminal person from stdin; its pid
/// (the shell's, which `exec` makes fake-device's) goes to `pids`.
fn stand_in(pids: &Path, misbehave: Option<&str>) -> String {
    format!(
        "echo $$ >> {}; exec {} --instance {{url}} --token {{token}} --root {{root}} --state-dir {{tmp}}/state --spec {{spec}} --agent model --console --capabilities turns,status,delete,title,steer,ask{}",
        pids.display(),
        fake_device().display(),
        misbehave
            .map(|m| format!(" --misbehave {m}"))
            .unwrap_or_default()
    )
}

/// No stand-in the run started outlives it (soon after it: the kill is asynchronous).
fn assert_none_outlived(pids: &Path) {
    common::pids::assert_none_outlived(pids, Duration::from_millis(200), "no stand-in was started");
}

/// A shell line that runs a double's binary (built if missing) with `args` in the shell's place.
fn exec_line(double: &str, args: &str) -> String {
    format!("exec {} {args}", common::binary(double).display())
}

/// `harness run` with `args`, reporting in JSON to `name` in `dir`: its exit code, everything it
/// printed, and the report (null when none was written, so that the exit code is asserted first).
fn run_reporting(dir: &Path, name: &str, args: &[&str]) -> (i32, String, serde_json::Value) {
    let json = format!("json:{}", dir.join(name).display());
    let (code, out) = harness(&[&["run", "--report", json.as_str()], args].concat());
    let summary = std::fs::read_to_string(dir.join(name))
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_default();
    (code, out, summary)
}

/// [`run_reporting`] for a run that must pass: everything it printed, its report, and the
/// report's runs.
fn passing(
    dir: &Path,
    name: &str,
    args: &[&str],
) -> (String, serde_json::Value, Vec<serde_json::Value>) {
    let (code, out, summary) = run_reporting(dir, name, args);
    assert_eq!(code, 0, "{out}");
    let runs = summary["runs"].as_array().expect("runs").clone();
    (out, summary, runs)
}

/// Some run of `scenario` in `runs` has `verdict`.
#[track_caller]
fn assert_some_run(runs: &[serde_json::Value], scenario: &str, verdict: &str, out: &str) {
    assert!(
        runs.iter()
            .any(|r| r["scenario"] == scenario && r["verdict"] == verdict),
        "{scenario} is not {verdict} in any run:\n{out}"
    );
}

#[cfg(unix)]
#[test]
fn the_instance_catalogue_runs_against_a_spawned_stand_in_cli_in_every_cell() {
    let dir = tempfile::tempdir().expect("dir");
    let pids = dir.path().join("pids");
    let junit = dir.path().join("junit");
    let (out, summary, runs) = passing(
        dir.path(),
        "run.json",
        &[
            "--exec",
            &stand_in(&pids, None),
            "--hooks",
            "docs/examples/stand-in-cli/hooks.yaml",
            "--protocols",
            "1,2",
            "--specs",
            "1.0.0,1.1.0",
            "--jobs",
            "4",
            "--report",
            &format!("junit:{}", junit.display()),
            "scenarios/instance",
        ],
    );
    let scenarios = std::fs::read_dir(root().join("scenarios/instance"))
        .expect("the catalogue")
        .count();
    assert!(runs.len() > scenarios * 3, "{} runs", runs.len());
    for run in &runs {
        let verdict = run["verdict"].as_str().unwrap_or_default();
        assert!(
            verdict == "passed" || (verdict == "not_applicable" && run["why"].is_string()),
            "{run}"
        );
    }
    // The terminal person and the limits change were done by hooks, and passed somewhere.
    for scenario in ["limits-change", "restart", "model-turn"] {
        assert_some_run(&runs, scenario, "passed", &out);
    }
    let mut files: Vec<String> = std::fs::read_dir(&junit)
        .expect("the JUnit folder")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(
        files,
        [
            "fake-instance.protocol-1.spec-1.0.0.xml",
            "fake-instance.protocol-1.spec-1.1.0.xml",
            "fake-instance.protocol-2.spec-1.0.0.xml",
            "fake-instance.protocol-2.spec-1.1.0.xml",
        ]
    );
    let cell = std::fs::read_to_string(junit.join("fake-instance.protocol-2.spec-1.1.0.xml"))
        .expect("a cell's file");
    assert!(
        cell.contains("<testsuites name=\"fake-instance · protocol 2 · spec 1.1.0\""),
        "{cell}"
    );
    assert!(cell.contains("restart [protocol 2 · spec 1.1.0]"), "{cell}");
    assert!(
        cell.contains(r#"<property name="judged" value="judged "#),
        "{cell}"
    );
    // The matrix ends saying how much of the peer it judged, and the JSON says which rules.
    let judged = out
        .lines()
        .find(|l| l.starts_with("judged ") && l.contains(" rules for this peer"))
        .unwrap_or_else(|| panic!("no judged line:\n{out}"));
    let rules = summary["rules"].as_array().expect("rules");
    let kept = rules.iter().filter(|r| r["judged"] == "kept").count();
    assert!(kept > 50, "{judged}");
    assert!(
        judged.starts_with(&format!("judged {kept} of {} rules", rules.len())),
        "{judged}"
    );
    assert_none_outlived(&pids);
}

#[cfg(unix)]
#[test]
fn the_baseline_holds_expected_failures_and_fails_unexpected_ones_and_stale_entries() {
    let dir = tempfile::tempdir().expect("dir");
    let pids = dir.path().join("pids");
    // A stand-in that says protocol 2 to an instance that lists only 1.
    let broken = stand_in(&pids, Some("device.hello.protocol"));
    let run = |baseline: &str, exec: &str| {
        let file = dir.path().join("expected.yaml");
        std::fs::write(&file, baseline).expect("the baseline");
        harness(&[
            "run",
            "--exec",
            exec,
            "--protocols",
            "1",
            "--specs",
            "1.1.0",
            "--expected-failures",
            file.to_str().expect("utf-8"),
            "instance/negotiate.yaml",
        ])
    };
    // Listed, with its rule: an expected failure, and the run passes.
    let (code, out) = run("- negotiate:device.hello.protocol\n", &broken);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("1 failed as expected"), "{out}");
    // Not listed: it fails.
    let (code, out) = run("- restart\n", &broken);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("1 failed unexpectedly"), "{out}");
    assert!(out.contains("device.hello.protocol"), "{out}");
    // Listed, but the stand-in no longer breaks it: a stale entry, and the run fails, saying
    // to remove it.
    let (code, out) = run(
        "- { failure: \"negotiate:device.hello.protocol\", protocol: 1 }\n",
        &stand_in(&pids, None),
    );
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("STALE: `negotiate:device.hello.protocol (protocol 1)` does not fail on that rule in protocol 1 · spec 1.1.0: remove it"),
        "{out}"
    );
    assert_none_outlived(&pids);
}

#[cfg(unix)]
#[test]
fn a_failed_run_says_in_json_which_step_and_rule_and_a_scenario_named_twice_runs_once() {
    let dir = tempfile::tempdir().expect("dir");
    let pids = dir.path().join("pids");
    let (code, out, summary) = run_reporting(
        dir.path(),
        "run.json",
        &[
            "--exec",
            &stand_in(&pids, Some("device.hello.protocol")),
            "--protocols",
            "1",
            "--specs",
            "1.1.0",
            "instance/negotiate.yaml",
            "scenarios/instance/negotiate.yaml",
        ],
    );
    assert_eq!(code, 1, "{out}");
    // Redirected, each run's line comes as it ends: here, one line for the one run.
    assert_eq!(
        out.lines().filter(|l| l.starts_with("negotiate ")).count(),
        1,
        "{out}"
    );
    let runs = summary["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 1, "{summary}");
    let failures = runs[0]["failures"].as_array().expect("failures");
    assert!(
        failures.iter().any(|f| f["rule"] == "device.hello.protocol"
            && f["message"].as_str().is_some_and(|m| !m.is_empty())),
        "{summary}"
    );
    let rules = summary["rules"].as_array().expect("rules");
    assert!(
        rules
            .iter()
            .any(|r| r["rule"] == "device.hello.protocol" && r["judged"] == "broken"),
        "{summary}"
    );
    assert!(
        summary["judged"]
            .as_str()
            .is_some_and(|j| j.contains("(1 broken")),
        "{summary}"
    );
    assert_none_outlived(&pids);
}

#[cfg(unix)]
#[test]
fn the_device_catalogue_runs_against_a_spawned_stand_in_server_with_its_web_ui_by_hooks() {
    let dir = tempfile::tempdir().expect("dir");
    let server = exec_line(
        "fake-instance",
        "--listen 127.0.0.1:{port} --token {token} --protocol {protocol} --spec {spec} --console --state-dir {tmp}/state",
    );
    let (out, _, runs) = passing(
        dir.path(),
        "run.json",
        &[
            "--exec",
            &server,
            "--hooks",
            "docs/examples/stand-in-server/hooks.yaml",
            "--jobs",
            "4",
            "device",
        ],
    );
    // The web UI's chats were opened and written in by hooks, whose `reply` gave the captures;
    // the server was restarted by the run.
    // (Its person answers cards by fake-instance's own defaults: with no `answer_cards` hook
    // the card scenarios that set a policy do not apply.)
    for scenario in ["cancel", "steer", "rewind", "reattach-restart"] {
        assert_some_run(&runs, scenario, "passed", &out);
    }
    assert!(
        runs.iter()
            .all(|r| r["verdict"] == "passed" || r["verdict"] == "not_applicable"),
        "{out}"
    );
}

#[cfg(unix)]
#[test]
fn an_interrupted_matrix_ends_every_system_under_test_it_started() {
    let dir = tempfile::tempdir().expect("dir");
    let pids = dir.path().join("pids");
    // Devices that never link and ignore SIGTERM, two at once.
    let stubborn = format!(
        "trap '' TERM; sleep 300 & echo $! >> {}; wait",
        pids.display()
    );
    let child = Command::new(HARNESS)
        .args([
            "run",
            "--exec",
            &stubborn,
            "--jobs",
            "2",
            "--protocols",
            "1,2",
            "--specs",
            "1.1.0",
        ])
        .arg("instance/negotiate.yaml")
        .current_dir(root())
        .env("NO_COLOR", "1")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("harness runs");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while std::fs::read_to_string(&pids)
        .unwrap_or_default()
        .lines()
        .count()
        < 2
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: kill(2) on the child we started.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    let out = child.wait_with_output().expect("it ends");
    assert_eq!(
        out.status.code(),
        Some(harness::Exit::Interrupted as i32),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_none_outlived(&pids);
}

#[cfg(unix)]
#[test]
fn the_lvmh_catalogues_run_against_a_spawned_plugin_and_a_spawned_daemon() {
    let dir = tempfile::tempdir().expect("dir");
    // A real daemon (fake-instance as a process of its own, its store in {tmp}): restarted by
    // `restart`, it must keep what it persisted.
    let daemon = exec_line(
        "fake-instance",
        "--family lvmh --listen 127.0.0.1:{port} --token {token} --state-dir {tmp}/state",
    );
    let (out, _, runs) = passing(
        dir.path(),
        "daemon.json",
        &["--exec", &daemon, "lvmh/device"],
    );
    for scenario in ["restart", "persist", "auth", "prompt", "live"] {
        assert_some_run(&runs, scenario, "passed", &out);
    }
    // Pointing the daemon at the fake GitLab is its test's set-up, not arranged here.
    assert_some_run(&runs, "gitlab", "not_applicable", &out);

    // A real plugin (fake-device as a process of its own): what only its own test can make it
    // do (a long tool, a burst) is not applicable, the rest passes.
    let plugin = exec_line(
        "fake-device",
        "--family lvmh --instance {url} --token {token}",
    );
    let (out, _, runs) = passing(
        dir.path(),
        "plugin.json",
        &["--exec", &plugin, "lvmh/instance"],
    );
    for (scenario, verdict) in [
        ("handshake", "passed"),
        ("turn", "passed"),
        // A reply slow enough for a drop to cut its run is the plugin's test's set-up (`reply`,
        // `deltas`, `pace`), not arranged here.
        ("replay", "not_applicable"),
        // A web UI's scenario: the plugin under test is none.
        ("web-reconnect", "not_applicable"),
        // Its restarts resuming the session is its test's set-up, not arranged here.
        ("resume", "not_applicable"),
        ("tool-preview", "not_applicable"),
        ("buffer-overflow", "not_applicable"),
    ] {
        assert_some_run(&runs, scenario, verdict, &out);
    }
}
