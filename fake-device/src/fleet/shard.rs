//! Which devices a fleet (or its shard) runs, and their tokens.

/// What `{i}` in a token pattern (and a per-device journal's path) stands for: the device's
/// number, from 1.
pub const INDEX_PLACEHOLDER: &str = "{i}";

/// One machine's part of a fleet spread over several: the `index`-th of `of` equal slices of the
/// token list (`--shard 2/4`), counted from 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    /// Which slice, from 1.
    pub index: usize,
    /// How many slices.
    pub of: usize,
}

impl std::str::FromStr for Shard {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = || format!("`{text}` is not a shard like 2/4 (the 2nd of 4, counted from 1)");
        let (index, of) = text.split_once('/').ok_or_else(bad)?;
        let index: usize = index.trim().parse().map_err(|_| bad())?;
        let of: usize = of.trim().parse().map_err(|_| bad())?;
        if of == 0 || index == 0 || index > of {
            return Err(bad());
        }
        Ok(Shard { index, of })
    }
}

impl Shard {
    /// The whole fleet on one machine.
    pub const WHOLE: Shard = Shard { index: 1, of: 1 };

    /// The range of `total` devices (0-based, end excluded) this shard runs: contiguous slices
    /// whose sizes differ by at most one, so `n` machines given the same file and `1/n` … `n/n`
    /// run every device exactly once.
    pub fn range(self, total: usize) -> std::ops::Range<usize> {
        let start = total * (self.index - 1) / self.of;
        let end = total * self.index / self.of;
        start..end
    }
}

/// Where a fleet's tokens come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FleetTokens {
    /// `count` tokens made from `pattern`, `{i}` replaced by 1 … `count` (`tok-{i}`).
    Pattern {
        /// The pattern, holding `{i}`.
        pattern: String,
        /// How many devices.
        count: usize,
    },
    /// The tokens of a file, one a line (`--tokens FILE`).
    List(Vec<String>),
}

impl FleetTokens {
    /// How many devices the whole fleet has.
    pub fn count(&self) -> usize {
        match self {
            FleetTokens::Pattern { count, .. } => *count,
            FleetTokens::List(tokens) => tokens.len(),
        }
    }

    /// The devices `shard` runs: each one's number in the whole fleet (from 1) and its token.
    pub fn devices(&self, shard: Shard) -> Vec<FleetDevice> {
        shard
            .range(self.count())
            .map(|at| FleetDevice {
                number: at + 1,
                token: match self {
                    FleetTokens::Pattern { pattern, .. } => {
                        pattern.replace(INDEX_PLACEHOLDER, &(at + 1).to_string())
                    }
                    FleetTokens::List(tokens) => tokens[at].clone(),
                },
            })
            .collect()
    }
}

/// One device of a fleet.
#[derive(Debug, Clone, PartialEq, Eq)]
#[allow(missing_docs)] // fields whose names say it all go undocumented
pub struct FleetDevice {
    /// Its number in the whole fleet, from 1 (its state directory is `device-{number}`).
    pub number: usize,
    pub token: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_cover_every_device_once() {
        for total in [0, 1, 7, 10, 10_001] {
            for of in 1..=5 {
                let mut covered = Vec::new();
                for index in 1..=of {
                    covered.extend(Shard { index, of }.range(total));
                }
                assert_eq!(covered, (0..total).collect::<Vec<_>>(), "{total} in {of}");
            }
        }
    }

    #[test]
    fn a_shard_reads_k_of_n_from_one() {
        assert_eq!("2/4".parse(), Ok(Shard { index: 2, of: 4 }));
        for bad in ["0/4", "5/4", "1/0", "2", "a/b", "-1/2"] {
            assert!(bad.parse::<Shard>().is_err(), "{bad}");
        }
    }

    #[test]
    fn a_pattern_numbers_its_tokens_from_one_and_a_shard_keeps_the_numbers() {
        let tokens = FleetTokens::Pattern {
            pattern: "tok-{i}".into(),
            count: 4,
        };
        let second_half = tokens.devices(Shard { index: 2, of: 2 });
        assert_eq!(
            second_half,
            vec![
                FleetDevice {
                    number: 3,
                    token: "tok-3".into()
                },
                FleetDevice {
                    number: 4,
                    token: "tok-4".into()
                },
            ]
        );
        let list = FleetTokens::List(vec!["a".into(), "b".into(), "c".into()]);
        let first = list.devices(Shard { index: 1, of: 2 });
        assert_eq!(
            first.iter().map(|d| d.token.as_str()).collect::<Vec<_>>(),
            ["a"]
        );
    }
}
