//! A load run's report as one self-contained HTML page (`--report html:PATH`): the thresholds,
//! a table of every figure, and plots over time (devices linked, messages a second, and each
//! latency's mean and maximum), drawn here as SVG so the page needs no script and no network.

use std::fmt::Write as _;
use std::time::Duration;

use crate::load::report::LoadReport;
use crate::load::show::{LATENCY_STATS, latency_figures, show_duration, show_rate};
use crate::load::timeline::Timeline;
use crate::report::html::escape::esc;

/// A plot's size, in SVG units.
const WIDTH: f64 = 640.0;
const HEIGHT: f64 = 160.0;
/// Room left of and below the plot for its axis labels.
const LEFT: f64 = 64.0;
const BELOW: f64 = 20.0;

/// One line of a plot: its name, colour, and `(seconds since the start, value)` points.
struct Series {
    name: String,
    colour: &'static str,
    points: Vec<(f64, f64)>,
}

/// The page of `report`.
pub fn render(report: &LoadReport) -> String {
    let mut page = String::new();
    let title = format!(
        "{} · {} devices · {:.1} s",
        report.tool,
        report.devices,
        report.seconds()
    );
    let _ = write!(
        page,
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>{}</title><style>{}</style></head><body><h1>{}</h1>",
        esc(&title),
        STYLE,
        esc(&title)
    );
    let _ = write!(
        page,
        "<p>{} findings{}</p>",
        report.findings.count,
        if report.shards.len() > 1 {
            format!(" · shards {}", esc(&report.shards.join(", ")))
        } else {
            String::new()
        }
    );
    for example in &report.findings.examples {
        let _ = write!(page, "<p class=\"finding\">{}</p>", esc(example));
    }
    if !report.thresholds.is_empty() {
        page.push_str("<h2>Thresholds</h2><ul>");
        for judged in &report.thresholds {
            let (class, mark) = if judged.crossed {
                ("crossed", "✗")
            } else {
                ("held", "✓")
            };
            let _ = write!(
                page,
                "<li class=\"{class}\">{mark} {} <span>{}</span></li>",
                esc(&judged.threshold),
                esc(&judged.observed)
            );
        }
        page.push_str("</ul>");
    }
    figures_table(&mut page, report);
    page.push_str("<h2>Over time</h2>");
    let timeline = &report.figures.timeline;
    let start = timeline.points.first().map(|p| p.at).unwrap_or(0);
    let step = timeline.step_s as f64;
    let over_time = |value: &dyn Fn(&crate::load::timeline::Point) -> Option<f64>| {
        timeline
            .points
            .iter()
            .filter_map(|p| value(p).map(|v| ((p.at - start) as f64, v)))
            .collect::<Vec<_>>()
    };
    let gauges: Vec<Series> = report
        .figures
        .gauges
        .keys()
        .zip(COLOURS.iter().cycle())
        .map(|(name, colour)| Series {
            name: name.clone(),
            colour,
            points: over_time(&|p| p.gauges.get(name).map(|v| *v as f64)),
        })
        .collect();
    plot(&mut page, "Levels", "", &gauges);
    let messages = Series {
        name: "messages a second".into(),
        colour: COLOURS[0],
        points: over_time(&|p| {
            let sum: u64 = p
                .counters
                .iter()
                .filter(|(name, _)| name.starts_with("messages."))
                .map(|(_, n)| n)
                .sum();
            Some(sum as f64 / step)
        }),
    };
    plot(&mut page, "Throughput", "/s", &[messages]);
    for name in report.figures.latencies.keys() {
        let series = [
            Series {
                name: "mean".into(),
                colour: COLOURS[0],
                points: over_time(&|p| p.latencies.get(name).map(|s| s.mean_us() as f64)),
            },
            Series {
                name: "max".into(),
                colour: COLOURS[1],
                points: over_time(&|p| p.latencies.get(name).map(|s| s.max_us as f64)),
            },
        ];
        plot(&mut page, name, "µs", &series);
    }
    let _ = note_on_steps(&mut page, timeline);
    page.push_str("</body></html>\n");
    page
}

const COLOURS: [&str; 6] = [
    "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b",
];

const STYLE: &str = "body{font:14px system-ui,sans-serif;margin:2em;color:#222}\
table{border-collapse:collapse}td,th{padding:2px 10px;text-align:right;border-bottom:1px solid #ddd}\
td:first-child,th:first-child{text-align:left}.crossed{color:#c00}.held{color:#070}\
.finding{color:#c00}svg{display:block;margin:0 0 1.5em}text{font-size:11px;fill:#555}";

fn figures_table(page: &mut String, report: &LoadReport) {
    let seconds = report.seconds();
    page.push_str("<h2>Figures</h2><table><tr><th>figure</th>");
    for stat in LATENCY_STATS {
        let _ = write!(page, "<th>{stat}</th>");
    }
    page.push_str("</tr>");
    for (name, latency) in &report.figures.latencies {
        let _ = write!(page, "<tr><td>{}</td>", esc(name));
        for (_, value) in latency_figures(latency, seconds) {
            let _ = write!(page, "<td>{value}</td>");
        }
        page.push_str("</tr>");
    }
    for (name, count) in &report.figures.counters {
        let _ = write!(
            page,
            "<tr><td>{}</td><td>{count}</td><td>{}</td><td colspan=\"{}\"></td></tr>",
            esc(name),
            show_rate(*count, seconds),
            LATENCY_STATS.len() - 2
        );
    }
    page.push_str("</table>");
}

fn note_on_steps(page: &mut String, timeline: &Timeline) -> std::fmt::Result {
    if timeline.step_s > 1 {
        write!(
            page,
            "<p>Each point covers {} s (a long run's points are merged to keep the page small).</p>",
            timeline.step_s
        )?;
    }
    Ok(())
}

/// A value on a plot's axis.
fn axis_label(value: f64, unit: &str) -> String {
    if unit == "µs" {
        show_duration(Duration::from_micros(value as u64))
    } else {
        format!("{value:.0}{unit}")
    }
}

/// Draws `series` as one SVG plot titled `title`.
fn plot(page: &mut String, title: &str, unit: &str, series: &[Series]) {
    let all = || series.iter().flat_map(|s| s.points.iter());
    if all().next().is_none() {
        return;
    }
    let x_max = all().map(|p| p.0).fold(1.0, f64::max);
    let y_max = all().map(|p| p.1).fold(1.0, f64::max);
    let (w, h) = (WIDTH - LEFT, HEIGHT - BELOW);
    let _ = write!(
        page,
        "<h3>{}</h3><svg width=\"{WIDTH}\" height=\"{HEIGHT}\" viewBox=\"0 0 {WIDTH} {HEIGHT}\" role=\"img\">",
        esc(title)
    );
    let _ = write!(
        page,
        "<line x1=\"{LEFT}\" y1=\"{h}\" x2=\"{WIDTH}\" y2=\"{h}\" stroke=\"#999\"/><line x1=\"{LEFT}\" y1=\"0\" x2=\"{LEFT}\" y2=\"{h}\" stroke=\"#999\"/>\
         <text x=\"2\" y=\"12\">{}</text><text x=\"2\" y=\"{h}\">0</text><text x=\"{LEFT}\" y=\"{HEIGHT}\">0 s</text><text x=\"{}\" y=\"{HEIGHT}\" text-anchor=\"end\">{x_max:.0} s</text>",
        esc(&axis_label(y_max, unit)),
        WIDTH - 2.0
    );
    for (i, line) in series.iter().enumerate() {
        let points: Vec<String> = line
            .points
            .iter()
            .map(|(x, y)| format!("{:.1},{:.1}", LEFT + x / x_max * w, h - y / y_max * h))
            .collect();
        let _ = write!(
            page,
            "<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\" points=\"{}\"/><text x=\"{}\" y=\"{}\" fill=\"{}\">{}</text>",
            line.colour,
            points.join(" "),
            LEFT + 8.0,
            14.0 + 13.0 * i as f64,
            line.colour,
            esc(&line.name)
        );
    }
    page.push_str("</svg>");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::{FORMAT, Figures, Findings};

    #[test]
    fn the_page_plots_each_figure_and_escapes_what_the_peer_named() {
        let mut figures = Figures::default();
        for second in 0..30u64 {
            figures.gauge("devices.linked", second * 10, 1_000 + second);
            figures.count("messages.in", 40, 1_000 + second);
            figures.latency(
                "prompt.answer",
                Duration::from_millis(second + 1),
                true,
                1_000 + second,
            );
            figures.latency(
                "device.<script>",
                Duration::from_millis(1),
                false,
                1_000 + second,
            );
        }
        let report = LoadReport {
            format: FORMAT.into(),
            tool: "fake-device".into(),
            started_unix_ms: 1_000_000,
            ended_unix_ms: 1_030_000,
            devices: 300,
            workload: None,
            seed: None,
            shards: vec!["1/1".into()],
            figures,
            findings: Findings::default(),
            thresholds: vec![],
        };
        let page = render(&report);
        assert!(page.contains("<h3>prompt.answer</h3>"), "{page}");
        assert!(page.contains("<h3>Levels</h3>"));
        assert!(page.contains("<h3>Throughput</h3>"));
        assert_eq!(page.matches("<polyline").count(), 1 + 1 + 2 * 2);
        assert!(!page.contains("<script>"));
        assert!(page.contains("device.&lt;script&gt;"));
    }
}
