//! A fleet (`fake-device --fleet N`): each device links with a token of its own, and a shard
//! runs its slice of the fleet's tokens, against fake-instance's library.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use fake_device::{FleetCount, FleetFinished, FleetTokens, Options, Shard, run_fleet};
use fake_instance::FakeInstance;

/// A simulated instance that lets only these tokens link.
async fn instance_accepting(tokens: Vec<String>) -> FakeInstance {
    FakeInstance::builder()
        .tokens(tokens)
        .start()
        .await
        .expect("the instance starts")
}

/// Runs `shard` of a fleet of `count` devices with tokens `tok-{i}` against an instance that
/// accepts only `accepted`, until `linked` devices are linked and the rest have stopped (or 30 s
/// pass); gives the most devices seen linked at once and how the fleet ended.
async fn fleet_against(
    accepted: &[&str],
    count: usize,
    shard: Shard,
    linked: usize,
) -> (usize, FleetFinished) {
    let instance = instance_accepting(accepted.iter().map(|t| t.to_string()).collect()).await;
    let state = tempfile::tempdir().expect("a state root");
    let tokens = FleetTokens::Pattern {
        pattern: "tok-{i}".into(),
        count,
    };
    let most = Arc::new(Mutex::new(0));
    let (reached_tx, reached_rx) = tokio::sync::watch::channel(false);
    let seen = most.clone();
    let report = move |now: FleetCount| {
        let mut most = seen.lock().expect("not poisoned");
        *most = (*most).max(now.linked);
        // Every device has settled too (linked, or stopped for good): a refused device's 401
        // may come after the others have linked, and the fleet must not end before it.
        if now.linked >= linked && now.linked + now.stopped >= now.devices {
            let _ = reached_tx.send(true);
        }
    };
    let shutdown = async move {
        let mut reached = reached_rx;
        let _ = tokio::time::timeout(Duration::from_secs(30), reached.wait_for(|r| *r)).await;
    };
    let finished = run_fleet(
        Options::for_instance(instance.url()),
        tokens.devices(shard),
        state.path().to_path_buf(),
        report,
        Duration::from_millis(20),
        shutdown,
    )
    .await;
    instance.dismiss();
    let most = *most.lock().expect("not poisoned");
    (most, finished)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_device_links_with_its_own_token() {
    // Device 1's token is refused and the other two link: devices sharing one token would be
    // refused together or linked together.
    let (most, finished) = fleet_against(&["tok-2", "tok-3"], 3, Shard::WHOLE, 2).await;
    assert_eq!(most, 2, "{finished:?}");
    assert_eq!(finished.devices, 3);
    assert_eq!(finished.unauthorized, 1, "{finished:?}");
    assert_eq!(finished.findings, 0, "{:?}", finished.examples);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shard_runs_its_slice_of_the_tokens() {
    // The second half of four: tokens 3 and 4, both accepted; 1 and 2 would be refused.
    let (most, finished) =
        fleet_against(&["tok-3", "tok-4"], 4, Shard { index: 2, of: 2 }, 2).await;
    assert_eq!(most, 2, "{finished:?}");
    assert_eq!(finished.devices, 2);
    assert_eq!(finished.unauthorized, 0, "{finished:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_opened_on_a_chosen_device_is_answered_by_that_device() {
    let tokens: Vec<String> = (1..=3).map(|i| format!("tok-{i}")).collect();
    let instance = instance_accepting(tokens.clone()).await;
    let state = tempfile::tempdir().expect("a state root");
    let (linked_tx, mut linked_rx) = tokio::sync::watch::channel(0);
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let fleet = tokio::spawn(run_fleet(
        Options::for_instance(instance.url()),
        FleetTokens::List(tokens).devices(Shard::WHOLE),
        state.path().to_path_buf(),
        move |count: FleetCount| {
            let _ = linked_tx.send(count.linked);
        },
        Duration::from_millis(20),
        async move {
            let _ = stop_rx.await;
        },
    ));
    tokio::time::timeout(Duration::from_secs(30), linked_rx.wait_for(|n| *n == 3))
        .await
        .expect("three devices link within 30 s")
        .expect("the fleet reports");
    // The first device, not the newest: a selector that is not followed opens it elsewhere.
    let opened = instance
        .act(fake_instance::WebAction::OpenChat(
            fake_instance::OpenChat {
                device: Some("device-1".into()),
                ..Default::default()
            },
        ))
        .await
        .expect("a chat opens on device-1");
    assert_eq!(opened["device"], "device-1", "{opened}");
    let chat = opened["sessionId"]
        .as_str()
        .expect("a session id")
        .to_string();
    instance.send(&chat, "hello").await.expect("sent");
    instance
        .wait_answered(&chat, Duration::from_secs(10))
        .await
        .expect("device-1 answers");
    let elsewhere = instance
        .act_within(
            fake_instance::WebAction::OpenChat(fake_instance::OpenChat {
                device: Some("device-9".into()),
                ..Default::default()
            }),
            Duration::from_millis(300),
        )
        .await;
    assert!(elsewhere.is_err(), "no device-9 is linked: {elsewhere:?}");
    let _ = stop_tx.send(());
    let finished = fleet.await.expect("the fleet ends");
    assert_eq!(finished.findings, 0, "{:?}", finished.examples);
    instance.dismiss();
}

#[tokio::test]
async fn a_shard_with_no_device_ends_at_once() {
    let tokens = FleetTokens::Pattern {
        pattern: "tok-{i}".into(),
        count: 1,
    };
    let none = tokens.devices(Shard { index: 1, of: 2 });
    assert!(none.is_empty());
    let state = tempfile::tempdir().expect("a state root");
    let finished = tokio::time::timeout(
        Duration::from_secs(10),
        run_fleet(
            Options::for_instance("http://127.0.0.1:9"),
            none,
            state.path().to_path_buf(),
            |_| {},
            Duration::from_millis(20),
            std::future::pending::<()>(),
        ),
    )
    .await
    .expect("an empty fleet ends by itself");
    assert_eq!(finished.devices, 0);
}
