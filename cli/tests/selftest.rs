//! The self-test as a test: every shipped scenario passes against the other double behaving
//! well, and fails, naming the rule, against it breaking each rule the scenario checks.

use harness::scenario::Side;
use harness_cli::selftest::{judge_all, plan};

async fn side_holds(side: Side) {
    let (cases, unchecked) = plan(None).expect("the shipped scenarios load");
    assert!(
        unchecked.is_empty(),
        "misbehaviours no scenario checks: {unchecked:?}"
    );
    let cases: Vec<_> = cases.into_iter().filter(|c| c.side == side).collect();
    assert!(!cases.is_empty(), "no {side:?} scenarios shipped");
    // Eight at a time: with the default ceiling (128) on this 2-worker test runtime, beside the
    // other side's, a model stream stalls past its window (issue 16's note: not found yet);
    // `harness selftest`, on one runtime, runs the default.
    let results = judge_all(cases, 8, false).await;
    let wrong: Vec<String> = results
        .iter()
        .filter(|r| !r.ok)
        .map(|r| {
            format!(
                "{} [{}] {:?}: {}\n{}",
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fake_instance_scenarios_hold_against_fake_device() {
    side_holds(Side::Instance).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fake_device_scenarios_hold_against_fake_instance() {
    side_holds(Side::Device).await;
}
