//! The lvmh plugin with no daemon at its start: the agent works all the same, keeps its events,
//! and once a daemon comes up the plugin links and replays every one of them.

use std::time::Duration;

use fake_instance::FakeInstance;
use harness::lvmh::plugin::{Plugin, PluginConfig};
use harness::scenario::Family;

const TOKEN: &str = "lembas-test-token";

async fn until(what: &str, ready: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !ready() {
        assert!(tokio::time::Instant::now() < deadline, "{what} never came");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_down_at_the_start_changes_nothing_for_the_agent_and_gets_everything_later() {
    // A port nothing listens on yet.
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port");
    let mut config = PluginConfig::new(
        &format!("ws://{addr}/agent/ws"),
        TOKEN,
        "offline-start",
        "/work",
    );
    config.backoff = Duration::from_millis(20);
    let plugin = Plugin::start(
        config,
        std::sync::Arc::new(harness::journal::Journal::in_memory()),
        Default::default(),
        Default::default(),
        None,
        None,
    )
    .expect("the plugin starts");

    assert!(plugin.type_prompt("work without a daemon"));
    until("the agent's run", || plugin.is_idle()).await;
    let made = plugin.last_seq();
    assert!(made >= 5, "the agent ran: {made} events");
    assert!(!plugin.is_live());

    let daemon = FakeInstance::builder()
        .family(Family::Lvmh)
        .listen(addr)
        .start()
        .await
        .expect("the daemon starts on the plugin's port");
    until("the link", || plugin.is_live()).await;
    assert_eq!(plugin.welcomes(), [0]);
    assert_eq!(
        plugin.replayed(),
        made,
        "every event made offline is resent"
    );

    // The daemon has them all, but the deltas, in order.
    let url = format!("{}/api/sessions/offline-start/events", daemon.url());
    let sent: Vec<u64> = plugin
        .sent()
        .into_iter()
        .filter(|(_, kind)| harness::lvmh::envelope::is_persisted(kind))
        .map(|(seq, _)| seq)
        .collect();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let events: serde_json::Value = reqwest::Client::new()
            .get(&url)
            .bearer_auth(TOKEN)
            .send()
            .await
            .expect("the daemon answers")
            .json()
            .await
            .expect("a list");
        let seqs: Vec<u64> = events
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|e| e["seq"].as_u64())
            .collect();
        if seqs == sent {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "persisted {seqs:?}, sent {sent:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    plugin.kill();
    daemon.verdict().await.strict().assert_passed();
}
