//! `harness explore instance` against fake-device as the CLI under test: a well-behaved one
//! gives no finding in a short budget; one that runs a repeated turn id again, or refuses a
//! prompt that waits behind another, is found, shrunk, and written as a scenario that
//! `harness run` replays, failing on the same rule; the same seed finds the same rule.

use std::path::{Path, PathBuf};

mod common;

use common::{fake_device, harness};

/// fake-device as the CLI under test, breaking `misbehave` when given.
fn device(misbehave: Option<&str>) -> String {
    format!(
        "exec {} --instance {{url}} --token {{token}} --root {{root}} --state-dir {{tmp}}/state --spec {{spec}}{}",
        fake_device().display(),
        misbehave
            .map(|m| format!(" --misbehave {m}"))
            .unwrap_or_default()
    )
}

/// Explores `exec` for at most `runs` sequences from `seed`, writing findings to `out`.
fn explore(exec: &str, runs: &str, seed: &str, out: &Path) -> (i32, String) {
    explore_with(exec, runs, seed, out, &[])
}

/// [`explore`] with more flags.
fn explore_with(exec: &str, runs: &str, seed: &str, out: &Path, more: &[&str]) -> (i32, String) {
    let out = out.display().to_string();
    let mut args = vec![
        "explore", "instance", "--exec", exec, "--runs", runs, "--time", "120s", "--seed", seed,
        "--out", &out,
    ];
    args.extend_from_slice(more);
    harness(&args)
}

/// The one scenario a finding wrote.
fn written(out: &Path) -> PathBuf {
    let mut files: Vec<PathBuf> = std::fs::read_dir(out.join("instance"))
        .expect("a findings folder")
        .map(|e| e.expect("an entry").path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    files.remove(0)
}

#[test]
fn a_well_behaved_cli_gives_no_finding() {
    let out = tempfile::tempdir().expect("a folder");
    let json = out.path().join("reports/explore.json");
    let json_arg = format!("json:{}", json.display());
    let (code, said) = explore_with(
        &device(None),
        "6",
        "1",
        out.path(),
        &["--report", &json_arg],
    );
    assert_eq!(code, 0, "{said}");
    assert!(said.contains("nothing found in 6 sequences"), "{said}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("a JSON report"))
            .expect("JSON");
    assert_eq!(report["sequences"], 6, "{report}");
    assert!(report["found"].is_null(), "{report}");
    assert!(
        said.contains("device.turns.dedup"),
        "the model's rules are named: {said}"
    );
    assert!(!out.path().exists() || written_none(out.path()), "{said}");
}

fn written_none(out: &Path) -> bool {
    std::fs::read_dir(out.join("instance")).map_or(true, |mut d| d.next().is_none())
}

#[test]
fn a_turn_id_run_twice_is_found_shrunk_and_replayed_on_the_same_rule() {
    let exec = device(Some("device.turns.dedup"));
    let first = tempfile::tempdir().expect("a folder");
    let reports = tempfile::tempdir().expect("a folder");
    let [json, junit, html] =
        ["explore.json", "explore.xml", "explore.html"].map(|f| reports.path().join(f));
    let flags = [
        format!("json:{}", json.display()),
        format!("junit:{}", junit.display()),
        format!("html:{}", html.display()),
    ];
    let (code, said) = explore_with(
        &exec,
        "20",
        "1",
        first.path(),
        &[
            "--report", &flags[0], "--report", &flags[1], "--report", &flags[2],
        ],
    );
    assert_eq!(code, 1, "{said}");
    assert!(said.contains("broken by a sequence of"), "{said}");
    let scenario = written(first.path());
    // The reports: the finding with its shrunk run, for tools, a CI page and a person.
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("a JSON report"))
            .expect("JSON");
    // A device that forgets the turn ids it ran breaks dedup; where the turn it runs again
    // had finished on an earlier link, the model names the rule for turns kept across links.
    let rule = report["found"]["rule"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        ["device.turns.dedup", "device.turns.persist"].contains(&rule.as_str()),
        "{report}"
    );
    assert_eq!(report["found"]["run"]["verdict"], "failed", "{report}");
    assert_eq!(
        report["found"]["scenario_path"],
        scenario.display().to_string(),
        "{report}"
    );
    let xml = std::fs::read_to_string(&junit).expect("a JUnit report");
    assert!(xml.contains("<failure") && xml.contains(&rule), "{xml}");
    let page = std::fs::read_to_string(&html).expect("an HTML report");
    assert!(
        page.contains(&rule) && page.contains("<svg"),
        "the sequence diagram"
    );
    let text = std::fs::read_to_string(&scenario).expect("readable");
    assert!(text.contains(&rule), "{text}");
    // Shrunk: a session, the prompt, and the prompt again.
    let prompts = text.matches("method: session/prompt").count();
    assert_eq!(prompts, 2, "{text}");

    let (replayed, report) = harness(&[
        "run",
        &scenario.display().to_string(),
        "--exec",
        &exec,
        "--protocols",
        "2",
        "--specs",
        "1.1.0",
        "--quiet",
    ]);
    assert_eq!(replayed, 1, "{report}");
    assert!(report.contains(&format!("FAILED: {rule}")), "{report}");

    // The same seed finds the same rule.
    let second = tempfile::tempdir().expect("a folder");
    let (again, said_again) = explore(&exec, "20", "1", second.path());
    assert_eq!(again, 1, "{said_again}");
    assert_eq!(
        written(second.path()).file_name(),
        scenario.file_name(),
        "{said_again}"
    );
}

#[test]
fn a_prompt_refused_behind_a_running_turn_is_found_on_the_queue_rule() {
    let out = tempfile::tempdir().expect("a folder");
    let (code, said) = explore(&device(Some("device.prompt.queued")), "40", "1", out.path());
    assert_eq!(code, 1, "{said}");
    assert!(said.contains("device.prompt.queued broken by"), "{said}");
}

/// Each check a sequence writes beyond the monitors fails a device that breaks its rule: a title
/// taken late, a deleted session still there, history without turn ids, answers of the wrong
/// shape to steer, title, rewind and configure. Found from seed 1 within 100 sequences (most
/// within 20), each shrunk to a few moves.
#[test]
fn each_check_a_sequence_writes_fails_a_device_that_breaks_its_rule() {
    let rules = [
        "device.title.applies",
        "device.title.result",
        "device.delete.gone",
        "device.history.turn_id",
        "device.steer.result",
        "device.rewind.result",
        "device.configure.result",
    ];
    let found: Vec<(String, i32, String)> = std::thread::scope(|scope| {
        let runs: Vec<_> = rules
            .iter()
            .map(|rule| {
                scope.spawn(move || {
                    let out = tempfile::tempdir().expect("a folder");
                    let (code, said) = explore(&device(Some(rule)), "100", "1", out.path());
                    (rule.to_string(), code, said)
                })
            })
            .collect();
        runs.into_iter()
            .map(|run| run.join().expect("explored"))
            .collect()
    });
    for (rule, code, said) in found {
        assert_eq!(code, 1, "{rule}: {said}");
        assert!(
            said.contains(&format!("{rule} broken by")),
            "{rule}: {said}"
        );
    }
}

#[test]
fn a_bad_budget_or_side_is_a_usage_error() {
    let (code, said) = harness(&["explore", "server", "--exec", "true"]);
    assert_eq!(code, 2, "{said}");
    let (code, said) = harness(&["explore", "instance", "--exec", "true", "--time", "soon"]);
    assert_eq!(code, 2, "{said}");
    assert!(said.contains("not a duration"), "{said}");
}

/// What explore found in fake-device itself, kept as explore advises: after a dropped link, the
/// answers to the old link's prompts went out on the new link under the old ids, so a prompt
/// sent again got another turn's answer. The scenario failed on `device.prompt.turn_id` before
/// the fix (answers go on the link their request came on) and passes since.
#[test]
fn a_finding_kept_as_a_scenario_guards_its_fix() {
    let scenario = common::root().join("cli/tests/data/instance/relink-answers.yaml");
    let (code, said) = harness(&[
        "run",
        &scenario.display().to_string(),
        "--exec",
        &device(None),
        "--protocols",
        "2",
        "--specs",
        "1.1.0",
        "--quiet",
    ]);
    assert_eq!(code, 0, "{said}");
}

/// The model of a device's turns runs on every link, so a scenario that checks nothing of a
/// prompt's answer still fails a device that answers with a stop reason the spec lacks.
#[test]
fn the_turn_model_judges_an_answer_no_step_checks() {
    let dir = tempfile::tempdir().expect("a folder");
    let folder = dir.path().join("instance");
    std::fs::create_dir_all(&folder).expect("a folder");
    let scenario = folder.join("any-answer.yaml");
    std::fs::write(
        &scenario,
        r#"name: any-answer
about: A prompt whose answer no step checks.
rules: [device.prompt.answer]
steps:
  - expect_link: { within: 30s, rule: device.link.dial }
  - expect: { method: _lembas/hello, capture: { hello: params }, rule: device.hello.first }
  - request: { method: session/new, params: { cwd: "${hello.limits.roots[0]}", mcpServers: [] }, capture: { sid: result.sessionId } }
  - request: { method: session/prompt, params: { sessionId: "${sid}", prompt: [{ type: text, text: "say hello" }] } }
"#,
    )
    .expect("written");
    let run = |misbehave: Option<&str>| {
        harness(&[
            "run",
            &scenario.display().to_string(),
            "--exec",
            &device(misbehave),
            "--protocols",
            "2",
            "--specs",
            "1.1.0",
            "--quiet",
        ])
    };
    let (code, said) = run(None);
    assert_eq!(code, 0, "{said}");
    let (code, said) = run(Some("device.prompt.answer"));
    assert_eq!(code, 1, "{said}");
    assert!(said.contains("FAILED: device.prompt.answer"), "{said}");
}
