//! What every shipped scenario must be, beyond loading: a failure a real peer meets names the
//! rule it broke, in both protocol families.

use harness::family::Family;
use harness::scenario::catalogue::embedded_of;
use harness::scenario::{Side, Spanned, Step};

/// The steps that can fail the peer and name no rule, as `file:line key`.
fn unruled(steps: &[Spanned<Step>], file: &str, found: &mut Vec<String>) {
    for step in steps {
        let rule = match &step.value {
            Step::Request(s) => Some(&s.rule),
            Step::Await(s) => Some(&s.rule),
            Step::Expect(s) => Some(&s.rule),
            Step::ExpectNone(s) => Some(&s.rule),
            Step::Check(s) => Some(&s.rule),
            Step::ExpectClose(s) => Some(&s.rule),
            Step::ExpectLink(s) => Some(&s.rule),
            Step::ExpectReconnect(s) => Some(&s.rule),
            Step::ExpectNoReconnect(s) => Some(&s.rule),
            Step::Dial(s) => Some(&s.rule),
            Step::ExpectExit(s) => Some(&s.rule),
            Step::ExpectOutput(s) => Some(&s.rule),
            Step::AnyOrder(inner) => {
                unruled(inner, file, found);
                None
            }
            Step::When(w) => {
                unruled(&w.steps, file, found);
                None
            }
            // Acting, sending and waiting judge nothing of the peer.
            Step::Notify(_)
            | Step::Start(_)
            | Step::Reply(_)
            | Step::Send(_)
            | Step::Wait(_)
            | Step::Close(_)
            | Step::Act(_)
            | Step::RestartPeer(_)
            | Step::WaitForSignal(_) => None,
        };
        if rule.is_some_and(|r| r.is_none()) {
            found.push(format!(
                "{file}:{} {}",
                step.referenced.line(),
                harness::scenario::load::step_key(&step.value)
            ));
        }
    }
}

#[test]
fn every_step_that_can_fail_the_peer_names_the_rule_it_checks() {
    let mut found = Vec::new();
    let every = Family::ALL
        .into_iter()
        .flat_map(|family| [(family, Side::Instance), (family, Side::Device)]);
    for (family, side) in every {
        for file in embedded_of(side, family) {
            let scenario = file.load().unwrap_or_else(|e| panic!("{e}"));
            unruled(&scenario.steps, &file.label(), &mut found);
        }
    }
    assert!(
        found.is_empty(),
        "steps that would fail a peer without naming a rule:\n{}",
        found.join("\n")
    );
}
