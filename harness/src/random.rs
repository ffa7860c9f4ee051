//! Every random choice the doubles make (ids, names, a redial's jitter) comes from here, so that
//! `--seed` makes a run repeat itself: the same scenario and seed draw the same values in the
//! same order.
//!
//! Unseeded, each draw comes from the thread's generator, as `rand::random` would. Seeded, all
//! draws of the process come from one generator in turn: a process running one scenario (the
//! doubles' command lines) draws in the order its steps make it, which is the same each time.

use std::sync::Mutex;

use rand::SeedableRng;
use rand::rngs::StdRng;

static SEEDED: Mutex<Option<StdRng>> = Mutex::new(None);

/// Seeds the process's draws from now on.
pub fn seed(seed: u64) {
    *SEEDED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(StdRng::seed_from_u64(seed));
}

/// Whether a seed was set (a seeded run also names its scratch folders after it).
pub fn seeded() -> bool {
    SEEDED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .is_some()
}

fn draw<T>(f: impl FnOnce(&mut dyn rand::RngCore) -> T) -> T {
    let mut seeded = SEEDED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    match seeded.as_mut() {
        Some(rng) => f(rng),
        None => f(&mut rand::rng()),
    }
}

/// A random `u64`.
pub fn u64() -> u64 {
    draw(|rng| rng.next_u64())
}

/// A random `u32`.
pub fn u32() -> u32 {
    draw(|rng| rng.next_u32())
}

/// Sixteen random bytes.
pub fn bytes16() -> [u8; 16] {
    draw(|rng| {
        let mut bytes = [0u8; 16];
        rng.fill_bytes(&mut bytes);
        bytes
    })
}

/// A random `f64` in `low..high`.
pub fn between(low: f64, high: f64) -> f64 {
    draw(|rng| {
        let unit = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        low + unit * (high - low)
    })
}

/// A new temporary folder. Seeded, its name comes from the seed and the program's name, so that
/// paths a run shows its peer (a device's roots) repeat too; the program's name keeps the two
/// doubles of one seeded run, which draw the same numbers, out of each other's folder. A folder
/// of that name already there (another run of the same seed, still going) gets a random name
/// instead, with a warning.
pub fn temp_dir() -> std::io::Result<tempfile::TempDir> {
    if seeded() {
        let program = std::env::current_exe()
            .ok()
            .and_then(|exe| exe.file_stem().map(|s| s.to_string_lossy().into_owned()))
            .unwrap_or_default();
        let name = format!(".lembas-seeded-{program}-{:08x}", u32());
        match tempfile::Builder::new()
            .prefix(&name)
            .rand_bytes(0)
            .tempdir()
        {
            Ok(dir) => return Ok(dir),
            Err(e) => tracing::warn!(
                "cannot make the seeded folder {name}: {e}; its name will not repeat"
            ),
        }
    }
    tempfile::tempdir()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The one test that seeds: the generator is the process's, and a test that seeds while
    /// another draws would make that one's draws predictable, which none relies on.
    #[test]
    fn a_seed_repeats_the_draws_and_each_kind_stays_in_its_range() {
        seed(7);
        let first = (u64(), u32(), bytes16(), between(0.5, 1.0));
        seed(7);
        let again = (u64(), u32(), bytes16(), between(0.5, 1.0));
        assert_eq!(first, again);
        assert!((0.5..1.0).contains(&first.3));
        seed(8);
        assert_ne!(u64(), first.0, "another seed, other draws");
        *SEEDED.lock().unwrap() = None;
        assert!(!seeded());
    }
}
