//! `--seed` makes a run repeat itself (issue 16): fake-instance plays a scenario against
//! fake-device, both seeded, twice; the journals each writes are byte-identical. Another seed
//! gives other ids, so the match is the seed's doing, not a scenario with nothing random in it.

use std::path::Path;
use std::process::Command;

mod common;

use common::{binary, root};

/// A scenario with sessions (random ids), turns with attachments (random file names) and a
/// web chat (message ids), whose messages never cross on the wire.
const SCENARIO: &str = "history";

/// Runs the scenario seeded with `seed`; the two journals' texts (instance's, device's).
fn run(seed: u64, dir: &Path) -> (String, String) {
    std::fs::create_dir_all(dir).expect("a folder");
    let (instance, device) = (dir.join("instance.jsonl"), dir.join("device.jsonl"));
    let exec = format!(
        "exec {} --instance {{url}} --token {{token}} --root {{root}} --seed {seed} --journal {}",
        binary("fake-device").display(),
        device.display()
    );
    let out = Command::new(binary("fake-instance"))
        .args([
            "--scenario",
            SCENARIO,
            "--quiet",
            "--seed",
            &seed.to_string(),
        ])
        .arg("--journal")
        .arg(&instance)
        .args(["--exec", &exec])
        .current_dir(root())
        .output()
        .expect("fake-instance runs");
    assert!(
        out.status.success(),
        "the run failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let read = |p: &Path| std::fs::read_to_string(p).expect("a journal");
    (read(&instance), read(&device))
}

/// Fails on the first line where `again` differs from `first`, showing both.
fn same(first: &str, again: &str, whose: &str) {
    let mut lines = first.lines().zip(again.lines()).enumerate();
    if let Some((n, (a, b))) = lines.find(|(_, (a, b))| a != b) {
        panic!(
            "{whose}'s journal differs at line {}:\n first: {a}\n again: {b}",
            n + 1
        );
    }
    assert_eq!(
        first.lines().count(),
        again.lines().count(),
        "{whose}'s journal has another length"
    );
}

#[test]
fn the_same_scenario_and_seed_give_byte_identical_journals() {
    let scratch = tempfile::tempdir().expect("scratch");
    let first = run(7, &scratch.path().join("first"));
    let again = run(7, &scratch.path().join("again"));
    assert!(
        first.0.lines().count() >= 20,
        "a run worth comparing:\n{}",
        first.0
    );
    assert!(first.0.contains("ses_"), "session ids are in it");
    same(&first.0, &again.0, "fake-instance");
    same(&first.1, &again.1, "fake-device");
    let other = run(8, &scratch.path().join("other"));
    assert_ne!(first.0, other.0, "another seed, other ids");
}
