//! A load run's figures over time, for the report's plots: what happened in each step of
//! wall-clock time (one second at first). A long run keeps a bounded number of points by
//! doubling the step; steps start at multiples of the step in unix seconds, so two shards'
//! timelines line up and add exactly.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// How many points a timeline keeps before it doubles its step.
const MAX_POINTS: usize = 720;

/// Figures over time.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Timeline {
    /// How many seconds a point covers (a power of two).
    pub step_s: u64,
    /// The points, oldest first.
    pub points: Vec<Point>,
}

impl Default for Timeline {
    fn default() -> Self {
        Timeline {
            step_s: 1,
            points: Vec::new(),
        }
    }
}

/// What happened during one step.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Point {
    /// When the step started, in unix seconds.
    pub at: u64,
    /// Counts made during it.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub counters: BTreeMap<String, u64>,
    /// Gauges as they were at its end.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub gauges: BTreeMap<String, u64>,
    /// Latencies that ended during it.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub latencies: BTreeMap<String, Span>,
}

/// Latencies of one step, as much of them as adds exactly: how many, their sum and maximum.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Span {
    /// How many ended.
    pub count: u64,
    /// How many of those were errors.
    pub errors: u64,
    /// Their sum, in microseconds.
    pub sum_us: u64,
    /// The longest, in microseconds.
    pub max_us: u64,
}

impl Span {
    fn add(&mut self, other: &Span) {
        self.count = self.count.saturating_add(other.count);
        self.errors = self.errors.saturating_add(other.errors);
        self.sum_us = self.sum_us.saturating_add(other.sum_us);
        self.max_us = self.max_us.max(other.max_us);
    }

    /// Their mean, in microseconds (0 for none).
    pub fn mean_us(&self) -> u64 {
        self.sum_us.checked_div(self.count).unwrap_or(0)
    }
}

impl Point {
    /// Adds `later`, a point of the same run that followed this one, into it: its gauges win.
    fn absorb_later(&mut self, later: &Point) {
        self.add_counts(later);
        for (name, level) in &later.gauges {
            self.gauges.insert(name.clone(), *level);
        }
    }

    /// Adds another run's point of the same step: gauges summed.
    fn add_other_run(&mut self, other: &Point) {
        self.add_counts(other);
        for (name, level) in &other.gauges {
            let kept = self.gauges.entry(name.clone()).or_default();
            *kept = kept.saturating_add(*level);
        }
    }

    fn add_counts(&mut self, other: &Point) {
        for (name, by) in &other.counters {
            let kept = self.counters.entry(name.clone()).or_default();
            *kept = kept.saturating_add(*by);
        }
        for (name, span) in &other.latencies {
            self.latencies.entry(name.clone()).or_default().add(span);
        }
    }
}

impl Timeline {
    /// The point holding unix second `at`, made if new.
    fn point(&mut self, at: u64) -> &mut Point {
        let at = at - at % self.step_s;
        let place = match self.points.iter().rposition(|p| p.at <= at) {
            Some(i) if self.points[i].at == at => i,
            Some(i) => self.insert(i + 1, at),
            None => self.insert(0, at),
        };
        let at = self.points[place].at;
        if self.points.len() > MAX_POINTS {
            self.double_step();
            return self.point(at);
        }
        &mut self.points[place]
    }

    fn insert(&mut self, place: usize, at: u64) -> usize {
        self.points.insert(
            place,
            Point {
                at,
                ..Point::default()
            },
        );
        place
    }

    /// Halves the points: each pair of neighbouring steps becomes one twice as long.
    fn double_step(&mut self) {
        self.coarsen_to(self.step_s * 2);
    }

    /// Re-buckets the points into steps of `step_s` (a multiple of the current step).
    fn coarsen_to(&mut self, step_s: u64) {
        if step_s <= self.step_s {
            return;
        }
        let mut coarse: Vec<Point> = Vec::new();
        for point in std::mem::take(&mut self.points) {
            let at = point.at - point.at % step_s;
            match coarse.last_mut() {
                Some(last) if last.at == at => last.absorb_later(&point),
                _ => coarse.push(Point { at, ..point }),
            }
        }
        self.step_s = step_s;
        self.points = coarse;
    }

    /// Adds `by` to `name` at unix second `at`.
    pub fn count(&mut self, at: u64, name: &str, by: u64) {
        let point = self.point(at);
        match point.counters.get_mut(name) {
            Some(count) => *count = count.saturating_add(by),
            None => {
                point.counters.insert(name.to_string(), by);
            }
        }
    }

    /// Sets gauge `name` to `level` at unix second `at`.
    pub fn gauge(&mut self, at: u64, name: &str, level: u64) {
        let point = self.point(at);
        match point.gauges.get_mut(name) {
            Some(was) => *was = level,
            None => {
                point.gauges.insert(name.to_string(), level);
            }
        }
    }

    /// Records one latency of `name` ending at unix second `at`.
    pub fn latency(&mut self, at: u64, name: &str, took: Duration, ok: bool) {
        let micros = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        let one = Span {
            count: 1,
            errors: u64::from(!ok),
            sum_us: micros,
            max_us: micros,
        };
        let point = self.point(at);
        match point.latencies.get_mut(name) {
            Some(span) => span.add(&one),
            None => {
                point.latencies.insert(name.to_string(), one);
            }
        }
    }

    /// Why a timeline read from a file is not one this module makes, if it is not: a step that
    /// is not a power of two, or points out of order or off their steps.
    pub fn check(&self) -> Result<(), String> {
        if !self.step_s.is_power_of_two() {
            return Err(format!(
                "a timeline step of {} s is not a power of two",
                self.step_s
            ));
        }
        let in_order = self.points.windows(2).all(|w| w[0].at < w[1].at);
        if !in_order || self.points.iter().any(|p| p.at % self.step_s != 0) {
            return Err("the timeline's points are out of order or off their steps".into());
        }
        Ok(())
    }

    /// Adds another run's timeline: both in the coarser step, points of the same step added.
    pub fn merge(&mut self, other: &Timeline) {
        let mut other = other.clone();
        let step_s = self.step_s.max(other.step_s);
        self.coarsen_to(step_s);
        other.coarsen_to(step_s);
        for point in &other.points {
            let at = point.at;
            self.point(at).add_other_run(point);
        }
        // Adding may have made more points than are kept.
        while self.points.len() > MAX_POINTS {
            self.double_step();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_run_keeps_a_bounded_number_of_points_and_every_count() {
        let mut timeline = Timeline::default();
        for second in 0..10_000u64 {
            timeline.count(1_000_000 + second, "messages.in", 2);
            timeline.gauge(1_000_000 + second, "devices.linked", second);
        }
        assert!(
            timeline.points.len() <= MAX_POINTS,
            "{}",
            timeline.points.len()
        );
        assert_eq!(timeline.step_s, 16);
        let total: u64 = timeline
            .points
            .iter()
            .map(|p| p.counters["messages.in"])
            .sum();
        assert_eq!(total, 20_000);
        // A coarse point's gauge is the level at its end.
        let last = timeline.points.last().expect("points");
        assert_eq!(last.gauges["devices.linked"], 9_999);
    }

    #[test]
    fn a_timeline_read_from_a_file_must_be_one_this_module_makes() {
        let mut timeline = Timeline::default();
        timeline.count(10, "n", 1);
        timeline.count(11, "n", 1);
        assert_eq!(timeline.check(), Ok(()));
        let mut zero = timeline.clone();
        zero.step_s = 0;
        assert!(zero.check().is_err());
        let mut reversed = timeline.clone();
        reversed.points.reverse();
        assert!(reversed.check().is_err());
    }

    #[test]
    fn timelines_of_different_steps_merge_in_the_coarser() {
        let mut fine = Timeline::default();
        let mut coarse = Timeline::default();
        for second in 0..2_000u64 {
            fine.count(second, "n", 1);
        }
        for second in 0..200u64 {
            coarse.count(second, "n", 1);
        }
        assert_eq!(fine.step_s, 4);
        coarse.merge(&fine);
        assert_eq!(coarse.step_s, 4);
        let total: u64 = coarse.points.iter().map(|p| p.counters["n"]).sum();
        assert_eq!(total, 2_200);
        assert!(coarse.points.windows(2).all(|w| w[0].at < w[1].at));
    }
}
