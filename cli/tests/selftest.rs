//! The self-test as a test: every shipped scenario passes against the other double behaving
//! well, and fails, naming the rule, against it breaking each rule the scenario checks.

use harness::scenario::Side;
use harness_cli::selftest::{judge_all, plan};

/// Both sides in one run, as `harness selftest` runs them: on one runtime, under one ceiling.
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
    // Sixteen at a time, not the command's 128: this is a debug build, where a case costs
    // several times the CPU of a release one. At 128, timers here ran up to 2 s late in a burst
    // of starts and a long model stream missed its 5 s window now and then (issue 16's note). At
    // eight the machine's two cores sat mostly idle (the cases wait on deadlines), and the test
    // took 434 s of CI's time; at sixteen 220 s, with the load average still near one. The
    // speed target is the release build's, measured by `harness selftest`
    // (docs/book/src/performance.md).
    let results = judge_all(cases, 16, false).await.results;
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

/// explore's part of the self-test: every bug planted for explore (which the case above shows
/// every scenario passing) is found from seed 1 within its time, shrunk to a few moves, and its
/// written scenario replays failing on the same rule; the well-behaved device gives no alarm.
#[tokio::test(flavor = "multi_thread")]
async fn explore_finds_each_planted_bug_and_raises_no_false_alarm() {
    assert!(
        !harness_cli::explore::planted::planted_ids().is_empty(),
        "no bug is planted for explore"
    );
    let results = harness_cli::explore::planted::explore_all().await;
    let wrong: Vec<String> = results
        .iter()
        .filter(|r| !r.ok)
        .map(|r| format!("{:?}: {}", r.misbehave, r.verdict))
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
