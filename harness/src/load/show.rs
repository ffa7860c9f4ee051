//! Figures as the summary, the HTML page and the thresholds show them.

use std::time::Duration;

use crate::load::figures::Latency;

/// A rate over a run of `seconds` (`-` for a run of no time).
pub(crate) fn show_rate(count: u64, seconds: f64) -> String {
    if seconds > 0.0 {
        format!("{:.2}/s", count as f64 / seconds)
    } else {
        "-".to_string()
    }
}

/// The statistics the summary's line and the page's row show of a latency, in order.
pub(crate) const LATENCY_STATS: [&str; 8] =
    ["count", "rate", "errors", "min", "p50", "p90", "p99", "max"];

/// What the summary's line and the page's row show of a latency, each statistic named
/// ([`LATENCY_STATS`]).
pub(crate) fn latency_figures(latency: &Latency, seconds: f64) -> [(&'static str, String); 8] {
    let values = [
        latency.count().to_string(),
        show_rate(latency.count(), seconds),
        latency.errors.to_string(),
        show_duration(latency.min()),
        show_duration(latency.at_quantile(0.5)),
        show_duration(latency.at_quantile(0.9)),
        show_duration(latency.at_quantile(0.99)),
        show_duration(latency.max()),
    ];
    let mut named = values.into_iter();
    LATENCY_STATS.map(|stat| (stat, named.next().unwrap_or_default()))
}

/// A time as the summary shows one: three significant figures, in µs, ms or s.
pub fn show_duration(took: Duration) -> String {
    let micros = took.as_secs_f64() * 1e6;
    match micros {
        m if m < 1_000.0 => format!("{m:.0}µs"),
        m if m < 10_000.0 => format!("{:.2}ms", m / 1e3),
        m if m < 100_000.0 => format!("{:.1}ms", m / 1e3),
        m if m < 1_000_000.0 => format!("{:.0}ms", m / 1e3),
        m if m < 10_000_000.0 => format!("{:.2}s", m / 1e6),
        m => format!("{:.1}s", m / 1e6),
    }
}

/// A number as the summary shows one: whole when it is, else to three decimals.
pub fn show_number(value: f64) -> String {
    if value.fract() == 0.0 && value.abs() < 1e15 {
        format!("{value:.0}")
    } else {
        format!("{value:.3}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_show_three_significant_figures_in_a_fitting_unit() {
        let cases = [
            (Duration::from_micros(812), "812µs"),
            (Duration::from_micros(4_213), "4.21ms"),
            (Duration::from_micros(42_130), "42.1ms"),
            (Duration::from_micros(421_300), "421ms"),
            (Duration::from_millis(4_213), "4.21s"),
            (Duration::from_secs(42), "42.0s"),
        ];
        for (took, shown) in cases {
            assert_eq!(show_duration(took), shown);
        }
    }
}
