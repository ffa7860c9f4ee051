//! What every shipped scenario must be, beyond loading: a failure a real peer meets names the
//! rule it broke, in both protocol families.

use harness::family::Family;
use harness::scenario::catalogue::embedded_of;
use harness::scenario::{Side, Spanned, Step};

/// The steps that can fail the peer and name no rule, as `file:line key`.
fn unruled(steps: &[Spanned<Step>], file: &str, found: &mut Vec<String>) {
    for step in steps {
        unruled(step.value.inner(), file, found);
        if step.value.judges() == Some(None) {
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
