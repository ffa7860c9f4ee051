//! fake-device's `act` steps, end to end: fake-device runs a scenario that plays a person at its
//! terminal, and fake-instance checks with a scenario of its own what that person's actions
//! look like on the link.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use harness::engine::Cell;
use harness::scenario::Side;

const BIN: &str = env!("CARGO_BIN_EXE_fake-device");

fn data(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

#[test]
fn a_person_at_the_terminal_shares_types_answers_leaves_deletes_and_edits_the_limits() {
    let scenario =
        harness::scenario::load_file(&data("terminal-instance.yaml"), Some(Side::Instance))
            .expect("the instance scenario loads");
    let root = tempfile::tempdir().expect("root");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let (addr_tx, addr_rx) = std::sync::mpsc::channel::<SocketAddr>();
    let options = fake_instance::Options {
        protocols: Some(vec![1, 2]),
        cell: Cell {
            protocol: 2,
            spec: "1.1.0".into(),
        },
        patience: Duration::from_secs(5),
        ..fake_instance::Options::default()
    };
    let instance = runtime.spawn(fake_instance::run(
        options,
        Some(scenario),
        move |addr| {
            let _ = addr_tx.send(addr);
        },
        std::future::pending(),
    ));
    let addr = addr_rx
        .recv_timeout(Duration::from_secs(5))
        .expect("fake-instance starts");
    let device = std::thread::spawn(move || {
        Command::new(BIN)
            .args(["--instance", &format!("http://{addr}")])
            .args(["--root", &root.path().display().to_string()])
            .arg("--scenario")
            .arg(data("terminal-device.yaml"))
            .arg("--scripts")
            .arg(data("deploy-scripts.yaml"))
            .output()
            .expect("fake-device runs")
    });
    let finished = runtime
        .block_on(async { tokio::time::timeout(Duration::from_secs(30), instance).await })
        .expect("the scenario ends")
        .expect("the instance task ends")
        .expect("fake-instance ran");
    let outcome = finished.outcome.expect("a verdict");
    assert!(
        outcome.passed(),
        "{}",
        harness::report::human::render("fake-instance", &outcome, &finished.recent)
    );
    let device = device.join().expect("the device's thread");
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
        err.to_string().contains("share_session and leave_session"),
        "{err}"
    );
    let instance = "name: x\nabout: y\nsteps:\n  - act: { share_session: true }\n";
    let err = harness::scenario::load_str(instance, "x.yaml", Some(Side::Instance))
        .expect_err("fake-instance has no such action");
    assert!(err.to_string().contains("x.yaml:4"), "{err}");
    assert!(err.to_string().contains("act.share_session"), "{err}");
}
