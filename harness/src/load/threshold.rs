//! Thresholds (`--threshold 'prompt.answer.p99<500ms'`): a figure's statistic compared with a
//! bound, judged at the run's end (or on a merge); one crossed fails the run, as k6's do.

use std::fmt;
use std::str::FromStr;
use std::sync::LazyLock;
use std::time::Duration;

use regex::Regex;
use serde::{Deserialize, Serialize};

use crate::load::figures::Figures;
use crate::load::show::{show_duration, show_number};

/// A statistic of a figure.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Stat {
    /// How many (a latency's count, or a counter).
    Count,
    /// How many a second, over the run.
    Rate,
    /// How many of a latency's ended in an error.
    Errors,
    /// That as a share of its count (0 … 1).
    ErrorRate,
    /// The shortest.
    Min,
    /// The mean.
    Mean,
    /// The longest.
    Max,
    /// The time below which this percentage fell (`p99` → 99.0).
    Percentile(f64),
}

impl Stat {
    fn is_time(self) -> bool {
        matches!(
            self,
            Stat::Min | Stat::Mean | Stat::Max | Stat::Percentile(_)
        )
    }
}

impl fmt::Display for Stat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Stat::Count => f.write_str("count"),
            Stat::Rate => f.write_str("rate"),
            Stat::Errors => f.write_str("errors"),
            Stat::ErrorRate => f.write_str("error_rate"),
            Stat::Min => f.write_str("min"),
            Stat::Mean => f.write_str("mean"),
            Stat::Max => f.write_str("max"),
            Stat::Percentile(p) => write!(f, "p{p}"),
        }
    }
}

/// How a statistic is compared with its bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `<`
    Below,
    /// `<=`
    AtMost,
    /// `>`
    Above,
    /// `>=`
    AtLeast,
    /// `==`
    Equal,
}

impl Op {
    const ALL: [(&'static str, Op); 5] = [
        ("<=", Op::AtMost),
        (">=", Op::AtLeast),
        ("==", Op::Equal),
        ("<", Op::Below),
        (">", Op::Above),
    ];

    fn holds(self, value: f64, bound: f64) -> bool {
        match self {
            Op::Below => value < bound,
            Op::AtMost => value <= bound,
            Op::Above => value > bound,
            Op::AtLeast => value >= bound,
            Op::Equal => value == bound,
        }
    }

    fn sign(self) -> &'static str {
        Op::ALL
            .iter()
            .find(|(_, op)| *op == self)
            .map(|(sign, _)| *sign)
            .unwrap_or("?")
    }
}

/// One threshold: `figure.stat OP bound`.
#[derive(Debug, Clone, PartialEq)]
pub struct Threshold {
    /// The figure's name (`prompt.answer`).
    pub figure: String,
    /// Its statistic.
    pub stat: Stat,
    /// The comparison.
    pub op: Op,
    /// The bound: microseconds for a time, else the number itself.
    pub bound: f64,
    /// As it was written.
    pub text: String,
}

static FIGURE_AND_STAT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?P<figure>[^\s<>=]+)\.(?P<stat>count|rate|errors|error_rate|min|mean|max|p(?P<p>\d{1,2}(?:\.\d+)?|100))$")
        .expect("a valid pattern")
});

impl FromStr for Threshold {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let usage = || {
            format!(
                "`{text}` is not a threshold like prompt.answer.p99<500ms or findings.count==0 \
                 (FIGURE.STAT OP BOUND; STAT is count, rate, errors, error_rate, min, mean, max \
                 or pNN; OP is <, <=, >, >= or ==)"
            )
        };
        let (at, sign, op) = Op::ALL
            .iter()
            .filter_map(|(sign, op)| text.find(sign).map(|at| (at, *sign, *op)))
            .min_by_key(|(at, sign, _)| (*at, usize::MAX - sign.len()))
            .ok_or_else(usage)?;
        let (left, right) = (text[..at].trim(), text[at + sign.len()..].trim());
        let caught = FIGURE_AND_STAT.captures(left).ok_or_else(usage)?;
        let stat = match &caught["stat"] {
            "count" => Stat::Count,
            "rate" => Stat::Rate,
            "errors" => Stat::Errors,
            "error_rate" => Stat::ErrorRate,
            "min" => Stat::Min,
            "mean" => Stat::Mean,
            "max" => Stat::Max,
            _ => Stat::Percentile(caught["p"].parse().map_err(|_| usage())?),
        };
        let bound = if stat.is_time() {
            read_time(right).ok_or_else(|| {
                format!("`{text}`: `{right}` is not a time like 500ms, 2s or 250us")
            })?
        } else {
            right
                .parse::<f64>()
                .ok()
                .filter(|n| n.is_finite())
                .ok_or_else(|| format!("`{text}`: `{right}` is not a number"))?
        };
        Ok(Threshold {
            figure: caught["figure"].to_string(),
            stat,
            op,
            bound,
            text: text.trim().to_string(),
        })
    }
}

/// A time bound in microseconds: a duration (`500ms`), or a bare number of milliseconds (as
/// k6 reads one).
fn read_time(text: &str) -> Option<f64> {
    if let Ok(ms) = text.parse::<f64>() {
        return (ms.is_finite() && ms >= 0.0).then_some(ms * 1000.0);
    }
    humantime::parse_duration(text)
        .ok()
        .map(|d| d.as_secs_f64() * 1e6)
}

/// A threshold as judged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Judged {
    /// As it was written.
    pub threshold: String,
    /// Whether it was crossed (the run fails).
    pub crossed: bool,
    /// What the statistic was (`p99=212ms`), or why it could not be judged.
    pub observed: String,
}

impl Threshold {
    /// Judges this threshold on `figures` of a run of `seconds`. A time statistic of a figure
    /// never measured is crossed: a misspelt name must not pass unseen.
    pub fn judge(&self, figures: &Figures, seconds: f64) -> Judged {
        let judged = |crossed: bool, observed: String| Judged {
            threshold: self.text.clone(),
            crossed,
            observed,
        };
        let latency = figures
            .latencies
            .get(&self.figure)
            .filter(|l| l.count() > 0);
        if self.stat.is_time() {
            let Some(latency) = latency else {
                return judged(true, format!("no `{}` was measured", self.figure));
            };
            let took = match self.stat {
                Stat::Min => latency.min(),
                Stat::Mean => latency.mean(),
                Stat::Max => latency.max(),
                Stat::Percentile(p) => latency.at_quantile(p / 100.0),
                _ => Duration::ZERO,
            };
            let value = took.as_secs_f64() * 1e6;
            return judged(
                !self.op.holds(value, self.bound),
                format!("{}={}", self.stat, show_duration(took)),
            );
        }
        let count = latency
            .map(|l| l.count())
            .or_else(|| figures.counters.get(&self.figure).copied())
            .unwrap_or(0) as f64;
        let errors = latency.map(|l| l.errors).unwrap_or(0) as f64;
        let value = match self.stat {
            Stat::Count => count,
            Stat::Rate if seconds > 0.0 => count / seconds,
            Stat::Errors => errors,
            Stat::ErrorRate if count > 0.0 => errors / count,
            _ => 0.0,
        };
        judged(
            !self.op.holds(value, self.bound),
            format!("{}={}", self.stat, show_number(value)),
        )
    }
}

impl fmt::Display for Threshold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}{}", self.figure, self.stat, self.op.sign())?;
        if self.stat.is_time() {
            f.write_str(&show_duration(Duration::from_secs_f64(self.bound / 1e6)))
        } else {
            f.write_str(&show_number(self.bound))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figures() -> Figures {
        let mut figures = Figures::default();
        for ms in 1..=100u64 {
            figures.latency("prompt.answer", Duration::from_millis(ms), ms % 10 != 0, 7);
        }
        figures.count("findings", 0, 7);
        figures.count("messages.in", 500, 7);
        figures
    }

    fn judge(text: &str) -> Judged {
        let threshold: Threshold = text.parse().expect("a threshold");
        threshold.judge(&figures(), 10.0)
    }

    #[test]
    fn thresholds_read_as_k6_writes_them_and_judge_each_statistic() {
        assert!(!judge("prompt.answer.p99<500ms").crossed);
        assert!(judge("prompt.answer.p99<50ms").crossed);
        assert!(
            !judge("prompt.answer.p99.9 <= 101").crossed,
            "bare numbers are ms"
        );
        assert!(judge("prompt.answer.max<0.05s").crossed);
        assert!(!judge("prompt.answer.min>=1ms").crossed);
        assert!(!judge("prompt.answer.count==100").crossed);
        assert!(!judge("prompt.answer.errors==10").crossed);
        assert!(judge("prompt.answer.error_rate<0.05").crossed);
        assert!(!judge("messages.in.rate>=50").crossed);
        assert!(judge("messages.in.rate>50").crossed);
        assert!(!judge("findings.count==0").crossed);
        assert_eq!(judge("prompt.answer.p50<1s").observed, "p50=50.0ms");
    }

    #[test]
    fn a_time_of_a_figure_never_measured_is_crossed_and_says_so() {
        let judged = judge("promt.answer.p99<500ms");
        assert!(judged.crossed);
        assert_eq!(judged.observed, "no `promt.answer` was measured");
    }

    #[test]
    fn a_malformed_threshold_says_what_one_looks_like() {
        for bad in [
            "prompt.answer<500ms",
            "prompt.answer.p99",
            "prompt.answer.p99<fast",
            "prompt.answer.count<many",
            "prompt.answer.p999<1s",
            ".p99<1s",
        ] {
            let error = bad.parse::<Threshold>().expect_err(bad);
            assert!(error.contains(bad), "{error}");
        }
    }
}
