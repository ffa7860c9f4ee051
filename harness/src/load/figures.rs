//! A load run's figures: latencies kept in HdrHistograms, counters, gauges, and a timeline of
//! them. Everything adds exactly, so the figures of shards merge into those one run would have.

use std::collections::BTreeMap;
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::load::timeline::Timeline;

/// The longest latency kept: a longer one is recorded as this (an hour, in microseconds).
const HIGHEST_US: u64 = 3_600_000_000;
/// Three significant figures: each value is kept within 0.1%.
const SIGNIFICANT_FIGURES: u8 = 3;
/// How many different names one run keeps for each kind of figure. Names are made from what the
/// peer sends (its methods), so a peer inventing a new method a message must not grow them
/// without bound: past this, a new name is counted under [`OTHER`].
pub const MAX_NAMES: usize = 200;
/// The name a figure is counted under once [`MAX_NAMES`] are taken.
pub const OTHER: &str = "(other)";
/// The longest name kept: a longer one is cut here (on a character boundary).
const MAX_NAME_BYTES: usize = 96;

/// How long a kind of thing took, every time it happened, and how often it failed.
#[derive(Debug, Clone)]
pub struct Latency {
    /// Each time it took, in microseconds.
    pub histogram: Histogram<u64>,
    /// How many of them ended in an error (a JSON-RPC error answer, say).
    pub errors: u64,
}

impl Default for Latency {
    fn default() -> Self {
        Latency {
            histogram: empty_histogram(),
            errors: 0,
        }
    }
}

/// A histogram with the run's bounds and precision.
fn empty_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, HIGHEST_US, SIGNIFICANT_FIGURES)
        .expect("the fixed bounds and precision are valid")
}

impl Latency {
    /// Records one time (`ok: false` for one that ended in an error).
    pub fn record(&mut self, took: Duration, ok: bool) {
        let micros = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        self.histogram
            .saturating_record(micros.clamp(1, HIGHEST_US));
        if !ok {
            self.errors = self.errors.saturating_add(1);
        }
    }

    /// Adds another's times and errors to these.
    pub fn add(&mut self, other: &Latency) {
        // Same bounds and precision on both sides: adding cannot fail.
        let _ = self.histogram.add(&other.histogram);
        self.errors = self.errors.saturating_add(other.errors);
    }

    /// How many times were recorded.
    pub fn count(&self) -> u64 {
        self.histogram.len()
    }

    /// The time below which `quantile` (0.0 … 1.0) of them fell.
    pub fn at_quantile(&self, quantile: f64) -> Duration {
        Duration::from_micros(self.histogram.value_at_quantile(quantile))
    }

    /// The shortest, or zero for none.
    pub fn min(&self) -> Duration {
        Duration::from_micros(if self.count() == 0 {
            0
        } else {
            self.histogram.min()
        })
    }

    /// The longest.
    pub fn max(&self) -> Duration {
        Duration::from_micros(self.histogram.max())
    }

    /// The mean.
    pub fn mean(&self) -> Duration {
        Duration::from_secs_f64(self.histogram.mean() / 1e6)
    }
}

/// A run's figures, whole.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Figures {
    /// Latencies by name (`prompt.answer`, `device.session/new`).
    #[serde(with = "latencies_as_json")]
    pub latencies: BTreeMap<String, Latency>,
    /// Counts by name (`messages.in`, `events.agent_message_chunk`).
    pub counters: BTreeMap<String, u64>,
    /// Levels by name, as they were last (`devices.linked`).
    pub gauges: BTreeMap<String, u64>,
    /// The same, second by second.
    pub timeline: Timeline,
}

impl Figures {
    /// Records how long one `name` took, at unix second `at`.
    pub fn latency(&mut self, name: &str, took: Duration, ok: bool, at: u64) {
        let name = kept_name(&self.latencies, name);
        self.latencies
            .entry(name.clone())
            .or_default()
            .record(took, ok);
        self.timeline.latency(at, &name, took, ok);
    }

    /// Adds `by` to the counter `name`, at unix second `at`.
    pub fn count(&mut self, name: &str, by: u64, at: u64) {
        let name = kept_name(&self.counters, name);
        let count = self.counters.entry(name.clone()).or_default();
        *count = count.saturating_add(by);
        self.timeline.count(at, &name, by);
    }

    /// Sets the gauge `name` to `level`, at unix second `at`.
    pub fn gauge(&mut self, name: &str, level: u64, at: u64) {
        let name = kept_name(&self.gauges, name);
        self.gauges.insert(name.clone(), level);
        self.timeline.gauge(at, &name, level);
    }

    /// Adds another run's figures to these: histograms and counts added, gauges summed (two
    /// shards' linked devices are the fleet's), timelines added second by second.
    pub fn merge(&mut self, other: &Figures) {
        for (name, latency) in &other.latencies {
            self.latencies.entry(name.clone()).or_default().add(latency);
        }
        // Saturating: a report read from a file may hold any count.
        for (name, count) in &other.counters {
            let kept = self.counters.entry(name.clone()).or_default();
            *kept = kept.saturating_add(*count);
        }
        for (name, level) in &other.gauges {
            let kept = self.gauges.entry(name.clone()).or_default();
            *kept = kept.saturating_add(*level);
        }
        self.timeline.merge(&other.timeline);
    }
}

/// The name `name` is kept under in `names`: itself (cut to a bound) while there is room, else
/// [`OTHER`].
pub(super) fn kept_name<V>(names: &BTreeMap<String, V>, name: &str) -> String {
    let mut end = name.len().min(MAX_NAME_BYTES);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    let name = &name[..end];
    if names.contains_key(name) || names.len() < MAX_NAMES {
        name.to_string()
    } else {
        OTHER.to_string()
    }
}

/// A latency as a report writes it: figures to read, and the recorded values (the highest
/// value of each bucket that holds any, with its count), from which the histogram is rebuilt
/// exactly.
#[derive(Debug, Serialize, Deserialize)]
struct LatencyJson {
    count: u64,
    errors: u64,
    #[serde(default)]
    min_us: u64,
    #[serde(default)]
    mean_us: f64,
    #[serde(default)]
    p50_us: u64,
    #[serde(default)]
    p90_us: u64,
    #[serde(default)]
    p99_us: u64,
    #[serde(default)]
    max_us: u64,
    /// `[value_us, count]` pairs.
    recorded: Vec<(u64, u64)>,
}

/// Latencies written as [`LatencyJson`] and read back from it.
mod latencies_as_json {
    use crate::load::figures::{Latency, LatencyJson, empty_histogram};
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use std::collections::BTreeMap;

    pub(super) fn serialize<S: Serializer>(
        latencies: &BTreeMap<String, Latency>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        let written: BTreeMap<&String, LatencyJson> = latencies
            .iter()
            .map(|(name, latency)| {
                let h = &latency.histogram;
                let json = LatencyJson {
                    count: h.len(),
                    errors: latency.errors,
                    min_us: latency.min().as_micros() as u64,
                    mean_us: (h.mean() * 10.0).round() / 10.0,
                    p50_us: h.value_at_quantile(0.5),
                    p90_us: h.value_at_quantile(0.9),
                    p99_us: h.value_at_quantile(0.99),
                    max_us: h.max(),
                    recorded: h
                        .iter_recorded()
                        .map(|v| (v.value_iterated_to(), v.count_at_value()))
                        .collect(),
                };
                (name, json)
            })
            .collect();
        written.serialize(serializer)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<BTreeMap<String, Latency>, D::Error> {
        let read = BTreeMap::<String, LatencyJson>::deserialize(deserializer)?;
        let mut latencies = BTreeMap::new();
        for (name, json) in read {
            let mut histogram = empty_histogram();
            for (value, count) in json.recorded {
                if value == 0 || histogram.record_n(value, count).is_err() {
                    return Err(serde::de::Error::custom(format!(
                        "latency `{name}`: {value} µs is outside the kept range"
                    )));
                }
            }
            latencies.insert(
                name,
                Latency {
                    histogram,
                    errors: json.errors,
                },
            );
        }
        Ok(latencies)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn figures_split_four_ways_merge_into_the_figures_of_all() {
        let mut whole = Figures::default();
        let mut parts = vec![Figures::default(); 4];
        for i in 0..4_000u64 {
            let took = Duration::from_micros(37 * i * i % 900_001 + 1);
            let at = 1_000 + i / 400;
            whole.latency("prompt.answer", took, i % 13 != 0, at);
            whole.count("messages.in", 3, at);
            parts[(i % 4) as usize].latency("prompt.answer", took, i % 13 != 0, at);
            parts[(i % 4) as usize].count("messages.in", 3, at);
        }
        let mut merged = Figures::default();
        for part in &parts {
            let written = serde_json::to_string(part).expect("figures write");
            let read: Figures = serde_json::from_str(&written).expect("figures read back");
            merged.merge(&read);
        }
        let (a, b) = (
            &whole.latencies["prompt.answer"],
            &merged.latencies["prompt.answer"],
        );
        assert_eq!(a.count(), b.count());
        assert_eq!(a.errors, b.errors);
        for q in [0.0, 0.5, 0.9, 0.99, 0.999, 1.0] {
            assert_eq!(a.at_quantile(q), b.at_quantile(q), "quantile {q}");
        }
        assert_eq!(whole.counters, merged.counters);
        assert_eq!(
            serde_json::to_value(&whole.timeline).expect("json"),
            serde_json::to_value(&merged.timeline).expect("json")
        );
    }

    #[test]
    fn a_peer_inventing_names_is_counted_under_other_past_the_bound() {
        let mut figures = Figures::default();
        for i in 0..(MAX_NAMES + 50) {
            figures.latency(&format!("device.m{i}"), ms(1), true, 1);
            figures.count(&format!("notifications.{}", "x".repeat(i)), 1, 1);
        }
        assert_eq!(figures.latencies.len(), MAX_NAMES + 1);
        assert_eq!(figures.latencies[OTHER].count(), 50);
        assert!(figures.counters.keys().all(|k| k.len() <= MAX_NAME_BYTES));
    }

    #[test]
    fn counts_that_would_overflow_saturate_instead_of_panicking() {
        let huge = format!(
            r#"{{"latencies": {{"x": {{"count": 1, "errors": {max}, "recorded": [[5, {max}]]}}}},
            "counters": {{"n": {max}}}, "gauges": {{}}, "timeline": {{"step_s": 1, "points": []}}}}"#,
            max = u64::MAX
        );
        let read: Figures = serde_json::from_str(&huge).expect("figures");
        let mut merged = read.clone();
        merged.merge(&read);
        assert_eq!(merged.counters["n"], u64::MAX);
        assert_eq!(merged.latencies["x"].errors, u64::MAX);
    }

    #[test]
    fn a_histogram_written_with_values_out_of_range_is_refused() {
        let bad = r#"{"latencies": {"x": {"count": 1, "errors": 0, "recorded": [[0, 1]]}},
            "counters": {}, "gauges": {}, "timeline": {"step_s": 1, "seconds": []}}"#;
        let read = serde_json::from_str::<Figures>(bad);
        assert!(read.is_err(), "{read:?}");
    }
}
