//! Writing a load run's reports (`--report json:PATH`, `html:PATH`, `junit:PATH`): the JSON
//! whole (what `harness merge` reads), the HTML page, and JUnit with a case a threshold and one
//! for the findings, so a CI shows what failed.

use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};

use crate::load::report::LoadReport;
use crate::report::ReportTarget;

/// Writes `report` to every target; an error names the file it could not write.
pub fn write_reports(targets: &[ReportTarget], report: &LoadReport) -> std::io::Result<()> {
    for target in targets {
        let (path, text) = match target {
            ReportTarget::Json(path) => (
                path,
                serde_json::to_string_pretty(report).map_err(std::io::Error::other)? + "\n",
            ),
            ReportTarget::Html(path) => (path, crate::load::html::render(report)),
            ReportTarget::Junit(path) => (path, junit(report)),
        };
        std::fs::write(path, text)
            .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
    }
    Ok(())
}

/// The report as JUnit: one suite, a case for the findings and one a threshold.
fn junit(report: &LoadReport) -> String {
    let mut suite = TestSuite::new(format!("{} load", report.tool));
    let findings = if report.findings.count == 0 {
        TestCaseStatus::success()
    } else {
        let mut failed = TestCaseStatus::non_success(NonSuccessKind::Failure);
        failed.set_message(format!(
            "{} findings: the devices saw the server break the spec's rules",
            report.findings.count
        ));
        failed.set_description(report.findings.examples.join("\n"));
        failed
    };
    suite.add_test_case(TestCase::new("findings", findings));
    for judged in &report.thresholds {
        let status = if judged.crossed {
            let mut crossed = TestCaseStatus::non_success(NonSuccessKind::Failure);
            crossed.set_message(format!("crossed: {}", judged.observed));
            crossed
        } else {
            TestCaseStatus::success()
        };
        let mut case = TestCase::new(format!("threshold {}", judged.threshold), status);
        case.set_system_out(judged.observed.clone());
        suite.add_test_case(case);
    }
    let mut junit = Report::new(report.tool.clone());
    junit.add_test_suite(suite);
    junit
        .to_string()
        .unwrap_or_else(|e| format!("<!-- cannot render JUnit: {e} -->"))
}
