//! The self-test's part for `harness explore`: each bug planted in fake-device for explore (a
//! way with `found_by: explore`, which every scenario passes) is found from a fixed seed within
//! the time the issue gives, shrunk to a few moves, and the scenario written for it replays and
//! fails on the same rule; and a short exploration of the well-behaved fake-device finds nothing.

use std::time::Duration;

use harness::engine::{Cell, Verdict};
use harness::lembas::Spec;
use harness::rules::{Binds, FoundBy, catalogue};
use harness::scenario::{Family, Side};

use super::{Budget, Explorer, Target};
use crate::Error;

/// The seed every self-test exploration draws from: the same sequences on every run.
pub const SEED: u64 = 1;
/// The most moves a planted bug's shrunk sequence may have.
pub const MOST_SHRUNK_MOVES: usize = 8;
/// How long an exploration may look for a planted bug.
const TIME_TO_FIND: Duration = Duration::from_secs(60);
/// How many sequences the well-behaved device is given.
const WELL_BEHAVED_RUNS: u64 = 8;
/// How many sequences (or cuts) of one exploration run at once: they mostly wait on turns.
const JOBS: usize = 8;
/// fake-device's pause between a turn's steps: a turn of about a second, as a short one of a
/// real model, so that prompts meet a turn still running.
const STEP_DELAY: Duration = Duration::from_millis(400);

/// What one exploration of the self-test came to.
#[derive(Debug)]
pub struct PlantedResult {
    /// The misbehaviour explored (`RULE/WAY`), or none for the well-behaved device.
    pub misbehave: Option<String>,
    /// Whether it came out as it should.
    pub ok: bool,
    /// One line for the table.
    pub verdict: String,
    /// How long it took, shrinking and the replay included.
    pub elapsed: Duration,
}

/// The bugs planted for explore in the devices' rules: their ids (`RULE/WAY`).
pub fn planted_ids() -> Vec<String> {
    catalogue()
        .misbehaviours_of(Binds::Device)
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

/// Explores each planted bug and the well-behaved device, side by side (they mostly wait on
/// turns), and judges each.
pub async fn explore_all() -> Vec<PlantedResult> {
    let mut all: Vec<Option<String>> = planted_ids().into_iter().map(Some).collect();
    all.push(None);
    let mut runs = tokio::task::JoinSet::new();
    for (at, misbehave) in all.into_iter().enumerate() {
        runs.spawn(async move {
            let began = std::time::Instant::now();
            let (ok, verdict) = match explore_one(misbehave.clone()).await {
                Ok(judged) => judged,
                Err(e) => (false, format!("ERROR {e}")),
            };
            let result = PlantedResult {
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

/// Explores fake-device breaking `misbehave` (or well-behaved): whether it came out as it
/// should, and the verdict's line.
async fn explore_one(misbehave: Option<String>) -> Result<(bool, String), Error> {
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
    let explored = explorer.explore().await?;
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
                    "FALSE ALARM: {} broken by the well-behaved device\n{}",
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
    let replayed = replay(&found.scenario, &misbehave, cell).await?;
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

/// Runs a finding's scenario once more against the same misbehaving device: the rules it broke,
/// or none when it passed.
async fn replay(text: &str, misbehave: &str, cell: Cell) -> Result<Option<Vec<String>>, Error> {
    let scenario = harness::scenario::load_str(text, "explored.yaml", Some(Side::Instance))
        .map_err(|e| Error::Explored(format!("{e}\n{text}")))?;
    let (outcome, _) = super::in_process::run(&scenario, cell, Some(misbehave), STEP_DELAY).await?;
    Ok(match outcome.verdict() {
        Verdict::Failed => Some(outcome.broken_rules()),
        _ => None,
    })
}
