//! fake-device's `act` steps, end to end: fake-device runs a scenario that plays a person at its
//! terminal, and fake-instance checks with a scenario of its own what that person's actions
//! look like on the link.

mod common;

use std::process::Command;

use common::{BIN, data, instance_checks};
use harness::scenario::Side;

#[test]
fn a_person_at_the_terminal_shares_types_answers_leaves_deletes_and_edits_the_limits() {
    let root = tempfile::tempdir().expect("root");
    let mut device = None;
    let failed = instance_checks("terminal-instance.yaml", |url| {
        device = Some(std::thread::spawn(move || {
            Command::new(BIN)
                .args(["--instance", &url])
                .args(["--root", &root.path().display().to_string()])
                .arg("--scenario")
                .arg(data("terminal-device.yaml"))
                .arg("--scripts")
                .arg(data("deploy-scripts.yaml"))
                .output()
                .expect("fake-device runs")
        }));
    });
    assert!(failed.is_none(), "{}", failed.unwrap_or_default());
    let device = device
        .expect("started")
        .join()
        .expect("the device's thread");
    assert_eq!(
        device.status.code(),
        Some(0),
        "fake-device's own scenario: {}{}",
        String::from_utf8_lossy(&device.stdout),
        String::from_utf8_lossy(&device.stderr)
    );
}

#[test]
fn an_act_step_needs_exactly_one_action_and_belongs_to_fake_device() {
    let none = "name: x\nabout: y\nsteps:\n  - act: { capture: { a: b } }\n";
    let err =
        harness::scenario::load_str(none, "x.yaml", Some(Side::Device)).expect_err("no action");
    assert!(err.to_string().contains("exactly one action"), "{err}");
    let two = "name: x\nabout: y\nsteps:\n  - act: { share_session: true, leave_session: true }\n";
    let err =
        harness::scenario::load_str(two, "x.yaml", Some(Side::Device)).expect_err("two actions");
    assert!(
        err.to_string()
            .contains("not `share_session` and `leave_session`"),
        "{err}"
    );
    // The loader knows no double's actions; each double reads its own, and fake-instance has
    // no `share_session`.
    let instance = "name: x\nabout: y\nsteps:\n  - wait: 1s\n  - act: { share_session: true }\n";
    let scenario =
        harness::scenario::load_str(instance, "x.yaml", Some(Side::Instance)).expect("it loads");
    let err = harness::scenario::check_actions::<fake_instance::WebAction>(
        &scenario.steps,
        "steps",
        &scenario.source,
    )
    .expect_err("fake-instance has no such action");
    assert!(err.to_string().contains("x.yaml:5"), "{err}");
    assert!(err.to_string().contains("at `steps[1].act`"), "{err}");
    assert!(
        err.to_string().contains("unknown variant `share_session`"),
        "{err}"
    );
    assert!(
        harness::scenario::check_actions::<fake_device::DeviceAction>(
            &scenario.steps,
            "steps",
            &scenario.source,
        )
        .is_ok()
    );
}
