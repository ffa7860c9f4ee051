//! A running load's figures as OpenMetrics text (`--metrics ADDR`), for Prometheus to scrape:
//! latencies as histograms, counters and gauges, each family one name with a `figure` label.
//! Rendered from the HdrHistograms at each scrape, with buckets fixed for every figure so that
//! a dashboard's `histogram_quantile` works across them.

use std::fmt::Write as _;
use std::sync::Arc;

use crate::load::figures::Figures;

/// The upper bounds of the latency buckets, in seconds (`+Inf` follows).
const BUCKETS_S: [f64; 16] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0,
];

/// The content type an OpenMetrics scrape answers with.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// A label value with `\`, `"` and new lines escaped.
fn label(value: &str) -> String {
    value
        .replace('\\', r"\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// `figures` as an OpenMetrics exposition, every family named `{prefix}_…`.
pub fn render(figures: &Figures, prefix: &str) -> String {
    let mut out = String::new();
    let latency = format!("{prefix}_latency_seconds");
    let _ = writeln!(out, "# TYPE {latency} histogram");
    let _ = writeln!(out, "# UNIT {latency} seconds");
    let _ = writeln!(
        out,
        "# HELP {latency} How long each figure took (`figure`: prompt.answer, link.setup, device.METHOD, server.METHOD)."
    );
    for (name, kept) in &figures.latencies {
        let figure = label(name);
        let histogram = &kept.histogram;
        for bound in BUCKETS_S {
            let below = histogram.count_between(0, (bound * 1e6) as u64);
            let _ = writeln!(
                out,
                "{latency}_bucket{{figure=\"{figure}\",le=\"{bound}\"}} {below}"
            );
        }
        let count = histogram.len();
        let sum = histogram.mean() * count as f64 / 1e6;
        let _ = writeln!(
            out,
            "{latency}_bucket{{figure=\"{figure}\",le=\"+Inf\"}} {count}"
        );
        let _ = writeln!(out, "{latency}_count{{figure=\"{figure}\"}} {count}");
        let _ = writeln!(out, "{latency}_sum{{figure=\"{figure}\"}} {sum}");
    }
    let errors = format!("{prefix}_latency_errors");
    let _ = writeln!(out, "# TYPE {errors} counter");
    let _ = writeln!(
        out,
        "# HELP {errors} How many of a figure's ended in an error answer."
    );
    for (name, kept) in &figures.latencies {
        let _ = writeln!(
            out,
            "{errors}_total{{figure=\"{}\"}} {}",
            label(name),
            kept.errors
        );
    }
    let count = format!("{prefix}_count");
    let _ = writeln!(out, "# TYPE {count} counter");
    let _ = writeln!(
        out,
        "# HELP {count} How many of each figure (`figure`: messages.in, events.KIND, findings, …)."
    );
    for (name, value) in &figures.counters {
        let _ = writeln!(out, "{count}_total{{figure=\"{}\"}} {value}", label(name));
    }
    let gauge = format!("{prefix}_gauge");
    let _ = writeln!(out, "# TYPE {gauge} gauge");
    let _ = writeln!(
        out,
        "# HELP {gauge} Each level as it is now (`figure`: devices.linked, devices.running)."
    );
    for (name, level) in &figures.gauges {
        let _ = writeln!(out, "{gauge}{{figure=\"{}\"}} {level}", label(name));
    }
    out.push_str("# EOF\n");
    out
}

/// Serves `render()` at `GET /metrics` on `listener` until the process ends.
pub async fn serve(
    listener: tokio::net::TcpListener,
    render: Arc<dyn Fn() -> String + Send + Sync>,
) -> std::io::Result<()> {
    use axum::http::header;
    let app = axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let text = render();
            async move { ([(header::CONTENT_TYPE, CONTENT_TYPE)], text) }
        }),
    );
    axum::serve(listener, app).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn histograms_are_cumulative_end_at_their_count_and_the_text_ends_with_eof() {
        let mut figures = Figures::default();
        for ms in [1u64, 3, 7, 30, 300, 3000] {
            figures.latency("prompt.answer", Duration::from_millis(ms), ms != 7, 1);
        }
        figures.count("messages.in", 12, 1);
        figures.gauge("devices.linked", 4, 1);
        figures.count("weird\"name\\\n", 1, 1);
        let text = render(&figures, "lembas_fleet");
        assert!(text.ends_with("# EOF\n"), "{text}");
        let buckets: Vec<u64> = text
            .lines()
            .filter(|l| l.starts_with("lembas_fleet_latency_seconds_bucket"))
            .map(|l| {
                l.rsplit(' ')
                    .next()
                    .and_then(|n| n.parse().ok())
                    .expect("a count")
            })
            .collect();
        assert_eq!(buckets.len(), BUCKETS_S.len() + 1);
        assert!(buckets.windows(2).all(|w| w[0] <= w[1]), "{buckets:?}");
        assert_eq!(buckets.last(), Some(&6));
        // 1 ms falls in the 1 ms bucket (within the histogram's 0.1%); 3 s below 5 s only.
        assert!(
            text.contains("figure=\"prompt.answer\",le=\"0.0025\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("figure=\"prompt.answer\",le=\"2.5\"} 5\n"),
            "{text}"
        );
        assert!(text.contains("lembas_fleet_latency_errors_total{figure=\"prompt.answer\"} 1\n"));
        assert!(text.contains("lembas_fleet_count_total{figure=\"messages.in\"} 12\n"));
        assert!(text.contains("lembas_fleet_gauge{figure=\"devices.linked\"} 4\n"));
        assert!(text.contains(r#"{figure="weird\"name\\\n"} 1"#), "{text}");
        let sample =
            regex::Regex::new(r#"^[a-z_]+(\{figure="([^"\\]|\\.)*"(,le="[^"]+")?\})? [0-9.e+-]+$"#)
                .expect("a pattern");
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            assert!(sample.is_match(line), "not a sample line: {line}");
        }
    }
}
