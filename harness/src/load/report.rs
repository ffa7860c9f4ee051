//! A load run's report as JSON (`--report json:PATH`): its figures whole, so the reports of
//! shards merge exactly (`harness merge`), and what its devices found.

use serde::{Deserialize, Serialize};

use crate::load::figures::Figures;
use crate::load::threshold::Judged;

/// The `format` every load report names, so a reader knows what it holds.
pub const FORMAT: &str = "lembas-load/1";
/// How many findings a report shows (it counts them all).
pub const EXAMPLES_KEPT: usize = 20;

/// A load run's report.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LoadReport {
    /// Always [`FORMAT`].
    pub format: String,
    /// What made it (`fake-device`, or `harness merge`).
    pub tool: String,
    /// When the run started, in milliseconds since the unix epoch.
    pub started_unix_ms: u64,
    /// When it ended, in milliseconds since the unix epoch.
    pub ended_unix_ms: u64,
    /// How many devices it ran.
    pub devices: u64,
    /// The workload's name, when it ran one.
    #[serde(default)]
    pub workload: Option<String>,
    /// The seed of the workload's draws.
    #[serde(default)]
    pub seed: Option<u64>,
    /// The shards it holds (`2/4`), one for a shard's own report.
    pub shards: Vec<String>,
    /// Its figures.
    pub figures: Figures,
    /// What its devices found the peer doing wrong.
    pub findings: Findings,
    /// Its thresholds and how they were judged (a merge judges its own).
    #[serde(default)]
    pub thresholds: Vec<Judged>,
}

/// Findings, counted, with the first few shown.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Findings {
    /// How many, in all.
    pub count: u64,
    /// The first [`EXAMPLES_KEPT`], each as a line naming its device and rule.
    pub examples: Vec<String>,
}

/// Why reports could not be merged.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    /// Nothing to merge.
    #[error("no report to merge")]
    Nothing,
    /// A report of another kind.
    #[error("`{0}` is not a load report (format `{FORMAT}`)")]
    NotALoadReport(String),
    /// A shard came twice.
    #[error("shard {0} is in more than one report: a slice of the fleet counted twice")]
    ShardTwice(String),
}

impl LoadReport {
    /// How long the run took.
    pub fn seconds(&self) -> f64 {
        self.ended_unix_ms.saturating_sub(self.started_unix_ms) as f64 / 1000.0
    }

    /// Reads a report, or says why it is not one.
    pub fn parse(text: &str, name: &str) -> Result<LoadReport, String> {
        let report: LoadReport = serde_json::from_str(text).map_err(|e| format!("{name}: {e}"))?;
        if report.format != FORMAT {
            return Err(MergeError::NotALoadReport(name.to_string()).to_string());
        }
        report
            .figures
            .timeline
            .check()
            .map_err(|why| format!("{name}: {why}"))?;
        Ok(report)
    }

    /// The reports of a run's shards as the one report of the whole run: figures added
    /// (histograms merged, not averaged), from the first start to the last end. Thresholds are
    /// left to be judged on the merge.
    pub fn merge(reports: &[LoadReport]) -> Result<LoadReport, MergeError> {
        let first = reports.first().ok_or(MergeError::Nothing)?;
        let mut merged = LoadReport {
            format: FORMAT.to_string(),
            tool: "harness merge".to_string(),
            started_unix_ms: first.started_unix_ms,
            ended_unix_ms: first.ended_unix_ms,
            devices: 0,
            workload: first.workload.clone(),
            seed: first.seed,
            shards: Vec::new(),
            figures: Figures::default(),
            findings: Findings::default(),
            thresholds: Vec::new(),
        };
        for report in reports {
            for shard in &report.shards {
                // Two whole runs (`1/1`) may add up; a slice of a fleet may come only once.
                if shard != "1/1" && merged.shards.contains(shard) {
                    return Err(MergeError::ShardTwice(shard.clone()));
                }
                merged.shards.push(shard.clone());
            }
            merged.started_unix_ms = merged.started_unix_ms.min(report.started_unix_ms);
            merged.ended_unix_ms = merged.ended_unix_ms.max(report.ended_unix_ms);
            merged.devices = merged.devices.saturating_add(report.devices);
            merged.figures.merge(&report.figures);
            merged.findings.count = merged.findings.count.saturating_add(report.findings.count);
            let room = EXAMPLES_KEPT.saturating_sub(merged.findings.examples.len());
            merged
                .findings
                .examples
                .extend(report.findings.examples.iter().take(room).cloned());
        }
        Ok(merged)
    }
}
