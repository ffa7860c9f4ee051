//! The control API, driven as a test program in another language would: fake-instance runs as a
//! process with `--control` and `--events`, a device links, and the test sees the link in the
//! state, opens a chat, reads the journal, and raises the signal the scenario waits on, with
//! HTTP requests only. Every answer is checked against docs/control-api.yaml.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

mod common;

const BIN: &str = env!("CARGO_BIN_EXE_fake-instance");
const TOKEN: &str = "control-secret";

/// The OpenAPI file, as JSON.
fn openapi() -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/control-api.yaml");
    let text = std::fs::read_to_string(&path).expect("docs/control-api.yaml");
    serde_saphyr::from_str(&text).expect("the OpenAPI file is YAML")
}

/// The schema of `path`'s `method` answer with `status`, resolvable against the file's
/// components.
fn response_schema(api: &Value, method: &str, path: &str, status: u16) -> jsonschema::Validator {
    let operation = &api["paths"][path][method.to_lowercase()];
    let mut response = operation["responses"][status.to_string()].clone();
    assert!(
        !response.is_null(),
        "docs/control-api.yaml has no {status} for {method} {path}"
    );
    if let Some(reference) = response["$ref"].as_str() {
        let name = reference.trim_start_matches("#/components/responses/");
        response = api["components"]["responses"][name].clone();
    }
    let schema = response["content"]["application/json"]["schema"].clone();
    let rooted = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "components": api["components"],
        "allOf": [schema],
    });
    jsonschema::validator_for(&rooted).expect("a valid schema")
}

/// Checks an answer against the OpenAPI file, and gives its body.
async fn checked(api: &Value, method: &str, path: &str, answer: reqwest::Response) -> Value {
    let status = answer.status().as_u16();
    let body: Value = if status == 204 {
        Value::Null
    } else {
        answer.json().await.expect("a JSON body")
    };
    if status != 204 {
        let validator = response_schema(api, method, path, status);
        let errors: Vec<String> = validator
            .iter_errors(&body)
            .map(|e| e.to_string())
            .collect();
        assert!(
            errors.is_empty(),
            "{method} {path} answered {status} off its description: {errors:?}\n{body:#}"
        );
    }
    body
}

/// fake-instance with a scenario, the control API and events; its URL, control URL and output.
fn start(scenario: &Path) -> (Child, String, String, BufReader<std::process::ChildStdout>) {
    let mut child = Command::new(BIN)
        .arg("--scenario")
        .arg(scenario)
        .args(["--control", "--control-token", TOKEN, "--events"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("fake-instance starts");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let (mut url, mut control) = (None, None);
    while url.is_none() || control.is_none() {
        let mut line = String::new();
        assert!(
            stdout.read_line(&mut line).expect("a line") > 0,
            "ended early"
        );
        if let Some(rest) = line.trim().strip_prefix("listening ") {
            url = Some(rest.to_string());
        } else if let Some(rest) = line.trim().strip_prefix("control ") {
            let (address, token) = rest.split_once(" token=").expect("control URL token=T");
            assert_eq!(token, TOKEN, "the token given is the token said");
            control = Some(address.to_string());
        }
    }
    (
        child,
        url.unwrap_or_default(),
        control.unwrap_or_default(),
        stdout,
    )
}

const SCENARIO: &str = "\
name: driven
about: A run a test program drives through the control API alone.
rules: [device.link.dial]
steps:
  - expect_link: { within: 30s, rule: device.link.dial }
  - wait_for_signal: { name: chat-opened, within: 30s }
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_whole_run_is_driven_through_the_control_api() {
    let api = openapi();
    let dir = tempfile::tempdir().expect("a directory");
    let scenario = dir.path().join("driven.yaml");
    std::fs::write(&scenario, SCENARIO).expect("written");
    let (mut child, url, control, stdout) = start(&scenario);
    let http = reqwest::Client::new();
    let get = |path: &str| http.get(format!("{control}{path}")).bearer_auth(TOKEN);
    let post = |path: &str| http.post(format!("{control}{path}")).bearer_auth(TOKEN);

    // Without the token, nothing.
    let refused = http
        .get(format!("{control}/v1/state"))
        .send()
        .await
        .expect("sent");
    assert_eq!(refused.status(), 401);
    checked(&api, "GET", "/v1/state", refused).await;

    // The device under test links (here fake-device's library stands in for a real CLI).
    let root = tempfile::tempdir().expect("a root");
    let device = fake_device::FakeDevice::builder(&url)
        .root(root.path())
        .start()
        .await
        .expect("a device");

    // The state shows the link, then the device ready, with the step the scenario is on.
    let deadline = Instant::now() + Duration::from_secs(20);
    let state = loop {
        let answer = get("/v1/state").send().await.expect("sent");
        let state = checked(&api, "GET", "/v1/state", answer).await;
        let ready = state["peer"]["devices"][0]["ready"] == json!(true);
        if ready && state["links"][0]["open"] == json!(true) {
            break state;
        }
        assert!(Instant::now() < deadline, "no ready link: {state:#}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(state["double"], "fake-instance");
    assert_eq!(state["scenario"]["name"], "driven");
    assert_eq!(
        state["scenario"]["step"]["title"], "wait for signal chat-opened",
        "{state:#}"
    );

    // An action, as the web UI would: a chat opens on the device.
    let answer = post("/v1/act")
        .json(&json!({ "open_chat": {} }))
        .send()
        .await
        .expect("sent");
    assert_eq!(answer.status(), 200);
    let opened = checked(&api, "POST", "/v1/act", answer).await;
    let session = opened["result"]["sessionId"]
        .as_str()
        .expect("a session id")
        .to_string();

    // The journal has the session/new that went, and its answer.
    let answer = get("/v1/journal?after=0&wait_ms=2000")
        .send()
        .await
        .expect("sent");
    let page = checked(&api, "GET", "/v1/journal", answer).await;
    let entries = page["entries"].as_array().expect("entries");
    assert!(
        entries
            .iter()
            .any(|e| e["dir"] == "out" && e["msg"]["method"] == "session/new"),
        "the journal shows session/new: {page:#}"
    );
    assert!(
        entries
            .iter()
            .any(|e| e["msg"]["result"]["sessionId"] == json!(session)),
        "and the device's answer"
    );
    let last = page["last"].as_u64().expect("last");

    // Not JSON, or not one of the double's actions: a 400 that says how.
    let answer = post("/v1/act").body("{").send().await.expect("sent");
    assert_eq!(answer.status(), 400);
    checked(&api, "POST", "/v1/act", answer).await;
    let answer = post("/v1/act")
        .json(&json!({ "fly": true }))
        .send()
        .await
        .expect("sent");
    assert_eq!(answer.status(), 400);
    let refused = checked(&api, "POST", "/v1/act", answer).await;
    assert!(
        refused["error"]
            .as_str()
            .is_some_and(|e| e.contains("not an action of fake-instance")),
        "{refused}"
    );
    // One the device cannot take (files attached, for a device that lists no `attachments`)
    // would be a 409; this device lists them, so a chat's unknown session is a 422 instead.
    let answer = post("/v1/act?within_ms=2000")
        .json(&json!({ "delete_chat": "ses_nobody" }))
        .send()
        .await
        .expect("sent");
    assert!(
        [200, 422].contains(&answer.status().as_u16()),
        "{}",
        answer.status()
    );
    checked(&api, "POST", "/v1/act", answer).await;
    // The scheme is read in any case.
    let answer = http
        .get(format!("{control}/v1/state"))
        .header("Authorization", format!("bearer {TOKEN}"))
        .send()
        .await
        .expect("sent");
    assert_eq!(answer.status(), 200);
    // A reader ahead of the journal learns where it stands, at once.
    let answer = get("/v1/journal?after=999999&wait_ms=20000")
        .send()
        .await
        .expect("sent");
    let page = checked(&api, "GET", "/v1/journal", answer).await;
    assert!(page["last"].as_u64().is_some_and(|l| l < 999_999), "{page}");

    // A fault test's raw message goes out on the link as it is.
    let answer = post("/v1/inject")
        .json(&json!({ "message": { "jsonrpc": "2.0", "method": "_lembas/ping" } }))
        .send()
        .await
        .expect("sent");
    assert_eq!(answer.status(), 202);
    checked(&api, "POST", "/v1/inject", answer).await;
    let answer = get(&format!("/v1/journal?after={last}&wait_ms=5000"))
        .send()
        .await
        .expect("sent");
    let page = checked(&api, "GET", "/v1/journal", answer).await;
    assert!(
        page["entries"]
            .as_array()
            .is_some_and(|e| e.iter().any(|e| e["msg"]["method"] == "_lembas/ping")),
        "the long poll brings the injected message: {page:#}"
    );

    // The signal the scenario waits on: it goes on, passes, and the double exits 0.
    let answer = post("/v1/signals/chat-opened").send().await.expect("sent");
    assert_eq!(answer.status(), 204);
    let code = common::wait(&mut child, Duration::from_secs(20));
    assert_eq!(code, 0, "the scenario passed");
    drop(device);

    // --events said each step's end as a JSON line.
    let events: Vec<Value> = stdout
        .lines()
        .map_while(Result::ok)
        .filter_map(|line| serde_json::from_str(&line).ok())
        .collect();
    assert!(
        events.iter().any(|e| e["event"] == "step_ended"
            && e["title"] == "wait for signal chat-opened"
            && e["status"] == "passed"),
        "the events: {events:#?}"
    );
    assert!(
        events
            .iter()
            .any(|e| e["event"] == "signal" && e["name"] == "chat-opened")
    );
}

#[tokio::test]
async fn a_signal_that_never_comes_is_a_scenario_error_saying_what_was_awaited() {
    let dir = tempfile::tempdir().expect("a directory");
    let scenario = dir.path().join("waits.yaml");
    std::fs::write(
        &scenario,
        "name: waits\nabout: waits for a signal nobody raises\nrules: []\nsteps:\n  - wait_for_signal: { name: never, within: 200ms }\n",
    )
    .expect("written");
    let output = Command::new(BIN)
        .arg("--scenario")
        .arg(&scenario)
        .output()
        .expect("ran");
    let said = String::from_utf8_lossy(&output.stdout).to_string()
        + &String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "a scenario error: {said}");
    assert!(said.contains("no signal `never` within 200ms"), "{said}");
}

/// A control token in the environment is for runs that serve the API: a run without
/// `--control` is not refused over it, and an empty one is refused with `--control`.
#[test]
fn the_control_token_in_the_environment_is_used_only_with_control() {
    let listed = Command::new(BIN)
        .arg("--list-scenarios")
        .env("LEMBAS_CONTROL_TOKEN", "t0k")
        .output()
        .expect("ran");
    assert_eq!(listed.status.code(), Some(0));
    let empty = Command::new(BIN)
        .args(["--control", "--scenario", "negotiate"])
        .env("LEMBAS_CONTROL_TOKEN", "")
        .output()
        .expect("ran");
    assert_eq!(empty.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&empty.stderr).contains("is empty"));
}

/// The description and the implementation list the same routes.
#[test]
fn the_openapi_file_describes_every_route_and_no_other() {
    let api = openapi();
    let mut described: Vec<(String, String)> = Vec::new();
    for (path, operations) in api["paths"].as_object().expect("paths") {
        for method in operations.as_object().expect("operations").keys() {
            described.push((method.to_uppercase(), path.clone()));
        }
    }
    described.sort();
    let mut served: Vec<(String, String)> = harness::control::ROUTES
        .iter()
        .map(|(m, p)| (m.to_string(), p.to_string()))
        .collect();
    served.sort();
    assert_eq!(described, served);
}

/// The check above catches an answer off its description: a state without `peer`, a journal
/// entry without `seq`.
#[test]
fn an_answer_off_its_description_is_caught() {
    let api = openapi();
    let state = response_schema(&api, "GET", "/v1/state", 200);
    let good = json!({
        "double": "fake-instance",
        "cell": { "protocol": 2, "spec": "1.1.0" },
        "scenario": { "name": null, "step": null, "steps_ended": 0 },
        "links": [],
        "findings": [],
        "signals": [],
        "peer": {},
    });
    assert!(state.is_valid(&good));
    let mut bad = good.clone();
    bad.as_object_mut().map(|o| o.remove("peer"));
    assert!(!state.is_valid(&bad), "a state without `peer` is caught");
    let journal = response_schema(&api, "GET", "/v1/journal", 200);
    let entry = json!({ "t_ms": 1.0, "link": 1, "dir": "in", "msg": {} });
    assert!(
        !journal.is_valid(&json!({ "entries": [entry], "last": 1 })),
        "an entry without `seq` is caught"
    );
}
