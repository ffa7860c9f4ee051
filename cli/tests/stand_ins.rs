//! The suite judges peers built the ordinary way, on the official ACP SDKs, fairly: the whole
//! instance catalogue runs against a CLI on `@agentclientprotocol/sdk` (`stand-ins/cli-ts`), the
//! whole device catalogue against a web server on `agent-client-protocol`
//! (`stand-ins/server-py`), in every cell, and every run passes or is not applicable with its
//! reason. Each stand-in implements part of the spec and says only that (the CLI lists its
//! capabilities, the server maps only its hooks), so a failure here is the suite judging a
//! conforming peer wrongly.
//!
//! The CLI's catalogue runs as the README's quick start writes it, with the stand-in in the place
//! of `lembas`: the front page's command is the one CI runs.
//!
//! `stand-ins/setup.sh` builds them (Node.js with npm, Python 3 with venv); without those the
//! tests say so and pass, unless `LEMBAS_REQUIRE_STAND_INS` is set (CI sets it).

use std::collections::BTreeMap;
use std::process::Command;

mod common;

use common::{harness, readme_block, root};

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
    judged(code, &text, &json)
}

/// The README's command for a CLI's CI (the block marked as run here), run by `sh` as a user
/// runs it, in a folder of its own, with `harness` and a `lembas` on the PATH: the stand-in CLI
/// on the TypeScript SDK, which takes the command line the README gives a CLI.
fn judge_as_the_readme_says() -> Vec<serde_json::Value> {
    let readme = std::fs::read_to_string(root().join("README.md")).expect("README.md");
    let command = readme_block(&readme, "run by cli/tests/stand_ins.rs");
    let dir = tempfile::tempdir().expect("dir");
    let bin = dir.path().join("bin");
    std::fs::create_dir_all(&bin).expect("made");
    let cli = root().join("stand-ins/cli-ts/dist/main.js");
    let lembas = bin.join("lembas");
    std::fs::write(
        &lembas,
        format!("#!/bin/sh\nexec node '{}' \"$@\"\n", cli.display()),
    )
    .expect("written");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&lembas, std::fs::Permissions::from_mode(0o755))
        .expect("made runnable");
    let harness_dir = std::path::Path::new(common::HARNESS)
        .parent()
        .expect("a folder");
    let path = format!(
        "{}:{}:{}",
        harness_dir.display(),
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new("sh")
        .args(["-c", &command])
        .current_dir(dir.path())
        .env("PATH", path)
        .env("NO_COLOR", "1")
        .output()
        .expect("sh runs");
    let text = format!(
        "{command}\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let json = dir.path().join("reports/link.json");
    assert!(
        json.exists(),
        "the README's command writes no reports/link.json:\n{text}"
    );
    assert!(
        dir.path()
            .join("reports")
            .read_dir()
            .expect("reports")
            .any(|e| e
                .expect("an entry")
                .path()
                .extension()
                .is_some_and(|x| x == "xml")),
        "the README's command writes no JUnit file:\n{text}"
    );
    judged(out.status.code().unwrap_or(-1), &text, &json)
}

/// Every run of a summary, after checking the matrix passed and each run passed or did not
/// apply with its reason; prints each scenario's verdicts for whoever reads the log.
fn judged(code: i32, text: &str, json: &std::path::Path) -> Vec<serde_json::Value> {
    assert_eq!(code, 0, "{text}");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(json).expect("the summary")).expect("json");
    let runs = summary["runs"].as_array().expect("runs").clone();
    for run in &runs {
        let verdict = run["verdict"].as_str().unwrap_or_default();
        assert!(
            verdict == "passed" || (verdict == "not_applicable" && run["why"].is_string()),
            "judged wrongly: {run}\n{text}"
        );
    }
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
    let runs = judge_as_the_readme_says();
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
