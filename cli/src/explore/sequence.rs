//! What a side's explorer is made of: the moves its double draws from a seed and the scenario a
//! sequence of them is written as. A leaf room: the explorer runs any side's moves through it,
//! and each side's moves know nothing of the explorer.

use harness::scenario::Side;
use rand::Rng;
use rand::rngs::StdRng;

/// What a generated sequence may hold.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// The most moves a sequence has.
    pub max_steps: usize,
    /// Whether the system under test may be restarted in a sequence (`restart_peer`) with the
    /// other lane going on.
    pub restarts: bool,
}

impl Limits {
    /// The kinds of `all` a sequence may draw from: all of them, less `restart` where the
    /// system under test may not be restarted.
    pub fn allowed<K: Copy + PartialEq>(&self, all: &[(K, u32)], restart: K) -> Vec<(K, u32)> {
        all.iter()
            .copied()
            .filter(|(kind, _)| self.restarts || *kind != restart)
            .collect()
    }
}

/// One side's moves: a sequence of them is drawn from a seed, cut while shrinking, and written
/// as a scenario of that side, valid however it was cut.
pub trait Moves: Sized + Clone + std::fmt::Debug + PartialEq + Send + Sync + 'static {
    /// The side whose double runs the scenario the moves make.
    const SIDE: Side;
    /// The double that explores, as reports name it.
    const DOUBLE: &'static str;
    /// The sequence of run `run` under `seed`: the same pair always gives the same moves.
    fn generate(seed: u64, run: u64, limits: Limits) -> Vec<Self>;
    /// The scenario `moves` make; `broken` is a rule the sequence was found to break, listed so
    /// a replay reports it as judged.
    fn scenario_text(name: &str, about: &str, moves: &[Self], broken: Option<&str>) -> String;
    /// What judges a sequence beyond the double's monitors, for the line that says nothing was
    /// found.
    fn judged_by() -> String;
}

/// The kinds of move one sequence draws from, as swarm testing picks them: each kind but
/// `kept` has an even chance to be left out (the rate swarm testing was proposed with), so that
/// a sequence of few kinds reaches deep into one part of the peer where one spread over every
/// kind seldom does.
#[derive(Debug)]
pub struct Swarm<K> {
    kinds: Vec<(K, u32)>,
    total: u32,
    kept: K,
}

impl<K: Copy + PartialEq> Swarm<K> {
    /// The kinds of `all` (each with its weight) this sequence keeps; `kept` always stays.
    pub fn new(rng: &mut StdRng, all: &[(K, u32)], kept: K) -> Self {
        let kinds: Vec<(K, u32)> = all
            .iter()
            .copied()
            .filter(|(kind, _)| *kind == kept || rng.random_range(0..2) > 0)
            .collect();
        let total = kinds.iter().map(|(_, weight)| weight).sum();
        Self { kinds, total, kept }
    }

    /// The next kind, drawn by weight.
    pub fn draw(&self, rng: &mut StdRng) -> K {
        let mut at = rng.random_range(0..self.total.max(1));
        self.kinds
            .iter()
            .find(|(_, weight)| {
                let here = at < *weight;
                at = at.saturating_sub(*weight);
                here
            })
            .map_or(self.kept, |(kind, _)| *kind)
    }
}

/// `text` as a double-quoted YAML string.
pub fn yaml_string(text: &str) -> String {
    serde_json::Value::String(text.to_string()).to_string()
}

/// What every side's moves must hold, each side's tests run for its own.
#[cfg(test)]
pub mod laws {
    use crate::explore::sequence::{Limits, Moves};

    /// A seed gives the same moves each time and another seed others, within the limits.
    pub fn a_seed_gives_the_same_moves<M: Moves>() {
        let limits = Limits {
            max_steps: 12,
            restarts: true,
        };
        assert_eq!(M::generate(7, 0, limits), M::generate(7, 0, limits));
        assert_ne!(M::generate(7, 0, limits), M::generate(8, 0, limits));
        assert!(M::generate(7, 3, limits).len() <= 12);
    }

    /// Every sequence, with any one move cut, is still a scenario of its side that loads.
    pub fn every_cut_is_a_scenario<M: Moves>() {
        let limits = Limits {
            max_steps: 16,
            restarts: true,
        };
        for run in 0..40 {
            let moves = M::generate(1, run, limits);
            for cut in 0..moves.len() {
                let mut shorter = moves.clone();
                shorter.remove(cut);
                let text = M::scenario_text("explored", "a cut sequence", &shorter, None);
                harness::scenario::load_str(&text, "explored.yaml", Some(M::SIDE))
                    .unwrap_or_else(|e| panic!("{e}\n{text}"));
            }
        }
    }
}
