//! The summary a load run prints at its end, as k6 prints one: each figure with its count, rate
//! and percentiles, a line each, and the thresholds ticked or crossed.

use crate::load::report::LoadReport;
use crate::load::show::{latency_figures, show_number, show_rate};
use std::fmt::Write as _;

/// How wide the figures' names are padded (dots to the values, as k6 does).
const NAME_WIDTH: usize = 40;

fn dotted(name: &str) -> String {
    let mut line = format!("  {name} ");
    while line.chars().count() < NAME_WIDTH {
        line.push('.');
    }
    line.push(':');
    line
}

/// The summary of `report`, ready to print.
pub fn summary(report: &LoadReport) -> String {
    let seconds = report.seconds();
    let mut out = String::new();
    let shards = match report.shards.len() {
        0 | 1 => String::new(),
        n => format!(", {n} shards"),
    };
    let workload = match (&report.workload, report.seed) {
        (Some(name), Some(seed)) => format!(", workload {name} (seed {seed})"),
        (Some(name), None) => format!(", workload {name}"),
        _ => String::new(),
    };
    let _ = writeln!(
        out,
        "\n  {}: {} devices, {:.1} s{shards}{workload}, {} findings\n",
        report.tool, report.devices, seconds, report.findings.count
    );
    for judged in &report.thresholds {
        let mark = if judged.crossed { '✗' } else { '✓' };
        let _ = writeln!(out, "  {mark} {}  {}", judged.threshold, judged.observed);
    }
    if !report.thresholds.is_empty() {
        out.push('\n');
    }
    for (name, latency) in &report.figures.latencies {
        let shown: Vec<String> = latency_figures(latency, seconds)
            .iter()
            .map(|(stat, value)| format!("{stat}={value}"))
            .collect();
        let _ = writeln!(out, "{} {}", dotted(name), shown.join(" "));
    }
    for (name, count) in &report.figures.counters {
        let _ = writeln!(
            out,
            "{} count={} rate={}",
            dotted(name),
            show_number(*count as f64),
            show_rate(*count, seconds)
        );
    }
    for (name, level) in &report.figures.gauges {
        let highest = report
            .figures
            .timeline
            .points
            .iter()
            .filter_map(|p| p.gauges.get(name))
            .fold(*level, |a, b| a.max(*b));
        let _ = writeln!(out, "{} max={highest} at_end={level}", dotted(name));
    }
    out
}
