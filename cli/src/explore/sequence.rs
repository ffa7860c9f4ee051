//! What a side's explorer is made of: the moves its double draws from a seed and the scenario a
//! sequence of them is written as. A leaf room: the explorer runs any side's moves through it,
//! and each side's moves know nothing of the explorer.

use harness::scenario::Side;

/// What a generated sequence may hold.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// The most moves a sequence has.
    pub max_steps: usize,
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
