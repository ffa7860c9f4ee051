//! The self-test's part for `harness explore`: each bug planted for explore in either double (a
//! way with `found_by: explore`, which every scenario passes) is found from a fixed seed within
//! the time the issue gives, shrunk to a few moves, and the scenario written for it replays and
//! fails on the same rule; and a short exploration of each well-behaved double finds nothing.

use std::time::Duration;

use harness::engine::{Cell, Verdict};
use harness::lembas::Spec;
use harness::rules::{Binds, FoundBy, catalogue};
use harness::scenario::{Family, Side};

use super::sequence::Moves;
use super::{Budget, Explorer, Target, cli_moves, server_moves};
use crate::Error;

/// The seed every self-test exploration draws from: the same sequences on every run.
pub const SEED: u64 = 1;
/// The most moves a planted bug's shrunk sequence may have.
pub const MOST_SHRUNK_MOVES: usize = 8;
/// How long an exploration may look for a planted bug.
const TIME_TO_FIND: Duration = Duration::from_secs(60);
/// How many sequences each well-behaved double is given.
const WELL_BEHAVED_RUNS: u64 = 8;
/// How many sequences (or cuts) of one exploration run at once: they mostly wait on turns.
const JOBS: usize = 8;
/// fake-device's pause between a turn's steps: a turn of about a second, as a short one of a
/// real model, so that prompts meet a turn still running.
const STEP_DELAY: Duration = Duration::from_millis(400);

/// What one exploration of the self-test came to.
#[derive(Debug)]
pub struct PlantedResult {
    /// The double explored: the one the bug is planted in, or the well-behaved one.
    pub double: &'static str,
    /// The misbehaviour explored (`RULE/WAY`), or none for the well-behaved double.
    pub misbehave: Option<String>,
    /// Whether it came out as it should.
    pub ok: bool,
    /// One line for the table.
    pub verdict: String,
    /// How long it took, shrinking and the replay included.
    pub elapsed: Duration,
}

/// The bugs planted for explore, in fake-device (the devices' rules) and in fake-instance (the
/// instances'): their ids (`RULE/WAY`).
pub fn planted_ids() -> Vec<String> {
    let of = |binds| catalogue().misbehaviours_of(binds).collect::<Vec<_>>();
    [of(Binds::Device), of(Binds::Instance)]
        .into_iter()
        .flatten()
        .filter(|rule| rule.family == Family::Lembas)
        .flat_map(|rule| {
            rule.misbehaviour_ids()
                .into_iter()
                .filter(|(id, _, _)| rule.found_by(id) == FoundBy::Explore)
                .map(|(id, _, _)| id)
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Explores each planted bug and each well-behaved double, side by side (they mostly wait on
/// turns), and judges each.
pub async fn explore_all() -> Vec<PlantedResult> {
    let mut all: Vec<(Side, Option<String>)> = planted_ids()
        .into_iter()
        .map(|id| (side_exploring(&id), Some(id)))
        .collect();
    all.extend([(Side::Instance, None), (Side::Device, None)]);
    let mut runs = tokio::task::JoinSet::new();
    for (at, (side, misbehave)) in all.into_iter().enumerate() {
        runs.spawn(async move {
            let began = std::time::Instant::now();
            let judged = match side {
                Side::Instance => explore_one::<cli_moves::Move>(misbehave.clone()).await,
                Side::Device => explore_one::<server_moves::Move>(misbehave.clone()).await,
            };
            let (ok, verdict) = judged.unwrap_or_else(|e| (false, format!("ERROR {e}")));
            let result = PlantedResult {
                double: match side {
                    Side::Instance => "fake-device",
                    Side::Device => "fake-instance",
                },
                misbehave,
                ok,
                verdict,
                elapsed: began.elapsed(),
            };
            (at, result)
        });
    }
    let mut results: Vec<(usize, PlantedResult)> = runs.join_all().await.into_iter().collect();
    results.sort_by_key(|(at, _)| *at);
    results.into_iter().map(|(_, result)| result).collect()
}

/// Which double explores a bug planted for a rule: fake-instance a device's, fake-device an
/// instance's.
fn side_exploring(id: &str) -> Side {
    let rule = catalogue().get(harness::rules::rule_of(id));
    match rule.map(|r| r.binds) {
        Some(Binds::Instance) => Side::Device,
        _ => Side::Instance,
    }
}

/// Explores the other double breaking `misbehave` (or well-behaved) with `M`'s moves: whether
/// it came out as it should, and the verdict's line.
async fn explore_one<M: Moves>(misbehave: Option<String>) -> Result<(bool, String), Error> {
    let cell = Cell::lembas(2, Spec::V1_1_0);
    let explorer = Explorer {
        target: Target::Double {
            misbehave: misbehave.clone(),
            step_delay: STEP_DELAY,
        },
        cell,
        seed: SEED,
        budget: Budget {
            time: TIME_TO_FIND,
            runs: misbehave.is_none().then_some(WELL_BEHAVED_RUNS),
            max_steps: 12,
            shrink_runs: 60,
            jobs: JOBS,
        },
        say: false,
    };
    let explored = explorer.explore::<M>().await?;
    let Some(misbehave) = misbehave else {
        return Ok(match explored.found {
            None => (
                true,
                format!(
                    "nothing found in {} sequences ({} moves), as it should",
                    explored.sequences, explored.moves
                ),
            ),
            Some(found) => (
                false,
                format!(
                    "FALSE ALARM: {} broken by the well-behaved double\n{}",
                    found.rule, found.scenario
                ),
            ),
        });
    };
    let rule = harness::rules::rule_of(&misbehave).to_string();
    let Some(found) = explored.found else {
        return Ok((
            false,
            format!(
                "MISSED: nothing found in {} sequences in {:.0}s",
                explored.sequences,
                explored.elapsed.as_secs_f64()
            ),
        ));
    };
    if found.found_after > TIME_TO_FIND {
        return Ok((
            false,
            format!(
                "found only after {:.0}s (at most {}s)",
                found.found_after.as_secs_f64(),
                TIME_TO_FIND.as_secs()
            ),
        ));
    }
    if found.rule != rule {
        return Ok((
            false,
            format!(
                "MISSED: found {} but not {rule}\n{}",
                found.rule, found.scenario
            ),
        ));
    }
    if found.moves_after > MOST_SHRUNK_MOVES {
        return Ok((
            false,
            format!(
                "found, but shrunk only to {} moves (at most {MOST_SHRUNK_MOVES})\n{}",
                found.moves_after, found.scenario
            ),
        ));
    }
    let replayed = replay::<M>(&found.scenario, &misbehave, cell).await?;
    Ok(match replayed {
        Some(broken) if broken.contains(&rule) => (
            true,
            format!(
                "found in {:.0}s after {} sequences, shrunk from {} to {} moves in {:.0}s; the scenario replays",
                found.found_after.as_secs_f64(),
                explored.sequences,
                found.moves_before,
                found.moves_after,
                (explored.elapsed - found.found_after).as_secs_f64()
            ),
        ),
        said => (
            false,
            format!(
                "found, but its scenario replayed {}\n{}",
                said.map_or("passing".to_string(), |b| format!(
                    "failing on {}",
                    b.join(", ")
                )),
                found.scenario
            ),
        ),
    })
}

/// Runs a finding's scenario once more against the same misbehaving double: the rules it
/// broke, or none when it passed.
async fn replay<M: Moves>(
    text: &str,
    misbehave: &str,
    cell: Cell,
) -> Result<Option<Vec<String>>, Error> {
    let scenario = harness::scenario::load_str(text, "explored.yaml", Some(M::SIDE))
        .map_err(|e| Error::Explored(format!("{e}\n{text}")))?;
    let (outcome, _) = match M::SIDE {
        Side::Instance => {
            super::in_process::against_device(&scenario, cell, Some(misbehave), STEP_DELAY).await?
        }
        Side::Device => {
            super::in_process::against_instance(&scenario, cell, Some(misbehave)).await?
        }
    };
    Ok(match outcome.verdict() {
        Verdict::Failed => Some(outcome.broken_rules()),
        _ => None,
    })
}
