//! The hostile-peer suite for the fake lvmh plugin: a daemon that sends what no daemon should
//! (frames that are not JSON, a welcome without a whole `lastSeq` or with the largest one
//! there is, a prompt without its fields, an abort for another session). Each is a finding
//! naming the rule, nothing panics, and the plugin goes on: a good prompt still runs.

use std::time::Duration;

use fake_device::FakeDevice;
use fake_device::Family;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::time::timeout;
use tokio_tungstenite::tungstenite::Message;

/// The longest any step here may take.
const DEADLINE: Duration = Duration::from_secs(10);

type Socket = tokio_tungstenite::WebSocketStream<tokio::net::TcpStream>;

/// The next JSON frame the plugin sends.
async fn next_json(socket: &mut Socket) -> Value {
    timeout(DEADLINE, async {
        while let Some(message) = socket.next().await {
            if let Ok(Message::Text(text)) = message
                && let Ok(value) = serde_json::from_str(&text)
            {
                return value;
            }
        }
        panic!("the plugin's link ended");
    })
    .await
    .expect("a frame in time")
}

async fn send(socket: &mut Socket, frame: &str) {
    socket
        .send(Message::Text(frame.into()))
        .await
        .expect("the frame goes out");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_that_sends_nonsense_is_judged_and_the_plugin_goes_on() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a port");
    let addr = listener.local_addr().expect("an address");
    let plugin = FakeDevice::builder(format!("http://{addr}"))
        .family(Family::Lvmh)
        .start()
        .await
        .expect("the plugin starts");
    let (tcp, _) = timeout(DEADLINE, listener.accept())
        .await
        .expect("dialled in time")
        .expect("dialled");
    let mut socket = tokio_tungstenite::accept_async(tcp)
        .await
        .expect("the upgrade");
    let hello = next_json(&mut socket).await;
    assert_eq!(hello["type"], "hello", "{hello}");
    let session = hello["sessionId"].as_str().expect("a session").to_string();
    let frame = |kind: &str, fields: Value| {
        let mut frame = json!({"v": 1, "type": kind, "sessionId": session, "seq": 0, "ts": 1});
        if let (Some(frame), Value::Object(fields)) = (frame.as_object_mut(), fields) {
            frame.extend(fields);
        }
        frame.to_string()
    };
    for nonsense in ["not json", "[]", r#"{"type": null}"#] {
        send(&mut socket, nonsense).await;
    }
    // The largest lastSeq there is: the daemon says it has more than was ever sent. Then a
    // second welcome, without a number.
    send(&mut socket, &frame("welcome", json!({"lastSeq": u64::MAX}))).await;
    send(&mut socket, &frame("welcome", json!({"lastSeq": "none"}))).await;
    send(&mut socket, &frame("prompt", json!({}))).await;
    send(
        &mut socket,
        &json!({"v": 1, "type": "abort", "sessionId": "someone-else", "seq": 0, "ts": 1})
            .to_string(),
    )
    .await;
    // A good prompt still runs to its end.
    send(
        &mut socket,
        &frame(
            "prompt",
            json!({"promptId": "p-1", "message": "still there?"}),
        ),
    )
    .await;
    let settled = timeout(DEADLINE, async {
        loop {
            let frame = next_json(&mut socket).await;
            if frame["type"] == "agent_settled" {
                return frame;
            }
        }
    })
    .await
    .expect("the run ends in time");
    assert_eq!(settled["sessionId"], session.as_str());
    let broken = plugin.verdict().await.broken_rules();
    for rule in [
        "lvmh.frames.json",
        "lvmh.daemon.welcome.last_seq",
        "lvmh.daemon.prompt.routed",
        "lvmh.daemon.envelope",
    ] {
        assert!(broken.contains(&rule.to_string()), "{rule}: {broken:?}");
    }
}
