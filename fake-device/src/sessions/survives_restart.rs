//! A restart of the device on the same state directory keeps its sessions and its turns'
//! answers: a repeated turn id gets the first run's answer and does not run again.

use std::sync::Arc;
use std::time::Duration;

use crate::events::{Client, Quirks, Route};
use crate::limits::Limits;
use crate::methods::route::{Faults, handle};
use crate::registry::SessionsConfig;
use crate::sessions::Sessions;
use crate::store::Store;
use harness::finding::Findings;
use harness::journal::Journal;
use harness::jsonrpc::{Dispatch, LinkEvent, Peer, PeerConfig};
use harness::lembas::Spec;
use harness::transport::{Connection, Outgoing};
use serde_json::{Value, json};
use tokio::sync::mpsc;

struct Quiet;

impl Dispatch for Quiet {
    fn on_event(&self, _: &Arc<Peer>, _: LinkEvent) {}
}

/// A client whose messages land in a channel we read; the sender keeps its link open.
fn client() -> (
    Client,
    harness::transport::OutboxReceiver,
    mpsc::Sender<harness::transport::Incoming>,
) {
    let (outgoing, sent) = harness::transport::outbox();
    let (keep_open, incoming) = mpsc::channel(16);
    let peer = Peer::start(
        Connection {
            outgoing,
            incoming,
            peer: "test".into(),
        },
        PeerConfig {
            link: 1,
            ..Default::default()
        },
        Arc::new(Journal::in_memory()),
        Arc::new(Findings::default()),
        Arc::new(Quiet),
    );
    (
        Client::new(
            Route {
                peer,
                lembas: true,
                protocol: 2,
                asks: true,
            },
            Quirks::default(),
        ),
        sent,
        keep_open,
    )
}

fn sessions(state: &std::path::Path, root: &std::path::Path) -> Arc<Sessions> {
    sessions_stepping(state, root, Duration::from_millis(1))
}

fn sessions_stepping(
    state: &std::path::Path,
    root: &std::path::Path,
    step_delay: Duration,
) -> Arc<Sessions> {
    let spec = Spec::V1_1_0;
    Sessions::new(
        Store::open(state).expect("store opens"),
        Limits::new(&[root.display().to_string()]),
        SessionsConfig {
            spec,
            capabilities: spec.capabilities(),
            misbehave: Default::default(),
            step_delay,
            connection: "lembas".into(),
            stdio: false,
            account: crate::account::Account::well_behaved("http://127.0.0.1:9", "unused"),
            model: None,
            approval_timeout: Duration::from_secs(5),
            scripts: Vec::new(),
            terminal_answers_after: None,
            library_local: false,
        },
    )
}

/// Calls a session method and waits for its answer, which must be a success.
async fn call(sessions: &Arc<Sessions>, method: &str, params: &Value, client: &Client) -> Value {
    let faults = Faults::of(&sessions.registry().config.misbehave);
    let reply = handle(sessions, &faults, method, params, client)
        .await
        .unwrap_or_else(|| panic!("{method} is a session method"));
    reply
        .wait()
        .await
        .unwrap_or_else(|e| panic!("{method} failed: {e}"))
}

/// How many turns started, by the `task` start events sent so far.
fn starts(sent: &mut harness::transport::OutboxReceiver, turn: &str) -> usize {
    let mut n = 0;
    while let Ok(Outgoing::Text(text)) = sent.try_recv() {
        let message: Value = serde_json::from_str(&text).unwrap_or_default();
        if message["method"] == "_lembas/event"
            && message["params"]["event"]
                == json!({"type": "task", "state": "start", "turnId": turn})
        {
            n += 1;
        }
    }
    n
}

#[tokio::test]
async fn sessions_and_turn_answers_survive_a_restart() {
    let state = tempfile::tempdir().expect("state dir");
    let root = tempfile::tempdir().expect("root");
    let prompt = |sid: &str| json!({"sessionId": sid, "prompt": [{"type": "text", "text": "hello"}], "_meta": {"lembas": {"turnId": "t1"}}});

    let (first_client, mut first_sent, _first_link) = client();
    let before = sessions(state.path(), root.path());
    let created = call(
        &before,
        "session/new",
        &json!({"cwd": root.path()}),
        &first_client,
    )
    .await;
    let sid = created["sessionId"].as_str().expect("an id").to_string();
    let answer = call(&before, "session/prompt", &prompt(&sid), &first_client).await;
    assert_eq!(answer["_meta"]["lembas"]["turnId"], "t1");
    assert_eq!(starts(&mut first_sent, "t1"), 1);
    drop(before);

    let (second_client, mut second_sent, _second_link) = client();
    let after = sessions(state.path(), root.path());
    let again = call(&after, "session/prompt", &prompt(&sid), &second_client).await;
    assert_eq!(again, answer, "the first run's answer");
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(
        starts(&mut second_sent, "t1"),
        0,
        "the turn did not run again"
    );
    let status = call(
        &after,
        "_lembas/session/status",
        &json!({"sessionId": sid}),
        &second_client,
    )
    .await;
    assert_eq!(status["exists"], true);
    assert_eq!(status["lastTurnId"], "t1");
}

#[tokio::test]
async fn a_turn_cut_short_by_a_restart_runs_when_its_prompt_comes_again() {
    let state = tempfile::tempdir().expect("state dir");
    let root = tempfile::tempdir().expect("root");
    let prompt = |sid: &str| json!({"sessionId": sid, "prompt": [{"type": "text", "text": "hello"}], "_meta": {"lembas": {"turnId": "t1"}}});
    let (first_client, _first_sent, _first_link) = client();
    let slow = sessions_stepping(state.path(), root.path(), Duration::from_secs(30));
    let created = call(
        &slow,
        "session/new",
        &json!({"cwd": root.path()}),
        &first_client,
    )
    .await;
    let sid = created["sessionId"].as_str().expect("an id").to_string();
    // t1 starts and is stored as running; then the device "stops" before it ends.
    let faults = Faults::of(&slow.registry().config.misbehave);
    let pending = handle(
        &slow,
        &faults,
        "session/prompt",
        &prompt(&sid),
        &first_client,
    )
    .await;
    assert!(pending.is_some());
    drop(pending);

    let (second_client, _second_sent, _second_link) = client();
    let restarted = sessions(state.path(), root.path());
    // Unknown after the restart: sent again, it runs and is answered.
    let answer = tokio::time::timeout(
        Duration::from_secs(5),
        call(&restarted, "session/prompt", &prompt(&sid), &second_client),
    )
    .await
    .expect("answered, not left waiting for a turn nobody runs");
    assert_eq!(answer["_meta"]["lembas"]["turnId"], "t1");
}
