//! `harness merge`: the JSON reports of a fleet's shards (`fake-device --fleet … --shard K/N
//! --report json:PATH`) as the report of the whole run: histograms merged, not averaged, so the
//! percentiles are those of every device's figures together; the summary printed, the merge's
//! own reports written, and thresholds judged on it.

use std::path::PathBuf;

use harness::Exit;
use harness::load::{LoadReport, Threshold};
use harness::report::ReportTarget;

use crate::error::Error;

/// `harness merge`'s arguments.
#[derive(Debug, clap::Args)]
pub struct MergeArgs {
    /// The shards' JSON reports.
    #[arg(required = true, value_name = "REPORT.json")]
    pub files: Vec<PathBuf>,
    /// Write the merge: json:PATH (mergeable again), html:PATH, junit:PATH (repeatable).
    #[arg(long = "report", value_name = "KIND:PATH")]
    pub reports: Vec<ReportTarget>,
    /// Fail (exit 7) when this threshold is crossed on the merge, as `fake-device --threshold`
    /// (repeatable).
    #[arg(long = "threshold", value_name = "EXPR")]
    pub thresholds: Vec<Threshold>,
}

/// Merges, prints the summary on stdout, writes the reports; exits 7 when a threshold is
/// crossed, 1 when the shards' devices found a rule broken, else 0.
pub fn command(args: MergeArgs) -> Result<Exit, Error> {
    let mut reports = Vec::new();
    for file in &args.files {
        let text = std::fs::read_to_string(file)
            .map_err(|e| Error::Merge(format!("{}: {e}", file.display())))?;
        reports.push(LoadReport::parse(&text, &file.display().to_string()).map_err(Error::Merge)?);
    }
    let mut merged = LoadReport::merge(&reports).map_err(|e| Error::Merge(e.to_string()))?;
    let seconds = merged.seconds();
    merged.thresholds = args
        .thresholds
        .iter()
        .map(|t| t.judge(&merged.figures, seconds))
        .collect();
    print!("{}", harness::load::summary(&merged));
    harness::load::write_reports(&args.reports, &merged)
        .map_err(|e| Error::Merge(format!("cannot write a report: {e}")))?;
    Ok(if merged.findings.count > 0 {
        Exit::PeerFailed
    } else if merged.thresholds.iter().any(|t| t.crossed) {
        Exit::ThresholdCrossed
    } else {
        Exit::Passed
    })
}
