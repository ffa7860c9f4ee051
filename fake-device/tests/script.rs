//! The scripted agent (`--scripts`), end to end: fake-device runs as a process with a scripts
//! file, and fake-instance drives it with a scenario that checks what each step sends.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
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
fn a_scripted_turn_streams_its_steps_and_branches_on_the_card() {
    let scenario =
        harness::scenario::load_file(&data("deploy-instance.yaml"), Some(Side::Instance))
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
    let mut device = Command::new(BIN)
        .args(["--instance", &format!("http://{addr}")])
        .args(["--root", &root.path().display().to_string()])
        .arg("--scripts")
        .arg(data("deploy-scripts.yaml"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("fake-device starts");
    let finished = runtime
        .block_on(async { tokio::time::timeout(Duration::from_secs(30), instance).await })
        .expect("the scenario ends")
        .expect("the instance task ends")
        .expect("fake-instance ran");
    let _ = device.kill();
    let _ = device.wait();
    let outcome = finished.outcome.expect("a verdict");
    assert!(
        outcome.passed(),
        "{}",
        harness::report::human::render("fake-instance", &outcome, &finished.recent)
    );
}

#[test]
fn a_bad_scripts_file_is_a_usage_error_naming_file_line_and_key() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("scripts.yaml");
    std::fs::write(&path, "- when: \"(unclosed\"\n  steps: []\n").expect("written");
    let out = Command::new(BIN)
        .args(["--instance", "http://127.0.0.1:9", "--scripts"])
        .arg(&path)
        .output()
        .expect("runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("scripts.yaml:1"), "{err}");
    assert!(err.contains("when"), "{err}");
    assert!(err.contains("not a regex"), "{err}");

    std::fs::write(&path, "- steps:\n    - shout: hello\n").expect("written");
    let out = Command::new(BIN)
        .args(["--instance", "http://127.0.0.1:9", "--scripts"])
        .arg(&path)
        .output()
        .expect("runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("scripts.yaml:2"), "{err}");
    assert!(err.contains("shout"), "{err}");
}
