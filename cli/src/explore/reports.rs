//! The files an exploration writes for tools and people besides what it prints (`--report
//! FORMAT:PATH`, repeatable): JSON with the finding and its shrunk run, JUnit for a CI page, and
//! the HTML report with the shrunk run's sequence diagram. Nothing found is a report too: how
//! much ran, and which rules the model judged.

use std::path::{Path, PathBuf};

use serde_json::json;

use super::explored::{Explored, MODEL_RULES};
use crate::Error;

/// One report to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Report {
    /// The exploration and its finding as JSON.
    Json(PathBuf),
    /// JUnit XML: the shrunk run as a suite, or one passing case.
    Junit(PathBuf),
    /// The shrunk run as HTML, with its sequence diagram.
    Html(PathBuf),
}

/// A `--report` value: `json:PATH`, `junit:PATH` or `html:PATH`.
pub fn parse(text: &str) -> Result<Report, String> {
    match text.split_once(':') {
        Some(("json", path)) if !path.is_empty() => Ok(Report::Json(path.into())),
        Some(("junit", path)) if !path.is_empty() => Ok(Report::Junit(path.into())),
        Some(("html", path)) if !path.is_empty() => Ok(Report::Html(path.into())),
        _ => Err(format!(
            "`{text}` is not a report: say json:PATH, junit:PATH or html:PATH"
        )),
    }
}

/// What the reports say of the exploration besides what it came to.
#[derive(Debug, Clone, Copy)]
pub struct About<'a> {
    /// The seed its sequences were drawn from.
    pub seed: u64,
    /// The cell they ran in (`protocol 2 · spec 1.1.0`).
    pub cell: &'a str,
    /// Where the finding's scenario was written.
    pub written: Option<&'a Path>,
}

/// Writes each report.
pub fn write(reports: &[Report], about: About<'_>, explored: &Explored) -> Result<(), Error> {
    for report in reports {
        let (path, text) = match report {
            Report::Json(path) => (path, json_of(about, explored)),
            Report::Junit(path) => (path, junit_of(about, explored)),
            Report::Html(path) => (path, html_of(about, explored)),
        };
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|source| Error::Write {
                path: path.clone(),
                source,
            })?;
        }
        std::fs::write(path, text).map_err(|source| Error::Write {
            path: path.clone(),
            source,
        })?;
    }
    Ok(())
}

fn json_of(about: About<'_>, explored: &Explored) -> String {
    let found = explored.found.as_ref().map(|found| {
        let run: serde_json::Value = serde_json::from_str(&harness::report::json::render(
            "fake-instance",
            &found.outcome,
            &found.recent,
        ))
        .unwrap_or(serde_json::Value::Null);
        json!({
            "rule": found.rule,
            "found_after_s": found.found_after.as_secs_f64(),
            "moves_before": found.moves_before,
            "moves_after": found.moves_after,
            "shrinking_runs": found.shrinking_runs,
            "shrinking_cut_short": found.shrinking_cut_short,
            "scenario_path": about.written.map(|p| p.display().to_string()),
            "scenario": found.scenario,
            "run": run,
        })
    });
    let value = json!({
        "seed": about.seed,
        "cell": about.cell,
        "sequences": explored.sequences,
        "moves": explored.moves,
        "not_applicable": explored.not_applicable,
        "elapsed_s": explored.elapsed.as_secs_f64(),
        "model_rules": MODEL_RULES,
        "found": found,
    });
    serde_json::to_string_pretty(&value).unwrap_or_default()
}

fn junit_of(about: About<'_>, explored: &Explored) -> String {
    match &explored.found {
        Some(found) => harness::report::junit::render("fake-instance", &found.outcome),
        None => harness::report::junit::render_passed(
            "harness explore",
            &format!("explore seed {} [{}]", about.seed, about.cell),
            "nothing found",
            &nothing_found(explored),
        ),
    }
}

fn html_of(about: About<'_>, explored: &Explored) -> String {
    match &explored.found {
        Some(found) => {
            harness::report::html::render("fake-instance", &found.outcome, &found.recent)
        }
        None => harness::report::html::render_many(
            &format!(
                "harness explore, seed {} [{}]: {}",
                about.seed,
                about.cell,
                nothing_found(explored)
            ),
            &[],
        ),
    }
}

fn nothing_found(explored: &Explored) -> String {
    format!(
        "nothing found in {} sequences ({} moves, {} not applicable) in {:.1}s; the model judged {}",
        explored.sequences,
        explored.moves,
        explored.not_applicable,
        explored.elapsed.as_secs_f64(),
        MODEL_RULES.join(", ")
    )
}
