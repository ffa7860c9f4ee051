//! The suite judges peers built the ordinary way, on the official ACP SDKs, fairly: the whole
//! instance catalogue runs against a CLI on `@agentclientprotocol/sdk` (`stand-ins/cli-ts`), the
//! whole device catalogue against a web server on `agent-client-protocol`
//! (`stand-ins/server-py`), in every cell, and every run passes or is not applicable with its
//! reason. Each stand-in implements part of the spec and says only that (the CLI lists its
//! capabilities, the server maps only its hooks), so a failure here is the suite judging a
//! conforming peer wrongly.
//!
//! `stand-ins/setup.sh` builds them (Node.js with npm, Python 3 with venv); without those the
//! tests say so and pass, unless `LEMBAS_REQUIRE_STAND_INS` is set (CI sets it).

use std::collections::BTreeMap;
use std::process::Command;

mod common;

use common::{harness, root};

/// Builds the stand-ins; false (said on stderr) when the tools they need are missing.
fn set_up() -> bool {
    let built = Command::new(root().join("stand-ins/setup.sh"))
        .current_dir(root())
        .output()
        .expect("the set-up script runs");
    if built.status.code() == Some(3) {
        let why = String::from_utf8_lossy(&built.stderr);
        assert!(
            std::env::var_os("LEMBAS_REQUIRE_STAND_INS").is_none(),
            "LEMBAS_REQUIRE_STAND_INS is set, and the stand-ins cannot be built: {why}"
        );
        eprintln!("skipped: {why}");
        return false;
    }
    assert!(
        built.status.success(),
        "stand-ins/setup.sh failed:\n{}{}",
        String::from_utf8_lossy(&built.stdout),
        String::from_utf8_lossy(&built.stderr)
    );
    true
}

/// Runs `harness run` over a catalogue in every cell; the summary's runs, after checking each
/// passed or did not apply with its reason.
fn judge(catalogue: &str, exec: &str, hooks: Option<&str>) -> Vec<serde_json::Value> {
    let dir = tempfile::tempdir().expect("dir");
    let json = dir.path().join("run.json");
    let mut args = vec![
        "run".to_string(),
        "--exec".into(),
        exec.into(),
        "--protocols".into(),
        "1,2".into(),
        "--specs".into(),
        "1.0.0,1.1.0".into(),
        "--jobs".into(),
        "4".into(),
        "--report".into(),
        format!("json:{}", json.display()),
    ];
    if let Some(hooks) = hooks {
        args.extend(["--hooks".to_string(), hooks.to_string()]);
    }
    args.push(catalogue.into());
    let (code, text) = harness(&args);
    assert_eq!(code, 0, "{text}");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("the summary")).expect("json");
    let runs = summary["runs"].as_array().expect("runs").clone();
    for run in &runs {
        let verdict = run["verdict"].as_str().unwrap_or_default();
        assert!(
            verdict == "passed" || (verdict == "not_applicable" && run["why"].is_string()),
            "judged wrongly: {run}\n{text}"
        );
    }
    // The table, for whoever reads the log: each scenario's verdicts over the cells.
    let mut table: BTreeMap<String, BTreeMap<String, usize>> = BTreeMap::new();
    for run in &runs {
        let scenario = run["scenario"].as_str().unwrap_or_default().to_string();
        let verdict = run["verdict"].as_str().unwrap_or_default().to_string();
        *table
            .entry(scenario)
            .or_default()
            .entry(verdict)
            .or_default() += 1;
    }
    for (scenario, verdicts) in &table {
        println!("{scenario:28} {verdicts:?}");
    }
    runs
}

/// The scenarios that passed in at least one cell.
fn passed(runs: &[serde_json::Value]) -> Vec<&str> {
    let mut names: Vec<&str> = runs
        .iter()
        .filter(|r| r["verdict"] == "passed")
        .filter_map(|r| r["scenario"].as_str())
        .collect();
    names.sort_unstable();
    names.dedup();
    names
}

#[cfg(unix)]
#[test]
fn the_instance_catalogue_judges_a_cli_on_the_official_typescript_sdk_fairly() {
    if !set_up() {
        return;
    }
    let runs = judge(
        "instance",
        "exec node stand-ins/cli-ts/dist/main.js --url {url} --token {token} --root {root} --spec {spec}",
        None,
    );
    let scenarios = std::fs::read_dir(root().join("scenarios/instance"))
        .expect("the catalogue")
        .count();
    assert!(runs.len() > scenarios * 3, "{} runs", runs.len());
    // Judged, not only excused: what this CLI implements is checked and passes.
    let passed = passed(&runs);
    for scenario in [
        "negotiate",
        "session-new",
        "prompt-text",
        "model-turn",
        "turns",
        "status",
        "unknown-session",
        "session-model",
        "toolcall-index",
        "link-4400",
    ] {
        assert!(
            passed.contains(&scenario),
            "{scenario} never passed: {passed:?}"
        );
    }
}

#[cfg(unix)]
#[test]
fn the_device_catalogue_judges_a_web_server_on_the_official_python_sdk_fairly() {
    if !set_up() {
        return;
    }
    let runs = judge(
        "device",
        "cd stand-ins/server-py && exec ../../target/stand-ins/venv/bin/python -m lembas_stand_in --port {port} --token {token} --protocols {protocols} --state-dir {tmp}/state",
        Some("stand-ins/server-py/hooks.yaml"),
    );
    let passed = passed(&runs);
    for scenario in [
        "negotiate",
        "cards",
        "card-patient",
        "cancel",
        "context",
        "delete-chat",
        "deleted-chat",
        "deleted-unknown",
        "http-api",
        "personalization-forbidden",
        "reattach-done",
        "reattach-restart",
    ] {
        assert!(
            passed.contains(&scenario),
            "{scenario} never passed: {passed:?}"
        );
    }
}
