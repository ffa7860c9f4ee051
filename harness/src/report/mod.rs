//! Reports of a run: for a person (`human`), for CI (`junit`), for tools (`json`).

pub mod html;
pub mod human;
pub mod json;
#[cfg(feature = "cli")]
pub mod junit;
mod run_report;

pub use run_report::RunReport;

#[cfg(feature = "cli")]
use std::path::PathBuf;

#[cfg(feature = "cli")]
use crate::engine::RunOutcome;
#[cfg(feature = "cli")]
use crate::journal::Entry;

/// A report a run should write, from `--report KIND:PATH`.
#[cfg(feature = "cli")]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReportTarget {
    /// JUnit XML.
    Junit(PathBuf),
    /// The outcome as JSON.
    Json(PathBuf),
    /// One self-contained HTML page with a sequence diagram.
    Html(PathBuf),
}

#[cfg(feature = "cli")]
impl std::str::FromStr for ReportTarget {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.split_once(':') {
            Some(("junit", path)) if !path.is_empty() => Ok(ReportTarget::Junit(path.into())),
            Some(("json", path)) if !path.is_empty() => Ok(ReportTarget::Json(path.into())),
            Some(("html", path)) if !path.is_empty() => Ok(ReportTarget::Html(path.into())),
            _ => Err(format!(
                "`{s}` is not KIND:PATH with KIND junit, json or html (e.g. junit:report.xml)"
            )),
        }
    }
}

/// Writes every requested report.
#[cfg(feature = "cli")]
pub fn write_all(
    targets: &[ReportTarget],
    double: &str,
    outcome: &RunOutcome,
    recent: &[Entry],
) -> std::io::Result<()> {
    for target in targets {
        match target {
            ReportTarget::Junit(path) => std::fs::write(path, junit::render(double, outcome))?,
            ReportTarget::Json(path) => {
                std::fs::write(path, json::render(double, outcome, recent))?
            }
            ReportTarget::Html(path) => {
                std::fs::write(path, html::render(double, outcome, recent))?
            }
        }
    }
    Ok(())
}

#[cfg(all(test, feature = "cli"))]
mod tests {
    use crate::engine::{Cell, RunOutcome, StepStatus, StepVerdict};

    fn not_applicable() -> RunOutcome {
        let step = |index: &str, status, not_applicable: Option<&str>| StepVerdict {
            index: index.into(),
            line: 3,
            title: "request _lembas/files/search".into(),
            status,
            elapsed_ms: 1.0,
            started_ms: 0.0,
            failure: None,
            not_applicable: not_applicable.map(String::from),
            rule: Some(format!("device.rule.{index}")),
        };
        RunOutcome {
            scenario: "files-search".into(),
            cell: Cell::lembas(2, crate::lembas::Spec::V1_1_0),
            steps: vec![
                step("1", StepStatus::Passed, None),
                step(
                    "2",
                    StepStatus::NotApplicable,
                    Some("the device did not list `files`"),
                ),
                step("3", StepStatus::Skipped, None),
            ],
            findings: Vec::new(),
            not_applicable: Some("the device did not list `files`".into()),
            elapsed_ms: 3.0,
            process: None,
            hooks: Vec::new(),
            listed_rules: vec!["device.rule.1".into(), "device.rule.3".into()],
        }
    }

    #[test]
    fn a_run_that_did_not_apply_says_why_in_every_report() {
        let outcome = not_applicable();
        let human = super::human::render("fake-instance", &outcome, &[]);
        assert!(
            human.contains("NOT APPLICABLE: the device did not list `files`"),
            "{human}"
        );
        assert!(human.contains("n/a  2"), "{human}");
        assert!(!human.contains("last messages"), "{human}");
        let junit = super::junit::render("fake-instance", &outcome);
        assert!(
            junit.contains("<skipped message=\"not applicable: the device did not list `files`\""),
            "{junit}"
        );
        assert!(!junit.contains("<failure"), "{junit}");
        let json: serde_json::Value =
            serde_json::from_str(&super::json::render("fake-instance", &outcome, &[]))
                .expect("JSON");
        assert_eq!(json["verdict"], "not_applicable");
        assert_eq!(
            json["outcome"]["not_applicable"],
            "the device did not list `files`"
        );
        assert_eq!(json["outcome"]["steps"][1]["status"], "not_applicable");
    }

    /// A run whose later part did not apply still says, in each report, what it judged before.
    #[test]
    fn a_run_that_stopped_not_applicable_says_which_rules_it_judged_in_every_report() {
        let outcome = not_applicable();
        let human = super::human::render("fake-instance", &outcome, &[]);
        assert!(
            human.contains("judged 1 of 3 rules (kept 1, broken 0)"),
            "{human}"
        );
        assert!(
            human.contains("not judged: device.rule.3 (step 3 (line 3) did not run: step 2"),
            "{human}"
        );
        let junit = super::junit::render("fake-instance", &outcome);
        assert!(
            junit.contains(r#"<property name="rule device.rule.1" value="kept"/>"#),
            "{junit}"
        );
        assert!(junit.contains(r#"name="rule device.rule.2" value="not judged: step 2 (line 3) did not apply: the device did not list `files`""#), "{junit}");
        let json: serde_json::Value =
            serde_json::from_str(&super::json::render("fake-instance", &outcome, &[]))
                .expect("JSON");
        assert_eq!(json["judged"], "judged 1 of 3 rules (kept 1, broken 0)");
        assert_eq!(json["rules"][0]["rule"], "device.rule.1");
        assert_eq!(json["rules"][0]["judged"], "kept");
        assert_eq!(json["rules"][1]["judged"], "not_judged");
        let html = super::html::render("fake-instance", &outcome, &[]);
        assert!(html.contains("judged 1 of 3 rules"), "the HTML says it too");
        assert!(html.contains("not judged"), "and which were not");
    }
}
