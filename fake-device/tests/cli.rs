//! The fake-device command's contract, run as a process against fake-instance's library.

use std::net::SocketAddr;
use std::process::Command;
use std::time::Duration;

use harness::engine::Cell;
use harness::rules::{Binds, Misbehaviours};

mod common;
use common::BIN;

/// Serves a simulated fake-instance on a thread until the returned value is dropped.
fn instance(protocols: Option<Vec<u8>>, misbehave: &[&str]) -> Instance {
    instance_doing(protocols, misbehave, Vec::new())
}

/// Like [`instance`], its web UI doing `steps` by itself (as the self-test's `peer.steps`).
fn instance_doing(
    protocols: Option<Vec<u8>>,
    misbehave: &[&str],
    steps: Vec<harness::scenario::Spanned<harness::scenario::Step>>,
) -> Instance {
    let misbehave = Misbehaviours::parse(
        &misbehave.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
        Binds::Instance,
    )
    .expect("known");
    let protocol = if protocols.as_ref().is_some_and(|p| !p.contains(&2)) {
        1
    } else {
        2
    };
    serve(fake_instance::Options {
        protocols,
        misbehave,
        cell: Cell::lembas(protocol, harness::lembas::Spec::V1_1_0),
        patience: Duration::from_secs(5),
        steps,
        ..fake_instance::Options::default()
    })
}

/// A simulated fake-instance run with `options` on a thread of its own, until the returned
/// value is dropped.
fn serve(options: fake_instance::Options) -> Instance {
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let (addr_tx, addr_rx) = std::sync::mpsc::channel::<SocketAddr>();
    let handle = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async {
            let (addr, task) = common::spawn_instance(options, None, async {
                let _ = stop_rx.await;
            })
            .await;
            let _ = addr_tx.send(addr);
            let _ = task.await;
        });
    });
    let addr = addr_rx
        .recv_timeout(Duration::from_secs(5))
        .expect("fake-instance starts");
    Instance {
        url: format!("http://{addr}"),
        stop: Some(stop_tx),
        thread: Some(handle),
    }
}

/// A simulated fake-instance on a thread of its own; dropping it stops it.
struct Instance {
    url: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Instance {
    /// The command linked to this instance (`--instance URL`) with `args`.
    fn run(&self, args: &[&str]) -> (i32, String, String) {
        run(&[&["--instance", self.url.as_str()], args].concat())
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The command with `args`: its exit code, stdout and stderr.
fn run(args: &[&str]) -> (i32, String, String) {
    common::process::run(BIN, args)
}

#[test]
fn the_token_reaches_no_log_even_at_trace_level() {
    let instance = instance(None, &[]);
    let token = fake_instance::DEFAULT_TOKEN;
    let out = Command::new(BIN)
        .args([
            "--instance",
            &instance.url,
            "--token",
            token,
            "--scenario",
            "negotiate.yaml",
        ])
        .env("RUST_LOG", "trace")
        .output()
        .expect("runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    // tungstenite's own traces are on (so its handshake request would be logged), yet the
    // token is nowhere.
    assert!(err.contains("Client handshake"), "trace logs are on: {err}");
    assert!(!err.contains(token), "the token was logged:\n{err}");
}

#[test]
fn negotiate_passes_against_a_correct_instance_in_both_protocols() {
    for protocols in [vec![1], vec![1, 2]] {
        let instance = instance(Some(protocols.clone()), &[]);
        let (code, out, err) = instance.run(&["--scenario", "negotiate.yaml"]);
        assert_eq!(code, 0, "{protocols:?}\n{out}\n{err}");
        let expected_cell = if protocols.contains(&2) {
            "protocol 2"
        } else {
            "protocol 1"
        };
        assert!(out.contains(expected_cell), "auto reads discovery: {out}");
    }
}

#[test]
fn an_instance_that_takes_any_token_fails_with_exit_1_naming_the_rule() {
    let instance = instance(None, &["instance.link.token"]);
    let (code, out, _) = instance.run(&["--scenario", "negotiate"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("instance.link.token"), "{out}");
}

#[test]
fn a_4400_stops_the_device_with_the_sentence_and_exit_4() {
    let instance = instance(Some(vec![1]), &[]);
    let (code, _, err) = instance.run(&["--protocol", "2"]);
    assert_eq!(code, 4, "{err}");
    assert!(
        err.contains(fake_device::PROTOCOL_MISMATCH_SENTENCE),
        "{err}"
    );
}

#[test]
fn a_refused_token_is_exit_5_without_a_retry_loop() {
    let instance = instance(None, &[]);
    let (code, _, err) = instance.run(&["--token", "wrong"]);
    assert_eq!(code, 5, "{err}");
    assert!(err.contains("401"), "{err}");
}

#[test]
fn listing_and_usage() {
    let (code, out, _) = run(&["--list-scenarios"]);
    assert_eq!(code, 0);
    assert!(out.contains("negotiate.yaml"), "{out}");
    let (code, _, _) = run(&["--scenario", "negotiate.yaml"]);
    assert_eq!(code, 2, "--instance is required");
    let (code, _, err) = run(&["--instance", "http://127.0.0.1:9", "--protocol", "7"]);
    assert_eq!(code, 2, "{err}");
    let (code, out, _) = run(&["--help"]);
    assert_eq!(code, 0);
    assert!(out.contains("Example"), "{out}");
}

#[test]
fn a_fleet_needs_a_token_a_device_and_exits_5_when_every_one_is_refused() {
    let usage = [
        vec!["--fleet", "3"],
        vec![
            "--fleet",
            "3",
            "--token",
            "t-{i}",
            "--scenario",
            "negotiate",
        ],
        vec![
            "--fleet",
            "3",
            "--token",
            "t-{i}",
            "--journal",
            "/tmp/one.jsonl",
        ],
        vec!["--fleet", "3", "--token", "t-{i}", "--shard", "3/2"],
        vec!["--fleet", "0", "--token", "t-{i}"],
    ];
    for args in usage {
        let mut all = vec!["--instance", "http://127.0.0.1:9"];
        all.extend(args.iter().copied());
        let (code, _, err) = run(&all);
        assert_eq!(code, 2, "{args:?}: {err}");
    }
    let tokens = tempfile::NamedTempFile::new().expect("a file");
    std::fs::write(tokens.path(), "# one a line\nonly-one\n").expect("written");
    let path = tokens.path().to_str().expect("utf-8");
    let (code, _, err) = run(&[
        "--instance",
        "http://127.0.0.1:9",
        "--fleet",
        "2",
        "--tokens",
        path,
    ]);
    assert_eq!(code, 2, "a file shorter than the fleet: {err}");
    let instance = instance(None, &[]);
    let (code, out, err) = instance.run(&["--fleet", "2", "--token", "wrong-{i}"]);
    assert_eq!(code, 5, "{out}\n{err}");
    assert!(out.contains(r#""stopped":2"#), "{out}");
}

/// `--for` ends a fleet's run as a signal would: its devices link, and it exits 0 on its own.
#[test]
fn a_fleet_run_for_a_while_links_its_devices_and_ends_by_itself() {
    let instance = serve(fake_instance::Options {
        tokens: vec!["t-1".into(), "t-2".into()],
        patience: Duration::from_secs(5),
        ..fake_instance::Options::default()
    });
    let url = instance.url.clone();
    let mut fleet = Command::new(BIN)
        .args([
            "--instance",
            &url,
            "--fleet",
            "2",
            "--token",
            "t-{i}",
            "--for",
            "1500ms",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("starts");
    // A fleet that ignored --for would run until a signal: the test gives it 20 s.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = fleet.try_wait().expect("waits") {
            break Some(status);
        }
        if std::time::Instant::now() > deadline {
            let _ = fleet.kill();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let out = fleet.wait_with_output().expect("its output");
    drop(instance);
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let status = status.unwrap_or_else(|| panic!("the fleet ran past --for: {said}"));
    assert_eq!(status.code(), Some(0), "{said}");
    assert!(said.contains(r#""linked":2"#), "{said}");
}

#[test]
fn capabilities_lists_only_those_and_refuses_ones_the_spec_lacks() {
    let (code, _, err) = run(&[
        "--instance",
        "http://127.0.0.1:9",
        "--protocol",
        "2",
        "--capabilities",
        "turns,teleport",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("`teleport`"), "{err}");
    let instance = instance(None, &[]);
    let dir = tempfile::tempdir().expect("tmp");
    let journal = dir.path().join("j.jsonl");
    // A scenario that stays until initialize is answered (negotiate's device answers late).
    let scenario = dir.path().join("listed.yaml");
    std::fs::write(
        &scenario,
        "name: listed\nabout: initialize answered\nsteps:\n  - expect: { method: initialize }\n  - wait: 300ms\n",
    )
    .expect("scenario written");
    let (code, out, err) = instance.run(&[
        "--scenario",
        &scenario.to_string_lossy(),
        "--capabilities",
        "turns,status",
        "--journal",
        &journal.to_string_lossy(),
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let journal = std::fs::read_to_string(journal).expect("journal written");
    let lists: Vec<serde_json::Value> = journal
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .map(|l| l["msg"]["result"]["_meta"]["lembas"]["capabilities"].clone())
        .filter(|c| !c.is_null())
        .collect();
    assert!(!lists.is_empty(), "{journal}");
    for listed in lists {
        assert_eq!(listed, serde_json::json!(["status", "turns"]), "{journal}");
    }
}

#[test]
fn a_scenario_whose_web_ui_nobody_drives_is_not_applicable() {
    let instance = instance(None, &[]);
    let (code, out, _) = instance.run(&["--scenario", "composer"]);
    let (strict, _, _) = instance.run(&["--scenario", "composer", "--strict"]);
    let (arranged, arranged_out, _) = instance.run(&[
        "--scenario",
        "composer",
        "--arranged",
        "open_chat,search_files,list_commands,mention",
    ]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("NOT APPLICABLE"), "{out}");
    assert!(
        out.contains("`open_chat`, `search_files`, `list_commands`, `mention`"),
        "{out}"
    );
    assert_eq!(strict, 1);
    // Said to be arranged, it runs: and nothing opens a chat here, so it fails.
    assert_eq!(arranged, 1, "{arranged_out}");
}

/// The web UI's own steps, read as a scenario's `peer.steps`.
fn web_ui(steps: &str) -> Vec<harness::scenario::Spanned<harness::scenario::Step>> {
    let yaml = format!("name: ui\nabout: ui\nsteps: []\npeer:\n  steps:\n{steps}");
    harness::scenario::load_str(&yaml, "ui.yaml", None)
        .expect("the web UI's steps load")
        .peer_steps()
        .to_vec()
}

#[test]
fn the_composer_must_name_the_chat_s_own_session() {
    let root = tempfile::tempdir().expect("a root");
    let root = root.path().display().to_string();
    // Runs the composer scenario against a web UI doing `steps`; gives the exit code and report.
    let composer_against = |steps: &str| {
        let instance = instance_doing(None, &[], web_ui(steps));
        let (code, out, _) = instance.run(&[
            "--scenario",
            "composer",
            "--arranged",
            "open_chat,search_files,list_commands,mention",
            "--root",
            &root,
        ]);
        (code, out)
    };
    // The right session: passes.
    let (code, out) = composer_against(
        "    - act: { open_chat: {}, capture: { chat: sessionId } }\n    - act: { search_files: { chat: \"${chat}\", query: main } }\n    - act: { list_commands: { chat: \"${chat}\" } }\n    - act: { mention: { chat: \"${chat}\", query: notes, choose: my notes.md, text: look at } }\n",
    );
    assert_eq!(code, 0, "{out}");
    // Another session (a variable left unsubstituted, say): fails, naming the rule.
    let (code, out) = composer_against(
        "    - act: { open_chat: {} }\n    - act: { search_files: { chat: ses_not_the_chat, query: main } }\n    - act: { list_commands: { chat: ses_not_the_chat } }\n",
    );
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("instance.composer.capabilities"), "{out}");
}

/// What `GET /metrics` on `port` answers (headers and body), if anything.
fn scrape(port: u16) -> Option<String> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .ok()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).ok()?;
    Some(answer)
}

/// The Grafana dashboard the docs ship (`docs/recipes/grafana`).
fn dashboard() -> serde_json::Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/recipes/grafana/lembas-fleet.dashboard.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).expect("the dashboard")).expect("JSON")
}

/// What the dashboard asks for that `scraped` lacks: each metric its queries (and its figure
/// variable) name must be a sample of the scrape, each exact `figure="…"` a figure in it, and
/// every panel must read the dashboard's Prometheus variable under an id of its own.
fn queries_a_scrape_does_not_answer(dashboard: &serde_json::Value, scraped: &str) -> Vec<String> {
    let mut missing = Vec::new();
    let mut ids = std::collections::BTreeSet::new();
    // The variables' queries (the figure list), wherever they stand in the list.
    let mut queries: Vec<String> = dashboard["templating"]["list"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|variable| variable["definition"].as_str().map(String::from))
        .collect();
    let of_variables = queries.len();
    for panel in dashboard["panels"].as_array().into_iter().flatten() {
        if !ids.insert(panel["id"].as_u64()) {
            missing.push(format!("a second panel with id {}", panel["id"]));
        }
        if panel["type"] == "row" {
            continue;
        }
        let targets = panel["targets"].as_array().cloned().unwrap_or_default();
        if targets.is_empty() || panel["datasource"]["uid"] != "${datasource}" {
            missing.push(format!(
                "panel {}: no query of the datasource variable",
                panel["title"]
            ));
        }
        queries.extend(
            targets
                .iter()
                .filter_map(|t| t["expr"].as_str().map(String::from)),
        );
    }
    if queries.len() == of_variables {
        missing.push("a panel's query: the dashboard has none".into());
    }
    const FIGURE: &str = "figure=\"";
    for query in &queries {
        for (at, _) in query.match_indices("lembas_fleet_") {
            let name: String = query[at..]
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                .collect();
            if !scraped.lines().any(|l| l.starts_with(&format!("{name}{{"))) {
                missing.push(format!("metric {name}"));
            }
        }
        for (at, _) in query.match_indices(FIGURE) {
            let figure = query[at + FIGURE.len()..]
                .split('"')
                .next()
                .unwrap_or_default();
            if !figure.starts_with('$') && !scraped.contains(&format!("figure=\"{figure}\"")) {
                missing.push(format!("figure {figure}"));
            }
        }
    }
    missing
}

/// A fleet's figures: served while it runs (a Prometheus scrape gets histograms and the linked
/// count), summed up at its end with its thresholds ticked or crossed, written as JSON, HTML and
/// JUnit; a crossed threshold exits 7.
#[test]
fn a_fleet_serves_sums_up_and_judges_its_figures() {
    let instance = serve(fake_instance::Options {
        tokens: (1..=4).map(|i| format!("t-{i}")).collect(),
        patience: Duration::from_secs(5),
        ..fake_instance::Options::default()
    });
    let dir = tempfile::tempdir().expect("tmp");
    let port = harness::free_port::free_port().expect("a free port");
    let json = dir.path().join("load.json");
    let (html, junit) = (dir.path().join("load.html"), dir.path().join("load.xml"));
    let report = |kind: &str, path: &std::path::Path| format!("{kind}:{}", path.display());
    let fleet = Command::new(BIN)
        .args([
            "--instance",
            &instance.url,
            "--fleet",
            "4",
            "--token",
            "t-{i}",
        ])
        .args(["--for", "3s", "--metrics", &format!("127.0.0.1:{port}")])
        .args([
            "--report",
            &report("json", &json),
            "--report",
            &report("html", &html),
        ])
        .args(["--report", &report("junit", &junit)])
        .args(["--threshold", "link.setup.count==4"])
        .args(["--threshold", "device.initialize.p99<1us"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("starts");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let scraped = loop {
        let answer = scrape(port).unwrap_or_default();
        if answer.contains("lembas_fleet_gauge{figure=\"devices.linked\"} 4")
            || std::time::Instant::now() > deadline
        {
            break answer;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let out = fleet.wait_with_output().expect("the fleet ends");
    drop(instance);
    let said = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(
        scraped.contains("lembas_fleet_gauge{figure=\"devices.linked\"} 4"),
        "{scraped}\n{said}"
    );
    assert!(
        scraped.contains("application/openmetrics-text"),
        "{scraped}"
    );
    assert!(
        scraped
            .contains("lembas_fleet_latency_seconds_bucket{figure=\"link.setup\",le=\"+Inf\"} 4"),
        "{scraped}"
    );
    let unanswered = queries_a_scrape_does_not_answer(&dashboard(), &scraped);
    assert!(
        unanswered.is_empty(),
        "the Grafana dashboard asks for what the fleet does not serve: {unanswered:?}\n{scraped}"
    );
    assert_eq!(out.status.code(), Some(7), "{said}");
    assert!(said.contains("✓ link.setup.count==4  count=4"), "{said}");
    assert!(said.contains("✗ device.initialize.p99<1us  p99="), "{said}");
    assert!(said.contains("link.setup ."), "{said}");
    let written: harness::load::LoadReport =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("the JSON report"))
            .expect("a load report");
    assert_eq!(written.devices, 4);
    assert_eq!(written.figures.latencies["link.setup"].count(), 4);
    assert_eq!(written.figures.counters["links.opened"], 4);
    assert_eq!(written.figures.counters["findings"], 0);
    let page = std::fs::read_to_string(&html).expect("the HTML report");
    assert!(
        page.contains("<h3>link.setup</h3>") && page.contains("<polyline"),
        "{page}"
    );
    let xml = std::fs::read_to_string(&junit).expect("the JUnit report");
    assert!(xml.contains("failures=\"1\""), "{xml}");
}

/// A workload drives a fleet: its stages ramp the devices up and down and end the run; each
/// device shares a session and types prompts, drops its link (and redials), and restarts; the
/// figures time it all, and the devices find nothing wrong with a well-behaved instance.
#[test]
fn a_workload_ramps_drives_and_ends_a_fleet() {
    let instance = serve(fake_instance::Options {
        tokens: (1..=6).map(|i| format!("t-{i}")).collect(),
        patience: Duration::from_secs(5),
        ..fake_instance::Options::default()
    });
    let dir = tempfile::tempdir().expect("tmp");
    let workload = dir.path().join("quick.workload.yaml");
    std::fs::write(
        &workload,
        "name: quick\nstages:\n  - {duration: 1s, devices: 6}\n  - {duration: 2s, devices: 6}\n  - {duration: 1s, devices: 2}\n\
         start:\n  - share_session: true\nevery:\n  - every: 300ms\n    prompt: hello\n\
         \x20 - every: 1s\n    drop_link: true\n  - every: 1500ms\n    restart: true\n",
    )
    .expect("the workload");
    let json = dir.path().join("load.json");
    let out = Command::new(BIN)
        .args([
            "--instance",
            &instance.url,
            "--fleet",
            "6",
            "--token",
            "t-{i}",
        ])
        .args(["--workload", &workload.display().to_string()])
        .args(["--report", &format!("json:{}", json.display())])
        .args(["--threshold", "terminal.turn.errors==0"])
        .output()
        .expect("the fleet runs");
    drop(instance);
    let said = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(0), "{said}");
    assert!(said.contains("workload quick (seed 1)"), "{said}");
    let report: harness::load::LoadReport =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("the report")).expect("JSON");
    let latency = |name: &str| report.figures.latencies.get(name).map_or(0, |l| l.count());
    assert!(latency("terminal.turn") > 5, "{said}");
    assert!(latency("link.redial") >= 1, "{said}");
    assert!(latency("act.share_session") >= 6, "{said}");
    assert!(report.figures.counters["workload.restart"] >= 1, "{said}");
    assert_eq!(report.figures.counters["findings"], 0, "{said}");
    let most_running = report
        .figures
        .timeline
        .points
        .iter()
        .filter_map(|p| p.gauges.get("devices.running"))
        .max();
    assert_eq!(most_running, Some(&6), "{said}");
    // The stages end the run: about 4 s, never the minutes a run without them would take.
    assert!(report.seconds() < 15.0, "{}", report.seconds());
}

#[test]
fn a_workload_that_is_wrong_is_a_usage_error_naming_its_line_and_key() {
    let dir = tempfile::tempdir().expect("tmp");
    let cases = [
        (
            "bad.workload.yaml",
            "every:\n  - every: 1s\n    prompt: hi\n    restart: true\n",
            ["bad.workload.yaml:2", "every[0]"],
        ),
        (
            "big.workload.yaml",
            "stages:\n  - {duration: 1s, devices: 10}\n",
            [
                "big.workload.yaml",
                "a stage runs 10 devices, but --fleet has 2",
            ],
        ),
    ];
    for (name, text, said) in cases {
        let file = dir.path().join(name);
        std::fs::write(&file, text).expect("a file");
        let (code, _, err) = run(&[
            "--instance",
            "http://127.0.0.1:9",
            "--fleet",
            "2",
            "--token",
            "t-{i}",
            "--workload",
            &file.display().to_string(),
        ]);
        assert_eq!(code, 2, "{err}");
        assert!(said.iter().all(|s| err.contains(s)), "{err}");
    }
}
