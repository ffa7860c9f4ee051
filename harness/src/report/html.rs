//! The run as one self-contained HTML page, for people: its verdict, its steps with their times,
//! and a sequence diagram of the link. The page needs no network: its style, its script and its
//! data are inline, and the diagram is drawn here (in `diagram`), as SVG, so it shows with
//! scripts off too.
//!
//! The diagram has a lane for the double, one for the system under test and, when the run saw
//! any, one for the HTTP side (link 0). Time runs downwards, a row a message. Each message is an
//! arrow labelled with its method; an answer is a dashed arrow back, joined to its request by a
//! bar on the answering lane; an error is red. A close shows its code, a new link starts a
//! segment, and the failing step is marked where it ended, with its diff beside the diagram.
//! Clicking an arrow shows its JSON.

mod diagram;
pub(crate) mod escape;
mod run_page;

use std::fmt::Write as _;

use serde_json::Value;

use crate::engine::{RunOutcome, StepStatus, Verdict};
use crate::journal::Entry;
use diagram::diagram;
use escape::esc;
pub use run_page::RunPage;

/// One run's page.
pub fn render(double: &str, outcome: &RunOutcome, recent: &[Entry]) -> String {
    let label = outcome.scenario.clone();
    render_many(
        &format!("{double} · {} · {}", outcome.scenario, outcome.cell),
        &[RunPage {
            double,
            label: &label,
            outcome,
            entries: recent,
        }],
    )
}

/// Several runs on one page (`harness run`, `harness selftest`): a table of run × cell (a row a
/// label: the scenario's file, or in the self-test the scenario and its peer) linking to each
/// run, then the runs.
pub fn render_many(title: &str, runs: &[RunPage<'_>]) -> String {
    let mut body = String::new();
    let _ = writeln!(body, "<h1>{}</h1>", esc(title));
    if runs.len() > 1 {
        matrix(&mut body, runs);
    }
    let mut messages: Vec<Value> = Vec::new();
    for (i, run) in runs.iter().enumerate() {
        section(&mut body, i, run, &mut messages);
    }
    // The messages' JSON, for the panel a click opens. `<` is escaped so no text in a message
    // can close the script element.
    let data = serde_json::to_string(&messages)
        .unwrap_or_else(|_| "[]".into())
        .replace('<', "\\u003c");
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title><style>{STYLE}</style></head>\n<body>\n{body}<script type=\"application/json\" id=\"messages\">{data}</script>\n<script>{SCRIPT}</script>\n</body></html>\n",
        esc(title)
    )
}

/// The table of scenario × cell, each a link to its run.
fn matrix(out: &mut String, runs: &[RunPage<'_>]) {
    let mut cells: Vec<String> = Vec::new();
    let mut scenarios: Vec<String> = Vec::new();
    for run in runs {
        let cell = run.outcome.cell.to_string();
        if !cells.contains(&cell) {
            cells.push(cell);
        }
        if !scenarios.iter().any(|s| s == run.label) {
            scenarios.push(run.label.to_string());
        }
    }
    let _ = write!(out, "<table class=\"matrix\"><tr><th>scenario</th>");
    for cell in &cells {
        let _ = write!(out, "<th>{}</th>", esc(cell));
    }
    let _ = writeln!(out, "</tr>");
    for scenario in &scenarios {
        let _ = write!(out, "<tr><td>{}</td>", esc(scenario));
        for cell in &cells {
            let found = runs
                .iter()
                .enumerate()
                .find(|(_, r)| r.label == scenario && r.outcome.cell.to_string() == *cell);
            match found {
                Some((i, run)) => {
                    let (class, word) = verdict_word(&run.outcome.verdict());
                    let _ = write!(
                        out,
                        "<td class=\"{class}\"><a href=\"#run-{i}\">{word}</a></td>"
                    );
                }
                None => {
                    let _ = write!(out, "<td></td>");
                }
            }
        }
        let _ = writeln!(out, "</tr>");
    }
    let _ = writeln!(out, "</table>");
}

fn verdict_word(verdict: &Verdict) -> (&'static str, &'static str) {
    match verdict {
        Verdict::Passed => ("passed", "passed"),
        Verdict::NotApplicable(_) => ("na", "not applicable"),
        Verdict::Failed => ("failed", "FAILED"),
        Verdict::ScenarioError => ("failed", "SCENARIO ERROR"),
    }
}

/// One run: its verdict, its steps, its diagram and the failing step's diff.
fn section(out: &mut String, i: usize, run: &RunPage<'_>, messages: &mut Vec<Value>) {
    let outcome = run.outcome;
    let verdict = outcome.verdict();
    let (class, word) = verdict_word(&verdict);
    let why = match &verdict {
        Verdict::NotApplicable(why) => format!(": {why}"),
        Verdict::Failed if !outcome.broken_rules().is_empty() => {
            format!(": the peer broke {}", outcome.broken_rules().join(", "))
        }
        _ => String::new(),
    };
    let _ = writeln!(
        out,
        "<section class=\"run\" id=\"run-{i}\"><h2>{} <small>{} · {} · {:.0} ms</small></h2>",
        esc(&outcome.scenario),
        esc(run.double),
        esc(&outcome.cell.to_string()),
        outcome.elapsed_ms
    );
    let _ = writeln!(
        out,
        "<p class=\"verdict {class}\" data-verdict=\"{class}\">{word}{}</p>",
        esc(&why)
    );
    let _ = writeln!(out, "<p class=\"source\">{}</p>", esc(run.label));
    steps(out, outcome);
    let failing = outcome
        .steps
        .iter()
        .find(|s| matches!(s.status, StepStatus::Failed | StepStatus::Error));
    let _ = writeln!(out, "<div class=\"pair\">");
    diagram(out, run, failing, messages);
    let _ = writeln!(out, "<div class=\"beside\">");
    if let Some(step) = failing {
        let text = step
            .failure
            .as_ref()
            .map(super::human::failure_text)
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "<div class=\"diff\"><h3>step {} failed: {}</h3><pre>{}</pre></div>",
            esc(&step.index),
            esc(&step.title),
            esc(&text)
        );
    }
    for finding in &outcome.findings {
        let _ = writeln!(
            out,
            "<div class=\"diff\"><h3>monitor</h3><pre>{}</pre></div>",
            esc(&finding.to_string())
        );
    }
    let _ = writeln!(
        out,
        "<div class=\"json\"><h3>message</h3><pre class=\"shown\">click an arrow</pre></div></div></div>"
    );
    if let Some(process) = &outcome.process {
        let _ = writeln!(
            out,
            "<details><summary>system under test: {}</summary><pre>",
            esc(&process.command)
        );
        for line in &process.output {
            let _ = writeln!(
                out,
                "{:>9.1} ms {} {}",
                line.at_ms,
                line.stream,
                esc(&line.text)
            );
        }
        let _ = writeln!(out, "</pre></details>");
    }
    rules(out, outcome);
    if !outcome.hooks.is_empty() {
        let _ = writeln!(out, "<details><summary>hooks</summary><pre>");
        for hook in &outcome.hooks {
            let _ = writeln!(out, "{}\n  {}", esc(&hook.to_string()), esc(&hook.output));
        }
        let _ = writeln!(out, "</pre></details>");
    }
    let _ = writeln!(out, "</section>");
}

/// Which rules the run judged: the count, then each rule with what came of it, and why a rule
/// was not judged.
fn rules(out: &mut String, outcome: &RunOutcome) {
    let judgements = outcome.judgements();
    if judgements.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "<details class=\"rules\"><summary>{}</summary><table class=\"steps\">\
         <tr><th>rule</th><th>verdict</th><th>why</th></tr>",
        esc(&crate::engine::judged::summary(&judgements))
    );
    for j in &judgements {
        let (class, word) = match j.judged {
            crate::engine::Judged::Kept => ("passed", "kept"),
            crate::engine::Judged::Broken => ("failed", "BROKEN"),
            crate::engine::Judged::NotJudged => ("na", "not judged"),
        };
        let _ = writeln!(
            out,
            "<tr class=\"step {class}\"><td>{}</td><td>{word}</td><td>{}</td></tr>",
            esc(&j.rule),
            esc(j.why.as_deref().unwrap_or(""))
        );
    }
    let _ = writeln!(out, "</table></details>");
}

fn steps(out: &mut String, outcome: &RunOutcome) {
    let _ = writeln!(
        out,
        "<table class=\"steps\"><tr><th>step</th><th>what</th><th>line</th><th>ms</th><th>verdict</th></tr>"
    );
    for step in &outcome.steps {
        let (class, word) = match step.status {
            StepStatus::Passed => ("passed", "ok"),
            StepStatus::Failed => ("failed", "FAILED"),
            StepStatus::Error => ("failed", "ERROR"),
            StepStatus::Skipped => ("skipped", "skipped"),
            StepStatus::NotApplicable => ("na", "not applicable"),
        };
        let note = step
            .not_applicable
            .as_ref()
            .map(|why| format!(": {why}"))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "<tr class=\"step {class}\"><td>{}</td><td>{}</td><td>{}</td><td>{:.1}</td><td>{word}{}</td></tr>",
            esc(&step.index),
            esc(&step.title),
            step.line,
            step.elapsed_ms,
            esc(&note)
        );
    }
    let _ = writeln!(out, "</table>");
}

const STYLE: &str = r#"
body { font: 14px/1.4 system-ui, sans-serif; margin: 24px; color: #1d2330; }
h1 { font-size: 20px; } h2 { font-size: 17px; margin-top: 32px; } h2 small { color: #667; font-weight: normal; }
h3 { font-size: 13px; margin: 0 0 6px; }
table { border-collapse: collapse; margin: 8px 0; }
td, th { border: 1px solid #d8dbe2; padding: 3px 8px; text-align: left; font-size: 13px; }
.passed { color: #146c2e; } .failed { color: #b3261e; font-weight: 600; } .na { color: #6b6f78; } .skipped { color: #9aa0aa; }
td.passed { background: #e7f5ea; } td.failed { background: #fbe9e7; } td.na { background: #f1f2f4; }
.verdict { font-size: 16px; }
.source { color: #667; font-size: 12px; }
.pair { display: flex; gap: 16px; align-items: flex-start; }
.beside { min-width: 320px; max-width: 560px; position: sticky; top: 8px; }
.beside pre { white-space: pre-wrap; word-break: break-word; background: #f6f7f9; padding: 8px; font-size: 12px; max-height: 420px; overflow: auto; }
.diff pre { background: #fff4f2; }
svg.sequence { font: 12px ui-monospace, monospace; background: #fff; border: 1px solid #e3e5ea; }
.lane { stroke: #9aa0aa; stroke-dasharray: 2 3; } .lane-name { font-weight: 600; }
.arrow line { stroke: #2d5fd3; stroke-width: 1.4; } .arrow text.label { fill: #1d2330; }
.arrow.answer line { stroke: #7a8aa8; stroke-dasharray: 5 3; }
.arrow.error line { stroke: #b3261e; } .arrow.error text.label { fill: #b3261e; font-weight: 600; }
.arrow { cursor: pointer; } .arrow:hover line { stroke-width: 3; } .arrow.selected line { stroke: #e07b00; stroke-width: 3; }
.time { fill: #8a8f99; font-size: 10px; }
.activation { fill: #dfe6f6; stroke: #9fb0d8; }
.segment line { stroke: #146c2e; stroke-dasharray: 6 4; } .segment text { fill: #146c2e; }
.close line { stroke: #b3261e; stroke-width: 2; } .close text { fill: #b3261e; }
.failing rect { fill: #fbe9e7; stroke: #b3261e; } .failing text { fill: #b3261e; font-weight: 700; }
"#;

const SCRIPT: &str = r#"
(function () {
  var messages = JSON.parse(document.getElementById('messages').textContent);
  document.querySelectorAll('section.run').forEach(function (run) {
    var shown = run.querySelector('.json pre');
    run.querySelectorAll('g.arrow').forEach(function (arrow) {
      arrow.addEventListener('click', function () {
        run.querySelectorAll('g.arrow.selected').forEach(function (g) { g.classList.remove('selected'); });
        arrow.classList.add('selected');
        shown.textContent = JSON.stringify(messages[Number(arrow.dataset.message)], null, 2);
      });
    });
  });
  document.body.dataset.ready = String(document.querySelectorAll('g.arrow').length);
})();
"#;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{Cell, Failure, StepVerdict};
    use crate::journal::Direction;
    use serde_json::json;

    fn entry(t_ms: f64, link: u32, dir: Direction, msg: Value) -> Entry {
        Entry {
            seq: 0,
            t_ms,
            link,
            dir,
            msg,
        }
    }

    fn failed_run() -> (RunOutcome, Vec<Entry>) {
        let step = |index: &str, status, failure| StepVerdict {
            index: index.into(),
            line: 5,
            title: "expect initialize".into(),
            status,
            elapsed_ms: 2.0,
            started_ms: 10.0,
            failure,
            not_applicable: None,
            rule: None,
        };
        let outcome = RunOutcome {
            scenario: "negotiate".into(),
            cell: Cell::lembas(1, crate::lembas::Spec::V1_1_0),
            steps: vec![
                step("1", StepStatus::Passed, None),
                step(
                    "2",
                    StepStatus::Failed,
                    Some(Failure {
                        rule: Some("instance.link.close_4400".into()),
                        summary: "closed with 1000, not 4400 <b>".into(),
                        ..Failure::default()
                    }),
                ),
            ],
            findings: Vec::new(),
            not_applicable: None,
            elapsed_ms: 20.0,
            process: None,
            hooks: Vec::new(),
            listed_rules: Vec::new(),
        };
        let entries = vec![
            entry(1.0, 1, Direction::Event, json!({ "event": "open" })),
            entry(
                2.0,
                1,
                Direction::In,
                json!({ "jsonrpc": "2.0", "method": "_lembas/hello", "params": { "protocol": 2 } }),
            ),
            entry(
                3.0,
                1,
                Direction::Out,
                json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {} }),
            ),
            entry(
                4.0,
                1,
                Direction::In,
                json!({ "jsonrpc": "2.0", "id": 1, "error": { "code": -32600, "message": "</script><script>alert(1)</script>" } }),
            ),
            entry(
                5.0,
                0,
                Direction::In,
                json!({ "method": "http/chat", "params": {} }),
            ),
            entry(
                30.0,
                1,
                Direction::Event,
                json!({ "event": "closed", "code": 1000, "reason": "bye" }),
            ),
            entry(31.0, 2, Direction::Event, json!({ "event": "open" })),
        ];
        (outcome, entries)
    }

    #[test]
    fn a_failing_run_shows_its_verdict_arrows_answers_errors_closes_and_the_failing_mark() {
        let (outcome, entries) = failed_run();
        let page = render("fake-instance", &outcome, &entries);
        assert!(page.contains("data-verdict=\"failed\""), "{page}");
        assert!(page.contains("the peer broke instance.link.close_4400"));
        assert_eq!(page.matches("<g class=\"arrow").count(), 4);
        assert!(
            page.contains("<g class=\"arrow answer error\""),
            "an error answer is red"
        );
        assert!(
            page.contains("↩ initialize"),
            "the answer names its request"
        );
        assert!(
            page.contains("class=\"activation\""),
            "joined to its request"
        );
        assert!(
            page.contains("HTTP (the device&#39;s requests)"),
            "an HTTP lane"
        );
        assert!(page.contains("link 1 closed by peer: 1000 bye"));
        assert!(page.contains("redial: link 2 opens"));
        assert!(page.contains("<g class=\"failing\""));
        assert!(page.contains("✗ step 2 failed here"));
        // The failing mark sits after the messages before the step ended (12 ms), before the
        // close at 30 ms.
        let mark = page.find("class=\"failing\"").expect("mark");
        assert!(
            mark > page.find("http/chat").expect("http")
                && mark < page.find("closed by").expect("close")
        );
        assert!(
            page.contains("closed with 1000, not 4400 &lt;b&gt;"),
            "text is escaped"
        );
        assert!(
            !page.contains("</script><script>alert"),
            "no message can end the script"
        );
        for fetch in ["src=", "<link", "href=\"http", "url(http", "@import"] {
            assert!(!page.contains(fetch), "nothing is fetched: {fetch}");
        }
    }

    #[test]
    fn a_huge_message_is_cut_in_the_page() {
        let (outcome, mut entries) = failed_run();
        entries.push(entry(
            6.0,
            1,
            Direction::Out,
            json!({ "method": "session/prompt", "params": { "data": "x".repeat(1 << 20) } }),
        ));
        let page = render("fake-instance", &outcome, &entries);
        assert!(page.len() < 100_000, "{} bytes", page.len());
        assert!(page.contains("(1048576 bytes in all)"));
    }

    #[test]
    fn many_runs_get_a_table_of_scenario_by_cell_linking_to_each() {
        let (failed, entries) = failed_run();
        let mut passed = failed.clone();
        passed.cell = Cell::lembas(2, passed.cell.lembas_spec());
        passed.steps.truncate(1);
        let page = render_many(
            "harness run",
            &[
                RunPage {
                    double: "fake-instance",
                    label: "a",
                    outcome: &failed,
                    entries: &entries,
                },
                RunPage {
                    double: "fake-instance",
                    label: "b",
                    outcome: &passed,
                    entries: &[],
                },
            ],
        );
        assert!(page.contains("<table class=\"matrix\">"));
        assert!(
            page.contains("<td class=\"failed\"><a href=\"#run-0\">FAILED</a></td>"),
            "{page}"
        );
        assert!(
            page.contains("<td class=\"passed\"><a href=\"#run-1\">passed</a></td>"),
            "{page}"
        );
        assert!(page.contains("id=\"run-1\""));
    }
}
