//! The self-test as a test: every shipped scenario passes against the other double behaving
//! well, and fails, naming the rule, against it breaking each rule the scenario checks.

use harness::scenario::Side;
use harness_cli::selftest::{judge_all, plan};

/// Both sides in one run, as `harness selftest` runs them: on one runtime, under one ceiling.
/// (Two tests, each a side on its own 2-worker runtime, put twice the work on the machine's two
/// cores at once, and a long-streamed model answer came late past its window.)
#[tokio::test(flavor = "multi_thread")]
async fn every_scenario_holds_against_the_other_double() {
    let (cases, unchecked) = plan(None).expect("the shipped scenarios load");
    assert!(
        unchecked.is_empty(),
        "misbehaviours no scenario checks: {unchecked:?}"
    );
    for side in [Side::Instance, Side::Device] {
        assert!(
            cases.iter().any(|c| c.side == side),
            "no {side:?} scenarios shipped"
        );
    }
    // The command's default ceiling, paced by the machine's CPU (`pace`).
    let results = judge_all(cases, 128, false).await;
    let wrong: Vec<String> = results
        .iter()
        .filter(|r| !r.ok)
        .map(|r| {
            format!(
                "{:?} {} [{}] {:?}: {}\n{}",
                r.case.side,
                r.case.file,
                r.case.cell,
                r.case.misbehave,
                r.verdict,
                r.report.clone().unwrap_or_default()
            )
        })
        .collect();
    assert!(
        wrong.is_empty(),
        "{} of {} cases went wrong:\n{}",
        wrong.len(),
        results.len(),
        wrong.join("\n")
    );
}
