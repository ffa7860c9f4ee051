//! The engine over an in-memory link: this test plays the remote peer, pushing text into the
//! hub's connection and reading what the double sends back. Every test that waits runs on
//! tokio's paused clock, so deadlines are exact and the suite stays fast.

use std::sync::Arc;
use std::time::Duration;

use harness::engine::applicability::unarranged;
use harness::engine::{
    Applies, Arranged, Behaviour, Cell, Hub, Intent, RunOutcome, Runner, StepStatus, Verdict,
};
use harness::finding::Findings;
use harness::journal::Journal;
use harness::pattern::Vars;
use harness::scenario::{Scenario, load_str};
use harness::transport::{CloseInfo, Connection, Incoming, Outgoing};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::time::Instant;

/// A behaviour that does nothing: every request no handler takes gets `-32601`.
struct Quiet;
impl Behaviour for Quiet {}

/// The far end of the in-memory link.
struct Remote {
    to_hub: mpsc::Sender<Incoming>,
    from_hub: harness::transport::OutboxReceiver,
}

impl Remote {
    fn text(&self, text: &str) {
        self.to_hub
            .try_send(Incoming::Text(text.to_string()))
            .expect("the link's channel has room");
    }

    fn send(&self, message: Value) {
        self.text(&message.to_string());
    }

    fn close(&self, code: u16, reason: &str) {
        self.to_hub
            .try_send(Incoming::Closed(Some(CloseInfo {
                code,
                reason: reason.into(),
            })))
            .expect("the link's channel has room");
    }

    /// Everything the hub sent so far (text messages parsed as JSON).
    fn sent(&mut self) -> Vec<Value> {
        let mut out = Vec::new();
        while let Ok(message) = self.from_hub.try_recv() {
            if let Outgoing::Text(text) = message {
                out.push(serde_json::from_str(&text).unwrap_or(Value::String(text)));
            }
        }
        out
    }

    /// The next text message the hub sends.
    async fn next(&mut self) -> Value {
        loop {
            match self.from_hub.recv().await {
                Some(Outgoing::Text(text)) => return serde_json::from_str(&text).unwrap(),
                Some(
                    Outgoing::Close(_) | Outgoing::Drop | Outgoing::Stall(_) | Outgoing::HalfClose,
                ) => continue,
                None => panic!("the hub dropped the link"),
            }
        }
    }
}

struct Setup {
    hub: Arc<Hub>,
    remote: Remote,
    scenario: Scenario,
    findings: Arc<Findings>,
}

const HEAD: &str = "name: t\nabout: a test\n";

fn setup(body: &str) -> Setup {
    setup_with(body, Arc::new(Quiet))
}

/// A setup whose double's model is `behaviour`.
fn setup_with(body: &str, behaviour: Arc<dyn Behaviour>) -> Setup {
    let scenario = load_str(&format!("{HEAD}{body}"), "t.yaml", None)
        .unwrap_or_else(|e| panic!("the test scenario does not load: {e}"));
    let findings = Arc::new(Findings::default());
    let hub = Hub::for_scenario(
        behaviour,
        Some(&scenario),
        Vars::default(),
        Arc::new(Journal::in_memory()),
        findings.clone(),
    )
    .expect("hub");
    let remote = link(&hub);
    Setup {
        hub,
        remote,
        scenario,
        findings,
    }
}

/// Opens a new in-memory link to the hub (the newest becomes the current one).
fn link(hub: &Arc<Hub>) -> Remote {
    let (out_tx, out_rx) = harness::transport::outbox();
    let (in_tx, in_rx) = mpsc::channel(64);
    hub.attach(Connection {
        outgoing: out_tx,
        incoming: in_rx,
        peer: "test".into(),
    });
    Remote {
        to_hub: in_tx,
        from_hub: out_rx,
    }
}

fn runner(hub: &Arc<Hub>, scenario: &Scenario) -> Runner {
    Runner::new(
        hub.clone(),
        Cell::lembas(2, harness::lembas::Spec::V1_1_0),
        scenario.timeout.map(|d| d.0),
        None,
    )
}

/// Runs the scenario to its end, giving the outcome and the virtual time it took.
async fn run(s: &Setup) -> (RunOutcome, Duration) {
    let started = Instant::now();
    let outcome = runner(&s.hub, &s.scenario).run(&s.scenario).await;
    (outcome, started.elapsed())
}

/// Runs the scenario in a task of its own, so the test can act as the remote meanwhile.
fn spawn_run(s: &Setup) -> tokio::task::JoinHandle<(RunOutcome, Duration)> {
    let hub = s.hub.clone();
    let scenario = s.scenario.clone();
    tokio::spawn(async move {
        let started = Instant::now();
        let outcome = runner(&hub, &scenario).run(&scenario).await;
        (outcome, started.elapsed())
    })
}

fn statuses(outcome: &RunOutcome) -> Vec<StepStatus> {
    outcome.steps.iter().map(|s| s.status).collect()
}

#[track_caller]
fn assert_elapsed(elapsed: Duration, expected: Duration) {
    let slack = Duration::from_millis(1);
    assert!(
        elapsed >= expected && elapsed <= expected + slack,
        "took {elapsed:?}, expected {expected:?}"
    );
}

fn notification(method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "method": method, "params": params})
}

fn request(id: Value, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

fn responses_to<'a>(sent: &'a [Value], id: &Value) -> Vec<&'a Value> {
    sent.iter()
        .filter(|m| m.get("id") == Some(id) && m.get("method").is_none())
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Deadlines

#[tokio::test(start_paused = true)]
async fn an_expect_that_never_comes_fails_at_its_deadline_with_the_nearest_message() {
    let s = setup(
        "timeout: 2s\nsteps:\n  - expect:\n      method: _lembas/hello\n      params: { protocol: 2 }\n      rule: device.hello.first\n",
    );
    s.remote
        .send(notification("something/else", json!({"x": 1})));
    let near = notification("_lembas/hello", json!({"protocol": 1, "version": "1.3.0"}));
    s.remote.send(near.clone());

    let (outcome, elapsed) = run(&s).await;

    assert_elapsed(elapsed, Duration::from_secs(2));
    assert_eq!(statuses(&outcome), [StepStatus::Failed]);
    assert!(!outcome.passed());
    assert_eq!(outcome.broken_rules(), ["device.hello.first"]);
    let step = &outcome.steps[0];
    assert_eq!(step.line, 5);
    assert!(
        (step.elapsed_ms - 2000.0).abs() <= 1.0,
        "{}",
        step.elapsed_ms
    );
    let failure = step.failure.as_ref().expect("a failure");
    assert_eq!(failure.rule.as_deref(), Some("device.hello.first"));
    assert_eq!(failure.summary, "`_lembas/hello` did not come within 2s");
    assert_eq!(failure.awaited.as_deref(), Some("`_lembas/hello`, for 2s"));
    assert_eq!(
        failure.expected,
        Some(json!({"method": "_lembas/hello", "params": {"protocol": 2}}))
    );
    assert_eq!(failure.nearest.as_ref(), Some(&near));
    let diff = failure.diff.as_deref().expect("a diff");
    assert!(diff.contains("params.protocol"), "{diff}");
    assert!(diff.contains("expected 2, got 1"), "{diff}");
}

#[tokio::test(start_paused = true)]
async fn a_run_ending_at_a_finding_stops_in_the_step_it_comes_in_and_skips_the_rest() {
    let s = setup("steps:\n  - wait: 10ms\n  - wait: 1h\n  - wait: 1h\n");
    let findings = s.findings.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(50)).await;
        findings.push(harness::finding::Finding::new(
            "device.hello.other",
            "another rule's finding does not end it",
        ));
        tokio::time::sleep(Duration::from_millis(50)).await;
        findings.push(harness::finding::Finding::new(
            "device.hello.first",
            "the break the run waits for",
        ));
    });

    let started = Instant::now();
    let outcome = runner(&s.hub, &s.scenario)
        .ending_at_finding(Some("device.hello.first".into()))
        .run(&s.scenario)
        .await;

    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        statuses(&outcome),
        [StepStatus::Passed, StepStatus::Skipped, StepStatus::Skipped]
    );
    assert!(!outcome.passed());
    assert!(
        outcome
            .broken_rules()
            .contains(&"device.hello.first".to_string())
    );
}

#[tokio::test(start_paused = true)]
async fn a_step_timeout_overrides_the_scenario_timeout() {
    let s = setup(
        "timeout: 10s\nsteps:\n  - expect: { method: never, timeout: 300ms, rule: device.hello.first }\n",
    );
    let (outcome, elapsed) = run(&s).await;
    assert_elapsed(elapsed, Duration::from_millis(300));
    let failure = outcome.steps[0].failure.as_ref().unwrap();
    assert_eq!(failure.awaited.as_deref(), Some("`never`, for 300ms"));

    // Without its own, a step takes the scenario's.
    let s = setup("timeout: 700ms\nsteps:\n  - expect: { method: never }\n");
    let (outcome, elapsed) = run(&s).await;
    assert_elapsed(elapsed, Duration::from_millis(700));
    assert_eq!(statuses(&outcome), [StepStatus::Failed]);
    // No rule named: the failure names none.
    assert_eq!(outcome.steps[0].failure.as_ref().unwrap().rule, None);
    assert!(outcome.broken_rules().is_empty());
}

#[tokio::test(start_paused = true)]
async fn without_any_timeout_a_step_waits_five_seconds() {
    let s = setup("steps:\n  - expect: { method: never }\n");
    let (_, elapsed) = run(&s).await;
    assert_elapsed(elapsed, Duration::from_secs(5));
}

#[tokio::test(start_paused = true)]
async fn an_unanswered_request_fails_at_its_deadline_naming_the_method() {
    let mut s = setup(
        "timeout: 10s\nsteps:\n  - request: { method: session/new, params: { cwd: /tmp }, timeout: 1500ms, rule: device.initialize.result }\n",
    );
    let (outcome, elapsed) = run(&s).await;

    assert_elapsed(elapsed, Duration::from_millis(1500));
    assert_eq!(statuses(&outcome), [StepStatus::Failed]);
    let failure = outcome.steps[0].failure.as_ref().unwrap();
    assert_eq!(failure.rule.as_deref(), Some("device.initialize.result"));
    assert_eq!(
        failure.awaited.as_deref(),
        Some("the answer to `session/new`, for 1s 500ms")
    );
    assert!(
        failure.summary.contains("`session/new`"),
        "{}",
        failure.summary
    );
    // The request did go out, with its params.
    let sent = s.remote.sent();
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0]["method"], "session/new");
    assert_eq!(sent[0]["params"], json!({"cwd": "/tmp"}));
}

#[tokio::test(start_paused = true)]
async fn an_answered_request_passes_and_its_capture_feeds_a_later_check() {
    let mut s = setup(
        r#"steps:
  - request:
      method: initialize
      params: { protocolVersion: 1 }
      result: { protocolVersion: 1, agentInfo: { name: $string } }
      capture: { init: result }
  - check: { that: "${init.agentInfo.name}", matches: lembas }
  - check: { that: "${init.protocolVersion}", matches: 2, rule: device.initialize.protocol }
"#,
    );
    let run = spawn_run(&s);
    let asked = s.remote.next().await;
    assert_eq!(asked["method"], "initialize");
    assert_eq!(asked["params"], json!({"protocolVersion": 1}));
    s.remote.send(json!({
        "jsonrpc": "2.0",
        "id": asked["id"],
        "result": {"protocolVersion": 1, "agentInfo": {"name": "lembas", "version": "1.3.0"}}
    }));
    let (outcome, _) = run.await.unwrap();

    assert_eq!(
        statuses(&outcome),
        [StepStatus::Passed, StepStatus::Passed, StepStatus::Failed]
    );
    // The third check fails on the captured value, naming the variable and the rule.
    let failure = outcome.steps[2].failure.as_ref().unwrap();
    assert_eq!(failure.rule.as_deref(), Some("device.initialize.protocol"));
    assert_eq!(
        failure.summary,
        "`init.protocolVersion` is not what the spec says"
    );
    assert_eq!(failure.nearest, Some(json!(1)));
    assert_eq!(failure.expected, Some(json!(2)));
    assert!(s.findings.all().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_request_answered_with_the_wrong_result_fails_with_a_diff() {
    let mut s = setup(
        "steps:\n  - request: { method: initialize, result: { protocolVersion: 1 }, rule: device.initialize.result }\n",
    );
    let run = spawn_run(&s);
    let asked = s.remote.next().await;
    s.remote
        .send(json!({"jsonrpc": "2.0", "id": asked["id"], "result": {"protocolVersion": 2}}));
    let (outcome, elapsed) = run.await.unwrap();

    assert_eq!(elapsed, Duration::ZERO, "an answer ends the wait at once");
    let failure = outcome.steps[0].failure.as_ref().unwrap();
    assert_eq!(failure.rule.as_deref(), Some("device.initialize.result"));
    assert_eq!(
        failure.summary,
        "the result of `initialize` is not what the spec says"
    );
    let diff = failure.diff.as_deref().unwrap();
    assert!(diff.contains("result.protocolVersion"), "{diff}");
}

// ---------------------------------------------------------------------------------------------
// Expect, the inbox, any_order, expect_none

#[tokio::test(start_paused = true)]
async fn expect_consumes_what_it_matches() {
    let s = setup(
        "steps:\n  - expect: { method: tick }\n  - expect: { method: tick }\n  - expect: { method: tick, timeout: 400ms }\n",
    );
    s.remote.send(notification("tick", json!({"n": 1})));
    s.remote.send(notification("tick", json!({"n": 1})));

    let (outcome, elapsed) = run(&s).await;

    assert_eq!(
        statuses(&outcome),
        [StepStatus::Passed, StepStatus::Passed, StepStatus::Failed]
    );
    assert_elapsed(elapsed, Duration::from_millis(400));
    // Both were consumed: nothing is left to be "nearest".
    assert_eq!(outcome.steps[2].failure.as_ref().unwrap().nearest, None);
}

#[tokio::test(start_paused = true)]
async fn a_message_that_arrives_before_its_expect_is_found() {
    let s = setup(
        "steps:\n  - wait: 1s\n  - expect: { method: early, params: { n: 1 }, capture: { early: params.n } }\n  - check: { that: \"${early}\", matches: 1 }\n",
    );
    // Sent at once, a whole second before the expect step starts.
    s.remote.send(notification("early", json!({"n": 1})));

    let (outcome, elapsed) = run(&s).await;

    assert_eq!(
        statuses(&outcome),
        [StepStatus::Passed, StepStatus::Passed, StepStatus::Passed]
    );
    assert!(outcome.passed());
    // The expect did not wait: the whole run is the `wait`.
    assert_elapsed(elapsed, Duration::from_secs(1));
}

#[tokio::test(start_paused = true)]
async fn a_message_that_arrives_during_an_expect_ends_its_wait() {
    let s = setup("steps:\n  - expect: { method: late }\n");
    let run = spawn_run(&s);
    tokio::time::sleep(Duration::from_millis(250)).await;
    s.remote.send(notification("late", json!({})));
    let (outcome, elapsed) = run.await.unwrap();
    assert!(outcome.passed(), "{outcome:?}");
    assert_elapsed(elapsed, Duration::from_millis(250));
}

#[tokio::test(start_paused = true)]
async fn any_order_passes_whatever_the_order_of_arrival() {
    let s = setup(
        r#"steps:
  - any_order:
      - expect: { method: first, capture: { a: params.v } }
      - expect: { method: second, capture: { b: params.v } }
  - check: { that: ["${a}", "${b}"], matches: [1, 2] }
"#,
    );
    s.remote.send(notification("second", json!({"v": 2})));
    s.remote.send(notification("first", json!({"v": 1})));

    let (outcome, elapsed) = run(&s).await;

    assert_eq!(statuses(&outcome), [StepStatus::Passed, StepStatus::Passed]);
    assert_eq!(elapsed, Duration::ZERO);
}

#[tokio::test(start_paused = true)]
async fn any_order_fails_naming_the_one_that_did_not_come() {
    let s = setup(
        r#"steps:
  - any_order:
      - expect: { method: first }
      - expect: { method: second, rule: device.hello.first, timeout: 600ms }
"#,
    );
    s.remote.send(notification("first", json!({})));
    let (outcome, elapsed) = run(&s).await;
    assert_elapsed(elapsed, Duration::from_millis(600));
    let failure = outcome.steps[0].failure.as_ref().unwrap();
    assert_eq!(failure.rule.as_deref(), Some("device.hello.first"));
    assert_eq!(failure.awaited.as_deref(), Some("`second`, for 600ms"));
}

#[tokio::test(start_paused = true)]
async fn expect_none_fails_when_a_match_arrives_within_its_window() {
    let s = setup(
        "steps:\n  - expect_none: { method: bad, params: { n: $integer }, for: 1s, rule: device.hello.first }\n",
    );
    let run = spawn_run(&s);
    tokio::time::sleep(Duration::from_millis(100)).await;
    s.remote
        .send(notification("bad", json!({"n": "not a number"})));
    tokio::time::sleep(Duration::from_millis(100)).await;
    let culprit = notification("bad", json!({"n": 3}));
    s.remote.send(culprit.clone());
    let (outcome, elapsed) = run.await.unwrap();

    assert_eq!(statuses(&outcome), [StepStatus::Failed]);
    // It fails as soon as the match comes, not at the end of the window.
    assert_elapsed(elapsed, Duration::from_millis(200));
    let failure = outcome.steps[0].failure.as_ref().unwrap();
    assert_eq!(failure.rule.as_deref(), Some("device.hello.first"));
    assert_eq!(failure.nearest.as_ref(), Some(&culprit));
    assert_eq!(failure.awaited.as_deref(), Some("silence for 1s"));
    assert!(
        failure.summary.contains("`bad` came"),
        "{}",
        failure.summary
    );
}

#[tokio::test(start_paused = true)]
async fn expect_none_passes_when_nothing_matching_arrives() {
    let s =
        setup("steps:\n  - expect: { method: bad }\n  - expect_none: { method: bad, for: 1s }\n");
    // Consumed by the expect before the window: not counted.
    s.remote.send(notification("bad", json!({})));
    let run = spawn_run(&s);
    tokio::time::sleep(Duration::from_millis(500)).await;
    s.remote.send(notification("good", json!({})));
    let (outcome, elapsed) = run.await.unwrap();

    assert_eq!(statuses(&outcome), [StepStatus::Passed, StepStatus::Passed]);
    assert_elapsed(elapsed, Duration::from_millis(1000));
}

#[tokio::test(start_paused = true)]
async fn expect_none_counts_what_came_before_and_no_step_consumed() {
    let s = setup(
        "steps:\n  - wait: 10ms\n  - expect_none: { method: bad, for: 1s, rule: device.hello.first }\n",
    );
    // A repeated event that came during an earlier step is as unwanted as one in the window.
    s.remote.send(notification("bad", json!({})));
    let (outcome, elapsed) = spawn_run(&s).await.unwrap();

    assert_eq!(statuses(&outcome), [StepStatus::Passed, StepStatus::Failed]);
    assert_eq!(outcome.broken_rules(), ["device.hello.first"]);
    assert_elapsed(elapsed, Duration::from_millis(10));
}

// ---------------------------------------------------------------------------------------------
// Requests from the remote: the default, handlers, hold and reply

#[tokio::test(start_paused = true)]
async fn a_request_no_handler_takes_gets_method_not_found() {
    let mut s = setup("steps:\n  - expect: { method: nobody/home }\n");
    s.remote.send(request(json!(7), "nobody/home", json!({})));
    let (outcome, _) = run(&s).await;

    // The request still reaches the inbox.
    assert!(outcome.passed(), "{outcome:?}");
    let sent = s.remote.sent();
    let answers = responses_to(&sent, &json!(7));
    assert_eq!(answers.len(), 1, "{sent:?}");
    assert_eq!(answers[0]["error"]["code"], -32601);
    assert!(answers[0].get("result").is_none());
}

#[tokio::test(start_paused = true)]
async fn a_handler_with_times_answers_that_many_then_lets_requests_through() {
    let mut s = setup(
        r#"handlers:
  - { method: fs/read, result: { echo: "${params.x}", text: "got ${params.x}" }, times: 1 }
steps:
  - expect: { method: fs/read, params: { x: 5 } }
  - expect: { method: fs/read, params: { x: 6 } }
"#,
    );
    s.remote.send(request(json!(1), "fs/read", json!({"x": 5})));
    s.remote.send(request(json!(2), "fs/read", json!({"x": 6})));
    let (outcome, _) = run(&s).await;
    assert!(outcome.passed(), "{outcome:?}");

    let sent = s.remote.sent();
    let first = responses_to(&sent, &json!(1));
    assert_eq!(first.len(), 1, "{sent:?}");
    assert_eq!(first[0]["result"], json!({"echo": 5, "text": "got 5"}));
    let second = responses_to(&sent, &json!(2));
    assert_eq!(second.len(), 1, "{sent:?}");
    assert_eq!(second[0]["error"]["code"], -32601);
}

#[tokio::test(start_paused = true)]
async fn a_handler_with_a_delay_answers_after_it() {
    let mut s =
        setup("handlers:\n  - { method: slow, result: ok, delay: 300ms }\nsteps:\n  - wait: 1s\n");
    let run = spawn_run(&s);
    s.remote.send(request(json!("a"), "slow", json!({})));
    tokio::time::sleep(Duration::from_millis(299)).await;
    assert!(s.remote.sent().is_empty(), "answered before its delay");
    tokio::time::sleep(Duration::from_millis(2)).await;
    let sent = s.remote.sent();
    assert_eq!(responses_to(&sent, &json!("a"))[0]["result"], "ok");
    run.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_held_request_is_answered_by_a_reply_step() {
    let mut s = setup(
        r#"handlers:
  - { method: session/request_permission, hold: true }
steps:
  - expect: { method: session/request_permission, capture: { ask: $ } }
  - wait: 1s
  - reply: { to: ask, result: { outcome: "${params.options[0]}" } }
"#,
    );
    s.remote.send(request(
        json!("p-1"),
        "session/request_permission",
        json!({"options": ["allow", "deny"]}),
    ));
    let run = spawn_run(&s);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(s.remote.sent().is_empty(), "a held request is not answered");
    let (outcome, _) = run.await.unwrap();

    assert!(outcome.passed(), "{outcome:?}");
    let sent = s.remote.sent();
    let answers = responses_to(&sent, &json!("p-1"));
    assert_eq!(answers.len(), 1, "{sent:?}");
    assert_eq!(answers[0]["result"], json!({"outcome": "allow"}));
}

#[tokio::test(start_paused = true)]
async fn a_reply_goes_to_the_link_its_request_came_on() {
    let mut s = setup(
        r#"handlers:
  - { method: ask, hold: true }
steps:
  - expect: { method: ask, params: { link: 2 }, capture: { ask: $ } }
  - reply: { to: ask, result: { answer: 2 } }
"#,
    );
    // The first link asks; the second asks too. Distinct ids: no ambiguity.
    s.remote.send(request(json!(1), "ask", json!({"link": 1})));
    let mut second = link(&s.hub);
    second.send(request(json!(2), "ask", json!({"link": 2})));
    let (outcome, _) = run(&s).await;

    assert!(outcome.passed(), "{outcome:?}");
    assert!(s.remote.sent().is_empty(), "link 1's request stays held");
    let sent = second.sent();
    assert_eq!(
        responses_to(&sent, &json!(2))[0]["result"],
        json!({"answer": 2})
    );
}

#[tokio::test(start_paused = true)]
async fn a_reply_goes_to_the_right_link_when_ids_repeat_across_links() {
    let mut s = setup(
        r#"handlers:
  - { method: ask, hold: true }
steps:
  - expect: { method: ask, params: { link: 2 }, capture: { ask: $ } }
  - reply: { to: ask, result: { answer: 2 } }
"#,
    );
    // The peer asks on link 1, then redials and asks again with the same id on link 2.
    s.remote.send(request(json!(1), "ask", json!({"link": 1})));
    s.remote.close(1001, "going away");
    let mut second = link(&s.hub);
    second.send(request(json!(1), "ask", json!({"link": 2})));
    let (outcome, _) = run(&s).await;

    assert!(outcome.passed(), "{outcome:?}");
    let on_first = s.remote.sent();
    assert!(
        on_first.is_empty(),
        "the reply went to link 1: {on_first:?}"
    );
    let sent = second.sent();
    let answers = responses_to(&sent, &json!(1));
    assert_eq!(answers.len(), 1, "link 2 got no answer: {sent:?}");
    assert_eq!(answers[0]["result"], json!({"answer": 2}));
}

#[tokio::test(start_paused = true)]
async fn a_reply_to_a_request_already_answered_is_a_scenario_error() {
    let mut s = setup(
        r#"steps:
  - expect: { method: x/y, capture: { req: $ } }
  - reply: { to: req, result: {} }
  - wait: 1s
"#,
    );
    s.remote.send(request(json!(3), "x/y", json!({})));
    let (outcome, _) = run(&s).await;

    assert_eq!(
        statuses(&outcome),
        [StepStatus::Passed, StepStatus::Error, StepStatus::Skipped]
    );
    assert!(outcome.scenario_error());
    assert!(!outcome.passed());
    // Not the peer's fault: no rule broken, no finding.
    assert!(outcome.broken_rules().is_empty());
    assert!(outcome.findings.is_empty());
    let failure = outcome.steps[1].failure.as_ref().unwrap();
    assert_eq!(failure.rule, None);
    assert!(
        failure.summary.contains("was not held"),
        "{}",
        failure.summary
    );
    // The default's `-32601` is the only answer the remote got.
    let sent = s.remote.sent();
    let answers = responses_to(&sent, &json!(3));
    assert_eq!(answers.len(), 1, "{sent:?}");
    assert_eq!(answers[0]["error"]["code"], -32601);
}

#[tokio::test(start_paused = true)]
async fn a_reply_to_an_unknown_variable_is_a_scenario_error() {
    let s = setup("steps:\n  - reply: { to: nothing, result: {} }\n");
    let (outcome, _) = run(&s).await;
    assert_eq!(statuses(&outcome), [StepStatus::Error]);
    let summary = &outcome.steps[0].failure.as_ref().unwrap().summary;
    assert!(summary.contains("no variable `nothing`"), "{summary}");
}

// ---------------------------------------------------------------------------------------------
// Cells, malformed input, close, failing runs

#[tokio::test(start_paused = true)]
async fn when_steps_of_another_cell_are_skipped() {
    let s = setup(
        r#"steps:
  - when:
      protocol: 1
      steps:
        - expect: { method: never }
        - wait: 1s
  - when:
      protocol: 2
      steps:
        - wait: 10ms
  - when:
      spec: "1.0.0"
      steps:
        - wait: 1s
"#,
    );
    let (outcome, elapsed) = run(&s).await;
    let indices: Vec<&str> = outcome.steps.iter().map(|v| v.index.as_str()).collect();
    assert_eq!(indices, ["1.1", "1.2", "2.1", "3.1"]);
    assert_eq!(
        statuses(&outcome),
        [
            StepStatus::Skipped,
            StepStatus::Skipped,
            StepStatus::Passed,
            StepStatus::Skipped
        ]
    );
    assert!(outcome.passed());
    assert_elapsed(elapsed, Duration::from_millis(10));
}

#[tokio::test(start_paused = true)]
async fn a_when_on_a_field_the_peer_left_out_takes_it_as_absent_and_an_unset_variable_is_an_error()
{
    let s = setup(
        r#"vars:
  init: { _meta: { lembas: {} } }
steps:
  - when:
      that: ${init._meta.lembas.connection}
      matches: $string
      steps:
        - wait: 1s
  - when:
      that: ${init._meta.lembas.connection}
      matches: $null
      steps:
        - wait: 10ms
  - when:
      that: ${never_set.connection}
      matches: $null
      steps:
        - wait: 10ms
"#,
    );
    let (outcome, _) = run(&s).await;
    assert_eq!(
        statuses(&outcome),
        [StepStatus::Skipped, StepStatus::Passed, StepStatus::Error]
    );
}

#[tokio::test(start_paused = true)]
async fn malformed_input_becomes_findings_and_the_run_goes_on() {
    let mut s = setup("steps:\n  - expect: { method: after }\n");
    s.remote.text("this is not json");
    s.remote
        .text(r#"{"jsonrpc": "1.0", "id": 9, "method": "x"}"#);
    s.remote
        .send(json!({"jsonrpc": "2.0", "id": 99, "result": {}}));
    s.remote.send(notification("after", json!({})));

    let (outcome, elapsed) = run(&s).await;

    assert_eq!(statuses(&outcome), [StepStatus::Passed]);
    assert_eq!(elapsed, Duration::ZERO);
    let rules: Vec<String> = outcome.findings.iter().map(|f| f.rule.clone()).collect();
    assert_eq!(
        rules,
        ["jsonrpc.json", "jsonrpc.envelope", "jsonrpc.response.id"]
    );
    assert!(outcome.findings.iter().all(|f| f.link == Some(1)));
    assert!(!outcome.passed(), "findings fail the run");
    assert_eq!(
        outcome.broken_rules(),
        ["jsonrpc.envelope", "jsonrpc.json", "jsonrpc.response.id"]
    );

    let sent = s.remote.sent();
    // Not JSON: no id could be read, so the parse error answers `null`.
    let parse = responses_to(&sent, &Value::Null);
    assert_eq!(parse.len(), 1, "{sent:?}");
    assert_eq!(parse[0]["error"]["code"], -32700);
    // JSON with a readable id: the invalid-request error answers that id.
    let invalid = responses_to(&sent, &json!(9));
    assert_eq!(invalid.len(), 1, "{sent:?}");
    assert_eq!(invalid[0]["error"]["code"], -32600);
    // The stray response is not answered.
    assert!(responses_to(&sent, &json!(99)).is_empty(), "{sent:?}");
    assert_eq!(sent.len(), 2, "{sent:?}");
}

#[tokio::test(start_paused = true)]
async fn expect_close_passes_on_the_code_it_wants() {
    let s = setup(
        "steps:\n  - expect_close: { code: 4400, rule: instance.link.close_4400, timeout: 1s }\n",
    );
    let run = spawn_run(&s);
    tokio::time::sleep(Duration::from_millis(100)).await;
    s.remote.close(4400, "protocol 2 is not allowed");
    let (outcome, elapsed) = run.await.unwrap();
    assert!(outcome.passed(), "{outcome:?}");
    assert_elapsed(elapsed, Duration::from_millis(100));
}

#[tokio::test(start_paused = true)]
async fn expect_close_fails_on_another_code_naming_the_rule() {
    let s = setup(
        "steps:\n  - expect_close: { code: 4400, rule: instance.link.close_4400, timeout: 1s }\n",
    );
    let run = spawn_run(&s);
    tokio::time::sleep(Duration::from_millis(100)).await;
    s.remote.close(1000, "bye");
    let (outcome, _) = run.await.unwrap();
    assert_eq!(statuses(&outcome), [StepStatus::Failed]);
    assert_eq!(outcome.broken_rules(), ["instance.link.close_4400"]);
    let failure = outcome.steps[0].failure.as_ref().unwrap();
    assert!(
        failure.summary.contains("closed with 1000"),
        "{}",
        failure.summary
    );
    assert!(failure.summary.contains("not 4400"), "{}", failure.summary);
    assert_eq!(
        failure.awaited.as_deref(),
        Some("the peer to close link 1 with code 4400, for 1s")
    );
}

#[tokio::test(start_paused = true)]
async fn expect_close_fails_at_its_deadline_when_the_link_stays_open() {
    let s = setup(
        "steps:\n  - expect_close: { code: 4400, rule: instance.link.close_4400, timeout: 800ms }\n",
    );
    let (outcome, elapsed) = run(&s).await;
    assert_elapsed(elapsed, Duration::from_millis(800));
    let failure = outcome.steps[0].failure.as_ref().unwrap();
    assert_eq!(failure.summary, "link 1 stayed open");
    assert_eq!(failure.rule.as_deref(), Some("instance.link.close_4400"));
}

#[tokio::test(start_paused = true)]
async fn expect_close_sees_a_close_that_came_before_the_step() {
    let s = setup(
        "steps:\n  - wait: 10ms\n  - expect_close: { code: 4400, rule: instance.link.close_4400, timeout: 1s }\n",
    );
    s.remote.close(4400, "protocol 2 is not allowed");
    let (outcome, elapsed) = run(&s).await;
    assert!(outcome.passed(), "{:?}", outcome.steps[1].failure);
    assert_elapsed(elapsed, Duration::from_millis(10));
}

#[tokio::test(start_paused = true)]
async fn after_the_first_failure_the_remaining_steps_are_skipped() {
    let mut s = setup(
        r#"steps:
  - expect: { method: never, timeout: 100ms }
  - wait: 1s
  - notify: { method: not/sent }
  - when:
      protocol: 2
      steps:
        - wait: 1s
  - any_order:
      - expect: { method: a }
"#,
    );
    let (outcome, elapsed) = run(&s).await;
    assert_eq!(
        statuses(&outcome),
        [
            StepStatus::Failed,
            StepStatus::Skipped,
            StepStatus::Skipped,
            StepStatus::Skipped,
            StepStatus::Skipped
        ]
    );
    assert!(outcome.steps[1..].iter().all(|v| v.failure.is_none()));
    assert_elapsed(elapsed, Duration::from_millis(100));
    assert!(
        s.remote.sent().is_empty(),
        "a skipped notify sent something"
    );
}

// ---------------------------------------------------------------------------------------------
// start and await

#[tokio::test(start_paused = true)]
async fn started_requests_go_out_in_step_order_and_each_await_gets_its_own_answer() {
    let mut s = setup(
        r#"steps:
  - start: { method: slow, params: { n: 1 }, as: one }
  - start: { method: quick, params: { n: 2 }, as: two }
  - request: { method: status, result: { ok: true } }
  - await: { request: two, result: { n: 2 } }
  - await: { request: one, result: { n: 1 }, rule: device.turns.dedup }
"#,
    );
    let run = spawn_run(&s);
    // All three are on the wire, in step order, before anything is answered.
    let (one, two, status) = (
        s.remote.next().await,
        s.remote.next().await,
        s.remote.next().await,
    );
    assert_eq!(
        [&one["method"], &two["method"], &status["method"]],
        ["slow", "quick", "status"]
    );
    s.remote
        .send(json!({"jsonrpc": "2.0", "id": status["id"], "result": {"ok": true}}));
    s.remote
        .send(json!({"jsonrpc": "2.0", "id": two["id"], "result": {"n": 2}}));
    // The slow one answers wrongly: its await fails under its rule.
    s.remote
        .send(json!({"jsonrpc": "2.0", "id": one["id"], "result": {"n": 9}}));
    let (outcome, _) = run.await.unwrap();
    assert_eq!(
        statuses(&outcome),
        [
            StepStatus::Passed,
            StepStatus::Passed,
            StepStatus::Passed,
            StepStatus::Passed,
            StepStatus::Failed
        ]
    );
    assert_eq!(outcome.broken_rules(), ["device.turns.dedup"]);
}

#[tokio::test(start_paused = true)]
async fn an_expect_after_a_start_takes_only_what_came_after_its_request() {
    let mut s = setup(
        r#"steps:
  - wait: 10ms
  - start: { method: prompt, as: second }
  - expect: { method: event, params: { state: start }, after: second, capture: { seen: params } }
  - await: { request: second }
  - check: { that: "${seen.turn}", matches: 2 }
  - expect: { method: event, after: nobody }
"#,
    );
    // The first turn's start is still in the inbox when the second turn starts.
    s.remote
        .send(notification("event", json!({"state": "start", "turn": 1})));
    let run = spawn_run(&s);
    let prompt = s.remote.next().await;
    s.remote
        .send(notification("event", json!({"state": "start", "turn": 2})));
    s.remote
        .send(json!({"jsonrpc": "2.0", "id": prompt["id"], "result": {}}));
    let (outcome, _) = run.await.unwrap();
    assert_eq!(
        statuses(&outcome),
        [
            StepStatus::Passed,
            StepStatus::Passed,
            StepStatus::Passed,
            StepStatus::Passed,
            StepStatus::Passed,
            StepStatus::Error
        ],
        "{:?}",
        outcome.steps
    );
}

#[tokio::test(start_paused = true)]
async fn an_await_gives_up_at_its_deadline() {
    let s = setup(
        "steps:\n  - start: { method: never, as: n, timeout: 2s }\n  - await: { request: n }\n",
    );
    let (outcome, elapsed) = spawn_run(&s).await.unwrap();
    assert_eq!(statuses(&outcome), [StepStatus::Passed, StepStatus::Failed]);
    let failure = outcome.steps[1].failure.as_ref().unwrap();
    assert!(
        failure.summary.contains("no answer to `never`"),
        "{failure:?}"
    );
    assert_elapsed(elapsed, Duration::from_secs(2));
}

#[tokio::test(start_paused = true)]
async fn a_binary_frame_is_a_finding_of_its_own() {
    let s = setup("steps:\n  - expect: { method: after }\n");
    s.remote
        .to_hub
        .try_send(Incoming::Binary(vec![0xff, 0x00, 0x7b]))
        .expect("the test transport takes a frame");
    s.remote.send(notification("after", json!({})));

    let (outcome, _) = run(&s).await;

    assert_eq!(statuses(&outcome), [StepStatus::Passed]);
    assert_eq!(outcome.broken_rules(), ["jsonrpc.text"]);
    assert!(outcome.findings[0].summary.contains("3 bytes"));
}

#[tokio::test]
async fn a_text_frame_that_is_not_utf8_is_a_finding_of_the_same_rule() {
    let s = setup("steps:\n  - expect: { method: after }\n");
    s.remote
        .to_hub
        .try_send(Incoming::NotUtf8("invalid utf-8 sequence".into()))
        .expect("the test transport takes a frame");
    s.remote.send(notification("after", json!({})));

    let (outcome, _) = run(&s).await;

    assert_eq!(outcome.broken_rules(), ["jsonrpc.text"]);
    assert!(
        outcome.findings[0].summary.contains("not UTF-8"),
        "{:?}",
        outcome.findings[0]
    );
}

// ---------------------------------------------------------------------------------------------
// The peer's edges: a closed link, late answers, broken responses

#[tokio::test(start_paused = true)]
async fn a_late_answer_is_no_finding_and_a_broken_response_gets_no_reply() {
    let mut s = setup("steps:\n  - request: { method: slow, timeout: 1s }\n");
    let run = spawn_run(&s);
    let asked = s.remote.next().await;
    let (outcome, _) = run.await.unwrap();
    assert_eq!(statuses(&outcome), [StepStatus::Failed]);
    // The answer comes after we stopped waiting: allowed by JSON-RPC, so no finding.
    s.remote
        .send(json!({"jsonrpc": "2.0", "id": asked["id"], "result": {}}));
    // A broken response: a finding, but no answer of ours (it could settle a request of theirs).
    s.remote
        .send(json!({"jsonrpc": "2.0", "id": 5, "error": "boom"}));
    tokio::time::sleep(Duration::from_millis(50)).await;
    let rules: Vec<String> = s.findings.all().iter().map(|f| f.rule.clone()).collect();
    assert_eq!(rules, ["jsonrpc.envelope"]);
    assert!(
        s.remote
            .sent()
            .iter()
            .all(|m| m.get("id") != Some(&json!(5))),
        "no reply to a broken response"
    );
}

// ---------------------------------------------------------------------------------------------
// Applicability: what the peer never claimed is not judged

/// A double whose peer never claimed capability `files`: a message needing it does not apply,
/// and neither does a missed `model/asked` (the peer never used what would send it).
struct Unclaimed;
impl Behaviour for Unclaimed {
    fn applies(&self, _hub: &Arc<Hub>, intent: Intent<'_>) -> Applies {
        match intent {
            Intent::Send {
                method: "files/search",
                ..
            } => Applies::No("the peer did not list `files`".into()),
            Intent::Missed { pattern } if pattern["method"] == "model/asked" => {
                Applies::No("the peer never asked the model".into())
            }
            Intent::Claims { needs } if needs.iter().any(|n| n == "files") => {
                Applies::No("the peer did not list `files`".into())
            }
            Intent::Send {
                method: "never/said",
                ..
            } => Applies::NotYet,
            _ => Applies::Yes,
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_step_sending_what_the_peer_never_claimed_ends_the_run_not_applicable() {
    let mut s = setup_with(
        "steps:\n  - notify: { method: hello }\n  - request: { method: files/search }\n  - notify: { method: after }\n",
        Arc::new(Unclaimed),
    );
    let (outcome, _) = run(&s).await;
    assert_eq!(
        statuses(&outcome),
        [
            StepStatus::Passed,
            StepStatus::NotApplicable,
            StepStatus::Skipped
        ]
    );
    assert_eq!(
        outcome.verdict(),
        Verdict::NotApplicable("the peer did not list `files`".into())
    );
    assert!(!outcome.passed());
    assert_eq!(
        outcome.steps[1].not_applicable.as_deref(),
        Some("the peer did not list `files`")
    );
    // Nothing unclaimed went out.
    let sent = s.remote.sent();
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0]["method"], "hello");
}

#[tokio::test(start_paused = true)]
async fn a_negative_test_sends_what_the_peer_never_claimed_and_judges_the_refusal() {
    let mut s = setup_with(
        "timeout: 1s\nsteps:\n  - request: { method: files/search, unlisted: true, error: { code: -32601 } }\n",
        Arc::new(Unclaimed),
    );
    let run = spawn_run(&s);
    let asked = s.remote.next().await;
    assert_eq!(asked["method"], "files/search");
    s.remote.send(json!({"jsonrpc": "2.0", "id": asked["id"], "error": {"code": -32601, "message": "method not found"}}));
    let (outcome, _) = run.await.expect("the run ends");
    assert_eq!(outcome.verdict(), Verdict::Passed);
}

#[tokio::test(start_paused = true)]
async fn a_missed_message_the_peer_never_claimed_to_send_does_not_apply() {
    let s = setup_with(
        "timeout: 1s\nsteps:\n  - expect: { method: model/asked, rule: device.hello.first }\n",
        Arc::new(Unclaimed),
    );
    let (outcome, _) = run(&s).await;
    assert_eq!(statuses(&outcome), [StepStatus::NotApplicable]);
    assert_eq!(
        outcome.verdict(),
        Verdict::NotApplicable("the peer never asked the model".into())
    );
    // The same wait for a message the peer did claim is a failure.
    let s = setup_with(
        "timeout: 1s\nsteps:\n  - expect: { method: other, rule: device.hello.first }\n",
        Arc::new(Unclaimed),
    );
    let (outcome, _) = run(&s).await;
    assert_eq!(outcome.verdict(), Verdict::Failed);
}

#[tokio::test(start_paused = true)]
async fn a_finding_fails_a_run_that_did_not_apply_further() {
    let s = setup_with(
        "steps:\n  - request: { method: files/search }\n",
        Arc::new(Unclaimed),
    );
    s.remote.text("not json");
    tokio::time::sleep(Duration::from_millis(10)).await;
    let (outcome, _) = run(&s).await;
    assert_eq!(statuses(&outcome), [StepStatus::NotApplicable]);
    assert_eq!(outcome.verdict(), Verdict::Failed);
}

#[tokio::test(start_paused = true)]
async fn set_up_nothing_arranges_makes_the_run_not_applicable_before_any_step() {
    let s = setup("steps:\n  - notify: { method: hello }\n");
    let outcome = runner(&s.hub, &s.scenario)
        .unarranged(unarranged(&["share_session".into()], &Arranged::Nothing))
        .run(&s.scenario)
        .await;
    assert_eq!(statuses(&outcome), [StepStatus::Skipped]);
    match outcome.verdict() {
        Verdict::NotApplicable(why) => assert!(why.contains("`share_session`"), "{why}"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn an_error_where_a_result_was_expected_shows_the_error() {
    let mut s = setup(
        "timeout: 1s\nsteps:\n  - request: { method: files/search, result: { files: $array }, rule: device.hello.first }\n",
    );
    let run = spawn_run(&s);
    let asked = s.remote.next().await;
    s.remote.send(json!({"jsonrpc": "2.0", "id": asked["id"], "error": {"code": -32601, "message": "method not found"}}));
    let (outcome, _) = run.await.expect("the run ends");
    let failure = outcome.steps[0].failure.clone().expect("a failure");
    assert_eq!(
        failure.summary,
        "`files/search` was refused with error -32601 (method not found) where the spec wants a result"
    );
    let diff = failure.diff.expect("a diff");
    assert!(diff.contains("+  \"error\": {"), "{diff}");
    assert_eq!(
        failure.nearest.expect("the answer")["error"]["code"],
        -32601
    );
}

#[tokio::test(start_paused = true)]
async fn a_timed_out_expect_shows_no_other_method_as_nearest_but_what_came() {
    let s = setup(
        "timeout: 1s\nsteps:\n  - expect: { method: model/asked, rule: device.hello.first }\n",
    );
    s.remote
        .send(notification("session/update", json!({"n": 1})));
    s.remote
        .send(notification("session/update", json!({"n": 2})));
    let (outcome, _) = run(&s).await;
    let failure = outcome.steps[0].failure.clone().expect("a failure");
    assert!(failure.nearest.is_none(), "{failure:?}");
    assert!(failure.diff.is_none(), "{failure:?}");
    assert!(
        failure.summary.contains("none came in the whole run"),
        "{}",
        failure.summary
    );
    assert!(
        failure.summary.contains("2 × `session/update`"),
        "{}",
        failure.summary
    );
}

#[tokio::test(start_paused = true)]
async fn when_on_a_value_runs_only_the_reading_that_holds() {
    let s = setup(
        "vars: { state: { turnId: t9 } }\nsteps:\n  - when: { that: \"${state}\", matches: { turnId: t9 }, steps: [ { notify: { method: running } } ] }\n  - when: { that: \"${state}\", matches: { turnId: $none }, steps: [ { notify: { method: unknown } } ] }\n",
    );
    let (outcome, _) = run(&s).await;
    assert_eq!(
        statuses(&outcome),
        [StepStatus::Passed, StepStatus::Skipped]
    );
}

#[tokio::test(start_paused = true)]
async fn an_answer_pattern_accepts_either_reading() {
    for reply in [
        json!({"result": {"title": "cut"}}),
        json!({"error": {"code": -32602, "message": "too long"}}),
    ] {
        let mut s = setup(
            "timeout: 1s\nsteps:\n  - request: { method: title, answer: { $one_of: [ { result: { title: $string } }, { error: { code: -32602 } } ] } }\n",
        );
        let run = spawn_run(&s);
        let asked = s.remote.next().await;
        let mut answer = reply.clone();
        answer["jsonrpc"] = json!("2.0");
        answer["id"] = asked["id"].clone();
        s.remote.send(answer);
        let (outcome, _) = run.await.expect("the run ends");
        assert_eq!(outcome.verdict(), Verdict::Passed, "{reply}");
    }
}

/// An actor that records the actions it is given and answers with a session id.
#[derive(Default)]
struct Recorder(std::sync::Mutex<Vec<Value>>);
impl harness::engine::Actor for Recorder {
    fn act<'a>(
        &'a self,
        action: Value,
        _timeout: Duration,
    ) -> std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<Value, harness::engine::ActError>> + Send + 'a>,
    > {
        self.0.lock().expect("lock").push(action);
        Box::pin(async { Ok(json!({ "sessionId": "ses_42" })) })
    }
}

#[tokio::test(start_paused = true)]
async fn an_action_gets_its_variables_substituted_wherever_they_stand() {
    let s = setup(
        "steps:\n  - act: { open: {}, capture: { chat: sessionId } }\n  - act: { ask: { chat: \"${chat}\", deep: [{ also: \"in ${chat} too\" }] } }\n",
    );
    let recorder = Arc::new(Recorder::default());
    let outcome = runner(&s.hub, &s.scenario)
        .with_actor(recorder.clone())
        .run(&s.scenario)
        .await;
    assert_eq!(outcome.verdict(), Verdict::Passed);
    let actions = recorder.0.lock().expect("lock").clone();
    assert_eq!(
        actions[1],
        json!({ "ask": { "chat": "ses_42", "deep": [{ "also": "in ses_42 too" }] } })
    );
}

#[tokio::test(start_paused = true)]
async fn an_expect_captures_what_this_double_answered_the_request() {
    let s = setup(
        "timeout: 1s\nsteps:\n  - expect: { method: session/new, capture: { code: answer.error.code, asked: params.cwd } }\n  - check: { that: \"${code}\", matches: -32601, rule: device.hello.first }\n",
    );
    s.remote
        .send(request(json!(7), "session/new", json!({ "cwd": "/w" })));
    let (outcome, _) = run(&s).await;
    assert_eq!(outcome.verdict(), Verdict::Passed, "{outcome:?}");
}

#[tokio::test(start_paused = true)]
async fn an_answer_too_large_to_keep_is_not_kept_whole() {
    let s = setup(
        "timeout: 1s\nhandlers:\n  - { method: big, result: { blob: \"${base64:70000}\" } }\nsteps:\n  - expect: { method: big, capture: { kept: answer } }\n  - check: { that: \"${kept}\", matches: { too_large_to_keep: 65536 }, rule: device.hello.first }\n",
    );
    s.remote.send(request(json!(1), "big", json!({})));
    let (outcome, _) = run(&s).await;
    assert_eq!(outcome.verdict(), Verdict::Passed, "{outcome:?}");
}

#[tokio::test(start_paused = true)]
async fn a_when_on_needs_skips_what_the_peer_did_not_claim_and_goes_on() {
    let mut s = setup_with(
        "steps:\n  - when: { needs: [files], steps: [ { request: { method: files/search } } ] }\n  - when: { needs: [title], steps: [ { notify: { method: titled } } ] }\n  - notify: { method: after }\n",
        Arc::new(Unclaimed),
    );
    let (outcome, _) = run(&s).await;
    assert_eq!(
        statuses(&outcome),
        [StepStatus::Skipped, StepStatus::Passed, StepStatus::Passed]
    );
    assert_eq!(outcome.verdict(), Verdict::Passed);
    let sent: Vec<Value> = s.remote.sent();
    let methods: Vec<&str> = sent.iter().filter_map(|m| m["method"].as_str()).collect();
    assert_eq!(methods, ["titled", "after"]);
}

#[tokio::test(start_paused = true)]
async fn nothing_is_sent_to_a_peer_that_never_said_what_it_claims() {
    let mut s = setup_with(
        "timeout: 1s\nsteps:\n  - request: { method: never/said, rule: device.hello.first }\n",
        Arc::new(Unclaimed),
    );
    let (outcome, elapsed) = run(&s).await;
    assert_elapsed(elapsed, Duration::from_secs(1));
    assert_eq!(outcome.verdict(), Verdict::Failed);
    let failure = outcome.steps[0].failure.clone().expect("a failure");
    assert!(
        failure.summary.contains("was not sent"),
        "{}",
        failure.summary
    );
    assert!(s.remote.sent().is_empty());
}

/// A link that came before the peer's process ended is the reconnect `expect_reconnect` waits
/// for, however late the step looks (a device's second link, closed with 4400, and its process
/// ending on it): both are ready at once here, and the link must win every time, not half.
#[tokio::test(start_paused = true)]
async fn a_link_before_the_process_ended_is_the_reconnect() {
    for _ in 0..20 {
        let s = setup("steps:\n  - expect_reconnect: { within: 5s }\n");
        s.remote.close(1012, "rolled back");
        let deadline = Instant::now() + Duration::from_secs(5);
        while s.hub.links().iter().all(|l| l.closed.is_none()) {
            assert!(Instant::now() < deadline, "the hub never saw link 1 close");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let _second = link(&s.hub);
        let process = harness::embed::InProcessPeer::new();
        process.ended(4);
        let outcome = runner(&s.hub, &s.scenario)
            .with_process(Some(process))
            .run(&s.scenario)
            .await;
        assert_eq!(statuses(&outcome), [StepStatus::Passed], "{outcome:?}");
    }
}

/// A double of a family whose frames are typed objects (`{"type": …}`), not JSON-RPC.
struct Typed;
impl Behaviour for Typed {
    fn framing(&self) -> harness::jsonrpc::Framing {
        harness::jsonrpc::Framing::Typed(harness::jsonrpc::TypedFrames {
            kind_key: "type",
            not_json: "typed.json",
            not_typed: "typed.object",
            not_text: "typed.text",
        })
    }
}

#[tokio::test(start_paused = true)]
async fn typed_frames_are_expected_whole_and_malformed_ones_break_the_familys_rules() {
    let mut s = setup_with(
        "family: lvmh\nsteps:\n  - expect: { message: { type: hello, seq: 0 }, capture: { first: $ } }\n  - send: { message: { type: welcome, lastSeq: 0 } }\n",
        Arc::new(Typed),
    );
    s.remote.text("this is not json");
    s.remote.send(json!([1, 2]));
    s.remote.send(json!({"seq": 1}));
    // A JSON-RPC message is no typed frame either, and nothing answers it.
    s.remote.send(notification("hello", json!({})));
    s.remote.send(json!({"v": 1, "type": "hello", "seq": 0}));

    let (outcome, _) = run(&s).await;

    assert_eq!(statuses(&outcome), [StepStatus::Passed, StepStatus::Passed]);
    let rules: Vec<String> = outcome.findings.iter().map(|f| f.rule.clone()).collect();
    assert_eq!(
        rules,
        ["typed.json", "typed.object", "typed.object", "typed.object"]
    );
    assert_eq!(
        s.hub.vars.lock().unwrap().get("first").cloned(),
        Some(json!({"v": 1, "type": "hello", "seq": 0}))
    );
    // Nothing was answered: only what the step sent went out.
    assert_eq!(s.remote.sent(), [json!({"type": "welcome", "lastSeq": 0})]);
}

#[test]
fn an_lvmh_scenario_refuses_what_its_links_cannot_carry() {
    for (step, says) in [
        ("request: { method: m }", "not JSON-RPC"),
        ("notify: { method: m }", "not JSON-RPC"),
        ("expect: { method: hello }", "expect `message"),
        ("when: { protocol: 2, steps: [] }", "one version"),
    ] {
        let text = format!("{HEAD}family: lvmh\nsteps:\n  - {step}\n");
        let error = load_str(&text, "t.yaml", None).expect_err(step).to_string();
        assert!(error.contains("t.yaml:5"), "{step}: {error}");
        assert!(error.contains(says), "{step}: {error}");
    }
    let matrix = format!("{HEAD}family: lvmh\nmatrix: {{ protocol: [2] }}\nsteps: []\n");
    let error = load_str(&matrix, "t.yaml", None).expect_err("matrix");
    assert!(error.to_string().contains("no matrix"), "{error}");
    let one_cell = load_str(&format!("{HEAD}family: lvmh\nsteps: []\n"), "t.yaml", None)
        .expect("an empty lvmh scenario loads");
    assert_eq!(
        harness::engine::Cell::all_of(&one_cell),
        [harness::engine::Cell::Lvmh]
    );
}
