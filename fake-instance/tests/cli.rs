//! The fake-instance command's contract, run as a process: the ready line, exit codes, reports,
//! journal, usage errors and signals. The device is fake-device's library.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fake_device::ProtocolChoice;
use harness::engine::Cell;
use harness::rules::{Binds, Misbehaviours};

mod common;

const BIN: &str = env!("CARGO_BIN_EXE_fake-instance");

/// Starts fake-instance and reads its ready line.
fn start(args: &[&str]) -> (Child, String, BufReader<std::process::ChildStdout>) {
    let mut child = Command::new(BIN)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("fake-instance starts");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    stdout.read_line(&mut line).expect("a ready line");
    let url = line
        .trim()
        .strip_prefix("listening ")
        .unwrap_or_else(|| panic!("ready line is `listening URL`, got {line:?}"))
        .to_string();
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    (child, url, stdout)
}

/// Links a fake device (the library) to `url` until `stop` fires.
fn device(
    url: String,
    protocol: u8,
    spec: &str,
    misbehave: &[&str],
) -> (
    std::thread::JoinHandle<()>,
    tokio::sync::oneshot::Sender<()>,
) {
    let misbehave = Misbehaviours::parse(
        &misbehave.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
        Binds::Device,
    )
    .expect("known misbehaviours");
    let spec: harness::lembas::Spec = spec.parse().expect("a spec this suite implements");
    device_with(url, move |options| {
        options.cell = Cell::lembas(protocol, spec);
        options.misbehave = misbehave;
    })
}

/// Links a fake device (the library) to `url`, its options changed by `shape`, until `stop`
/// fires.
fn device_with(
    url: String,
    shape: impl FnOnce(&mut fake_device::Options) + Send + 'static,
) -> (
    std::thread::JoinHandle<()>,
    tokio::sync::oneshot::Sender<()>,
) {
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let handle = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let mut options = fake_device::Options::for_instance(url);
        shape(&mut options);
        let _ = runtime.block_on(fake_device::run(options, None, async {
            let _ = stop_rx.await;
        }));
    });
    (handle, stop_tx)
}

fn rest(mut stdout: BufReader<std::process::ChildStdout>) -> String {
    let mut text = String::new();
    let _ = stdout.read_to_string(&mut text);
    text
}

#[test]
fn negotiate_passes_and_writes_reports_and_journal() {
    let dir = tempfile::tempdir().expect("tmp");
    let junit = dir.path().join("r.xml");
    let json = dir.path().join("r.json");
    let journal = dir.path().join("j.jsonl");
    let (mut child, url, stdout) = start(&[
        "--scenario",
        "negotiate.yaml",
        "--protocol",
        "1",
        "--spec",
        "1.0.0",
        "--report",
        &format!("junit:{}", junit.display()),
        "--report",
        &format!("json:{}", json.display()),
        "--journal",
        &journal.to_string_lossy(),
    ]);
    let (device, stop) = device(url, 1, "1.0.0", &[]);
    let code = common::wait(&mut child, Duration::from_secs(20));
    let _ = stop.send(());
    let _ = device.join();
    let out = rest(stdout);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("PASSED"), "{out}");
    let junit = std::fs::read_to_string(junit).expect("junit written");
    assert!(
        junit.contains("<testsuite") && junit.contains("negotiate"),
        "{junit}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(json).expect("json written"))
            .expect("json report parses");
    assert_eq!(json["passed"], true);
    let journal = std::fs::read_to_string(journal).expect("journal written");
    let lines: Vec<serde_json::Value> = journal
        .lines()
        .map(|l| serde_json::from_str(l).expect("journal lines are JSON"))
        .collect();
    assert!(
        lines
            .iter()
            .any(|l| l["dir"] == "in" && l["msg"]["method"] == "_lembas/hello"),
        "{journal}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l["dir"] == "out" && l["msg"]["method"] == "initialize"),
        "{journal}"
    );
    assert!(
        !journal.contains(fake_instance::DEFAULT_TOKEN),
        "tokens never reach the journal"
    );
}

#[test]
fn a_misbehaving_device_fails_with_exit_1_naming_the_rule() {
    let (mut child, url, stdout) = start(&["--scenario", "negotiate", "--protocol", "2"]);
    let (device, stop) = device(url, 2, "1.1.0", &["device.initialize.protocol"]);
    let code = common::wait(&mut child, Duration::from_secs(20));
    let _ = stop.send(());
    let _ = device.join();
    let out = rest(stdout);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("FAIL") && out.contains("device.initialize.protocol"),
        "{out}"
    );
}

#[test]
fn set_up_nothing_arranges_is_not_applicable_exit_0_or_1_when_strict() {
    let dir = tempfile::tempdir().expect("tmp");
    let junit = dir.path().join("r.xml");
    let json = dir.path().join("r.json");
    let (code, out, _) = run(&[
        "--scenario",
        "pending-deletes.yaml",
        "--report",
        &format!("junit:{}", junit.display()),
        "--report",
        &format!("json:{}", json.display()),
    ]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("NOT APPLICABLE: needs hook `delete_unlinked`"),
        "{out}"
    );
    let junit = std::fs::read_to_string(junit).expect("junit written");
    assert!(
        junit.contains("<skipped message=\"not applicable: needs hook `delete_unlinked`"),
        "{junit}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(json).expect("json written"))
            .expect("json report parses");
    assert_eq!(json["verdict"], "not_applicable");
    let (code, out, err) = run(&["--scenario", "pending-deletes.yaml", "--strict"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains("--strict"), "{err}");
}

#[test]
fn a_device_that_did_not_list_a_capability_is_not_asked_and_not_judged() {
    let root = tempfile::tempdir().expect("root");
    let (mut child, url, stdout) = start(&["--scenario", "directories.yaml"]);
    let root_path = root.path().display().to_string();
    let (device, stop) = device_with(url, move |options| {
        options.roots = vec![root_path];
        options.capabilities = Some(vec!["turns".into(), "status".into()]);
    });
    let code = common::wait(&mut child, Duration::from_secs(20));
    let _ = stop.send(());
    let _ = device.join();
    let out = rest(stdout);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("NOT APPLICABLE: the device did not list `directories` (needed by `_lembas/directories`)"),
        "{out}"
    );
    assert!(out.contains("n/a "), "{out}");
}

/// The command with `args`: its exit code, stdout and stderr.
fn run(args: &[&str]) -> (i32, String, String) {
    common::process::run(BIN, args)
}

#[test]
fn usage_and_scenario_errors_exit_2_and_say_where() {
    let (code, _, err) = run(&["--scenario", "no-such-scenario.yaml"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("no such file") && err.contains("negotiate.yaml"),
        "{err}"
    );
    let dir = tempfile::tempdir().expect("tmp");
    let folder = dir.path().join("instance");
    std::fs::create_dir(&folder).expect("folder");
    let file = folder.join("broken.yaml");
    std::fs::write(
        &file,
        "name: broken\nabout: x\nsteps:\n  - expect:\n      method: a\n      bogus: 1\n",
    )
    .expect("write");
    let (code, _, err) = run(&["--scenario", &file.to_string_lossy()]);
    assert_eq!(code, 2);
    assert!(
        err.contains("broken.yaml:6:7") && err.contains("bogus"),
        "{err}"
    );
    let (code, _, err) = run(&["--misbehave", "no.such.rule"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("device.") || err.contains("instance."),
        "lists the known ones: {err}"
    );
    let (code, _, _) = run(&["--protocol", "3"]);
    assert_eq!(code, 2);
    let (code, _, err) = run(&[
        "--scenario",
        "negotiate.yaml",
        "--spec",
        "1.1.0",
        "--protocol",
        "2",
        "--listen",
        "not-an-address",
    ]);
    assert_eq!(code, 2, "{err}");
}

#[test]
fn help_has_an_example_and_version_answers() {
    let (code, out, _) = run(&["--help"]);
    assert_eq!(code, 0);
    assert!(
        out.contains("Example") && out.contains("--scenario"),
        "{out}"
    );
    let (code, out, _) = run(&["--version"]);
    assert_eq!(code, 0);
    assert!(out.starts_with("fake-instance "), "{out}");
    // It names the release and every spec and protocol version it implements.
    assert!(out.contains(env!("CARGO_PKG_VERSION")), "{out}");
    for spec in harness::lembas::Spec::ALL {
        assert!(out.contains(spec.as_str()), "{out}");
    }
    assert!(out.contains("link protocol 1, 2"), "{out}");
    let (code, out, _) = run(&["--list-scenarios"]);
    assert_eq!(code, 0);
    assert!(out.contains("negotiate.yaml"), "{out}");
}

/// A plain HTTP GET over a socket, so the test needs no HTTP client installed: the whole
/// response, headers and body. `headers` are extra lines (`Name: value\r\n` each).
fn raw_get(url: &str, path: &str, headers: &str) -> String {
    use std::io::Write;
    let host = url.trim_start_matches("http://");
    let mut socket = std::net::TcpStream::connect(host).expect("connects");
    socket
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    write!(
        socket,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\n{headers}Connection: close\r\n\r\n"
    )
    .expect("writes");
    let mut response = String::new();
    socket.read_to_string(&mut response).expect("reads");
    response
}

/// `GET path`'s body, as JSON.
fn http_get(url: &str, path: &str) -> serde_json::Value {
    let response = raw_get(url, path, "");
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b)
        .unwrap_or_default();
    serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {response}"))
}

/// The status of `GET path` with `token` as its bearer.
fn http_status_with(url: &str, path: &str, token: &str) -> String {
    let response = raw_get(url, path, &format!("Authorization: Bearer {token}\r\n"));
    response.split(' ').nth(1).unwrap_or_default().to_string()
}

#[test]
fn tokens_come_from_the_environment_out_of_sight_of_ps() {
    let mut child = Command::new(BIN)
        .env("LEMBAS_DEVICE_TOKENS", "from-env-1,from-env-2")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("fake-instance starts");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    stdout.read_line(&mut line).expect("a ready line");
    let url = line.trim().trim_start_matches("listening ").to_string();
    let status = |token: &str| http_status_with(&url, "/v1/models", token);
    assert_eq!(status("from-env-2"), "200");
    assert_eq!(status("from-env-1"), "200");
    assert_eq!(status("lembas-test-token"), "401", "the default gives way");
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn without_a_scenario_it_serves_until_sigterm_and_exits_0() {
    let (mut child, url, _stdout) = start(&[]);
    let discovery = http_get(&url, "/.well-known/lembas.json");
    assert_eq!(
        discovery,
        serde_json::json!({"protocol": 1, "protocols": [1, 2]})
    );
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(killed.success());
    assert_eq!(common::wait(&mut child, Duration::from_secs(5)), 0);
}

#[test]
fn a_scenario_http_section_is_checked_and_names_the_key_at_fault() {
    let dir = tempfile::tempdir().expect("tmp");
    let folder = dir.path().join("instance");
    std::fs::create_dir(&folder).expect("folder");
    let file = folder.join("http.yaml");
    std::fs::write(
        &file,
        "name: http\nabout: x\ninstance:\n  http:\n    scripts:\n      - when: { last_user: slow }\n        reply: { text: ok, chunk_delay_ms: 100, colour: red }\nsteps: []\n",
    )
    .expect("write");
    let (code, _, err) = run(&["--scenario", &file.to_string_lossy()]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("instance.http.scripts[0].reply") && err.contains("colour"),
        "{err}"
    );
}

#[test]
fn a_scenario_run_stopped_by_a_signal_is_never_a_pass() {
    // SIGTERM and SIGINT (Ctrl-C) alike, and the reports are written all the same.
    for signal in ["-TERM", "-INT"] {
        let dir = tempfile::tempdir().expect("a dir");
        let junit = dir.path().join("run.xml");
        let json = dir.path().join("run.json");
        let (mut child, _url, _stdout) = start(&[
            "--scenario",
            "negotiate.yaml",
            "--report",
            &format!("junit:{}", junit.display()),
            "--report",
            &format!("json:{}", json.display()),
        ]);
        let killed = Command::new("kill")
            .args([signal, &child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(killed.success());
        assert_eq!(
            common::wait(&mut child, Duration::from_secs(5)),
            6,
            "{signal}"
        );
        for report in [&junit, &json] {
            let written = std::fs::read_to_string(report).unwrap_or_default();
            assert!(
                !written.is_empty(),
                "{signal}: no report at {}",
                report.display()
            );
        }
    }
}

#[test]
fn say_opens_a_chat_on_the_linked_device_and_writes_in_it() {
    let (mut child, url, _stdout) = start(&["--say", "hello from the web"]);
    let root = tempfile::tempdir().expect("root");
    let scenario = harness::scenario::load_str(
        "name: hears\nabout: the device hears what --say wrote\ntimeout: 10s\nsteps:\n  - expect: { method: session/new }\n  - expect: { method: session/prompt, params: { prompt: [{ text: hello from the web }] } }\n",
        "hears.yaml",
        Some(harness::scenario::Side::Device),
    )
    .expect("the scenario loads");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let options = fake_device::Options {
        roots: vec![root.path().display().to_string()],
        cell: Cell::lembas(2, harness::lembas::Spec::V1_1_0),
        ..fake_device::Options::for_instance(url)
    };
    let finished = runtime
        .block_on(fake_device::run(
            options,
            Some(scenario),
            std::future::pending(),
        ))
        .expect("fake-device ran");
    let _ = child.kill();
    let _ = child.wait();
    let outcome = finished.outcome.expect("a verdict");
    assert!(
        outcome.passed(),
        "{}",
        harness::report::human::render("fake-device", &outcome, &finished.recent)
    );
}

#[test]
fn the_monitors_report_a_device_that_redials_after_4400_without_a_scenario() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let findings = runtime.block_on(async {
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let options = fake_instance::Options {
            protocols: Some(vec![1]),
            cell: Cell::lembas(1, harness::lembas::Spec::V1_1_0),
            ..fake_instance::Options::default()
        };
        let (addr, instance) = common::spawned::spawn_instance(options, None, async {
            let _ = stop_rx.await;
        })
        .await;
        // A device that says 2 to an instance speaking only 1, and (misbehaving) dials again
        // after the 4400.
        let device = fake_device::Options {
            protocol: ProtocolChoice::Fixed(2),
            cell: Cell::lembas(2, harness::lembas::Spec::V1_1_0),
            misbehave: Misbehaviours::parse(
                &["device.link.no_redial_4400".to_string()],
                Binds::Device,
            )
            .expect("known"),
            ..fake_device::Options::for_instance(format!("http://{addr}"))
        };
        let _ = tokio::time::timeout(
            Duration::from_secs(2),
            fake_device::run(device, None, std::future::pending()),
        )
        .await;
        let _ = stop_tx.send(());
        instance
            .await
            .expect("the instance task")
            .expect("fake-instance ran")
            .findings
    });
    assert!(
        findings
            .iter()
            .any(|f| f.rule == "device.link.no_redial_4400"),
        "{findings:?}"
    );
}
