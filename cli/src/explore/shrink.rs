//! Shrinking a failing sequence: drop what can go while it still fails on the same rule, as
//! delta debugging does (halves first, then smaller pieces, down to single moves), so that what
//! is written is the smallest sequence this search found that still shows the fault.

use std::future::Future;
use std::time::Instant;

/// The shortest cut of `moves` for which `still_fails` holds, trying at most `budget` cuts (each
/// is a run of the system under test), `jobs` of them at once, and starting none after
/// `deadline`. `moves` itself is taken to fail.
///
/// Cuts run side by side are the ones the one-at-a-time search would try next, and the first of
/// them that fails is kept: with a system under test that answers a cut the same way each time,
/// the result does not depend on `jobs`, only the time it takes.
pub async fn shrink<T, F, Fut>(
    moves: Vec<T>,
    budget: usize,
    jobs: usize,
    deadline: Instant,
    mut still_fails: F,
) -> Shrunk<T>
where
    T: Clone,
    F: FnMut(Vec<T>) -> Fut,
    Fut: Future<Output = bool>,
{
    let jobs = jobs.max(1);
    let mut best = moves;
    let mut tried = 0;
    let mut out_of_time = false;
    let mut chunk = best.len().div_ceil(2).max(1);
    'sizes: loop {
        let mut start = 0;
        let mut removed_any = false;
        while start < best.len() {
            if tried >= budget {
                break 'sizes;
            }
            if Instant::now() >= deadline {
                out_of_time = true;
                break 'sizes;
            }
            // The next cuts, each dropping one chunk from `start` on.
            let starts: Vec<usize> = (start..best.len())
                .step_by(chunk)
                // A cut of nothing left is no sequence.
                .filter(|&at| at > 0 || chunk < best.len())
                .take(jobs.min(budget - tried))
                .collect();
            if starts.is_empty() {
                break;
            }
            let cuts: Vec<Vec<T>> = starts
                .iter()
                .map(|&at| {
                    let mut cut = best.clone();
                    cut.drain(at..(at + chunk).min(best.len()));
                    cut
                })
                .collect();
            tried += cuts.len();
            let verdicts = futures_util::future::join_all(
                cuts.iter()
                    .map(|cut| still_fails(cut.clone()))
                    .collect::<Vec<_>>(),
            )
            .await;
            match (0..cuts.len()).find(|&i| verdicts[i]) {
                Some(i) => {
                    start = starts[i];
                    best = cuts[i].clone();
                    removed_any = true;
                }
                None => start = starts.last().map_or(best.len(), |&at| at + chunk),
            }
        }
        if chunk == 1 && !removed_any {
            break;
        }
        if !removed_any {
            chunk = chunk.div_ceil(2);
        }
    }
    Shrunk {
        moves: best,
        tried,
        out_of_time,
    }
}

/// What shrinking kept, and how many runs it took.
#[derive(Debug)]
pub struct Shrunk<T> {
    /// The shortest failing cut found.
    pub moves: Vec<T>,
    /// How many cuts were run.
    pub tried: usize,
    /// Whether it stopped at its deadline with cuts still to try.
    pub out_of_time: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn it_keeps_only_what_the_failure_needs() {
        // Fails while 3 and 7 are both there, in order.
        let fails = |moves: Vec<u32>| async move {
            let three = moves.iter().position(|m| *m == 3);
            let seven = moves.iter().position(|m| *m == 7);
            matches!((three, seven), (Some(a), Some(b)) if a < b)
        };
        for jobs in [1, 4] {
            let shrunk = shrink((0..20).collect(), 200, jobs, far_off(), fails).await;
            assert_eq!(shrunk.moves, [3, 7], "{jobs} at once");
        }
    }

    #[tokio::test]
    async fn it_stops_at_its_budget_with_what_it_had() {
        let shrunk = shrink((0..20).collect::<Vec<u32>>(), 3, 2, far_off(), |_| async {
            false
        })
        .await;
        assert_eq!(shrunk.tried, 3);
        assert_eq!(shrunk.moves.len(), 20);
        assert!(!shrunk.out_of_time);
    }

    #[tokio::test]
    async fn it_starts_no_cut_after_its_deadline_and_says_so() {
        let shrunk = shrink(
            (0..20).collect::<Vec<u32>>(),
            200,
            2,
            Instant::now(),
            |_| async { true },
        )
        .await;
        assert_eq!(shrunk.tried, 0);
        assert_eq!(shrunk.moves.len(), 20);
        assert!(shrunk.out_of_time);
    }

    fn far_off() -> Instant {
        Instant::now() + std::time::Duration::from_secs(3600)
    }
}
