//! The device under test as a process fake-instance starts (`--exec`, `sut:`): the process
//! steps pass and fail as they should, a restart starts it again on the same state, and no
//! process it started outlives the run, whether the run passed, failed, timed out or was
//! interrupted.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;

const BIN: &str = env!("CARGO_BIN_EXE_fake-instance");

/// A scenario in a file of its own, with the steps given (its device is the `--exec` one).
fn scenario(dir: &Path, steps: &str) -> PathBuf {
    let path = dir.join("scenario.yaml");
    std::fs::write(
        &path,
        format!("name: sut\nabout: the process under test\ntimeout: 5s\nsteps:\n{steps}"),
    )
    .expect("the scenario is written");
    path
}

/// A device that writes a grandchild's pid to `pids`, prints `up`, and waits on it (ignoring
/// SIGTERM: the worst case a stop meets).
fn stubborn_device(pids: &Path) -> String {
    format!(
        "trap '' TERM; sleep 300 & echo $! >> {}; echo up; wait",
        pids.display()
    )
}

fn start(args: &[&str]) -> Child {
    Command::new(BIN)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("fake-instance starts")
}

/// Waits for the process, at most `limit`; gives its exit code and stdout.
fn finish(mut child: Child, limit: Duration) -> (i32, String) {
    let code = common::wait(&mut child, limit);
    let mut out = String::new();
    if let Some(mut stdout) = child.stdout.take() {
        let _ = stdout.read_to_string(&mut out);
    }
    (code, out)
}

/// Every pid the device wrote is gone (soon after the run: the kill is asynchronous).
fn assert_none_outlived(path: &Path) {
    common::pids::assert_none_outlived(
        path,
        Duration::from_secs(2),
        "the device never started its grandchild",
    );
}

fn run_with(steps: &str, device: &str) -> (i32, String, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("dir");
    let file = scenario(dir.path(), steps);
    let child = start(&[
        "--scenario",
        file.to_str().expect("utf-8"),
        "--exec",
        device,
    ]);
    let (code, out) = finish(child, Duration::from_secs(30));
    (code, out, dir)
}

#[cfg(unix)]
#[test]
fn no_process_outlives_a_passing_run() {
    let pids = tempfile::NamedTempFile::new().expect("file");
    let (code, out, _dir) = run_with(
        "  - expect_output: { pattern: \"^up$\", stream: stdout }\n",
        &stubborn_device(pids.path()),
    );
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("stopped by the run (killed by signal 9)"),
        "{out}"
    );
    assert_none_outlived(pids.path());
}

#[cfg(unix)]
#[test]
fn no_process_outlives_a_failing_run_and_the_report_shows_its_output() {
    let pids = tempfile::NamedTempFile::new().expect("file");
    let (code, out, _dir) = run_with(
        "  - expect_output: { pattern: never printed, within: 300ms, rule: device.link.dial }\n",
        &stubborn_device(pids.path()),
    );
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("no line of stdout or stderr matched `never printed`"),
        "{out}"
    );
    assert!(out.contains("its last output"), "{out}");
    assert!(out.contains("stdout up"), "{out}");
    assert_none_outlived(pids.path());
}

#[cfg(unix)]
#[test]
fn no_process_outlives_a_run_whose_step_timed_out() {
    let pids = tempfile::NamedTempFile::new().expect("file");
    let (code, out, _dir) = run_with(
        "  - expect_exit: { within: 300ms, rule: device.link.dial }\n",
        &stubborn_device(pids.path()),
    );
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("the process still ran after 300ms"), "{out}");
    assert_none_outlived(pids.path());
}

#[cfg(unix)]
#[test]
fn no_process_outlives_an_interrupted_run() {
    let pids = tempfile::NamedTempFile::new().expect("file");
    let dir = tempfile::tempdir().expect("dir");
    let file = scenario(dir.path(), "  - wait: 60s\n");
    let device = stubborn_device(pids.path());
    let child = start(&[
        "--scenario",
        file.to_str().expect("utf-8"),
        "--exec",
        &device,
    ]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while common::pids::pids_in(pids.path()).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: kill(2) on the child we started.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    let (code, _) = finish(child, Duration::from_secs(20));
    assert_eq!(code, harness::Exit::Interrupted as i32);
    assert_none_outlived(pids.path());
}

#[cfg(unix)]
#[test]
fn expect_exit_checks_the_code_and_expect_output_the_sentence() {
    let device = "echo 'the instance and this CLI speak different link protocols' >&2; exit 4";
    let (code, out, _dir) = run_with(
        "  - expect_output: { pattern: different link protocols, stream: stderr, rule: device.link.dial }\n  - expect_exit: { code: 4, within: 2s, rule: device.link.dial }\n",
        device,
    );
    assert_eq!(code, 0, "{out}");
    // The same device, held to another code and to the other stream: both checks can fail.
    let (code, out, _dir) = run_with(
        "  - expect_exit: { code: 0, within: 2s, rule: device.link.dial }\n",
        device,
    );
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("ended with exit code 4, not exit code 0"),
        "{out}"
    );
    let (code, out, _dir) = run_with(
        "  - expect_output: { pattern: different link protocols, stream: stdout, within: 500ms, rule: device.link.dial }\n",
        device,
    );
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("stderr the instance and this CLI"), "{out}");
}

#[cfg(unix)]
#[test]
fn restart_peer_starts_it_again_on_the_same_state() {
    let device = "echo start >> {tmp}/starts; echo \"start $(wc -l < {tmp}/starts)\"; sleep 300";
    let (code, out, _dir) = run_with(
        "  - expect_output: { pattern: \"^start 1$\", rule: device.link.dial }\n  - restart_peer: {}\n  - expect_output: { pattern: \"^start 2$\", rule: device.link.dial }\n",
        device,
    );
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("start 2 (pid"), "{out}");
}

#[test]
fn a_process_step_without_a_process_is_not_applicable() {
    let dir = tempfile::tempdir().expect("dir");
    let file = scenario(dir.path(), "  - restart_peer: {}\n");
    let child = start(&["--scenario", file.to_str().expect("utf-8")]);
    let (code, out) = finish(child, Duration::from_secs(30));
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("NOT APPLICABLE: needs the peer's process"),
        "{out}"
    );
}

#[cfg(unix)]
#[test]
fn a_device_that_exits_before_it_links_fails_at_once_with_its_output() {
    let started = Instant::now();
    let (code, out, _dir) = run_with(
        "  - expect_link: { within: 30s, rule: device.link.dial }\n",
        "echo 'error: --capabilities: `rewind` is not a capability' >&2; exit 2",
    );
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("the peer's process ended (exit code 2) while the step waited"),
        "{out}"
    );
    assert!(out.contains("is not a capability"), "{out}");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "it waited out the step"
    );
}
