//! Reports of a run: for a person (`human`), for CI (`junit`), for tools (`json`).

pub mod human;
pub mod json;
pub mod junit;

use std::path::PathBuf;

use crate::engine::RunOutcome;
use crate::journal::Entry;

/// A report a run should write, from `--report KIND:PATH`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReportTarget {
    /// JUnit XML.
    Junit(PathBuf),
    /// The outcome as JSON.
    Json(PathBuf),
}

impl std::str::FromStr for ReportTarget {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.split_once(':') {
            Some(("junit", path)) if !path.is_empty() => Ok(ReportTarget::Junit(path.into())),
            Some(("json", path)) if !path.is_empty() => Ok(ReportTarget::Json(path.into())),
            _ => Err(format!(
                "`{s}` is not KIND:PATH with KIND junit or json (e.g. junit:report.xml)"
            )),
        }
    }
}

/// Writes every requested report.
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
        }
    }
    Ok(())
}
