//! The hostile-peer suite for the fake lvmh daemon: a plugin and a browser that send what no
//! plugin or browser should (frames that are not JSON, envelopes of the wrong types, events
//! before hello, numbers out of any range). Each is a finding naming the rule, nothing panics,
//! and the daemon goes on serving a well-behaved plugin.

use std::time::Duration;

use fake_instance::FakeInstance;
use fake_instance::Family;
use futures_util::{SinkExt, StreamExt};
use serde_json::Value;
use tokio::time::timeout;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

/// The longest any step here may take.
const DEADLINE: Duration = Duration::from_secs(10);

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn daemon() -> FakeInstance {
    FakeInstance::builder()
        .family(Family::Lvmh)
        .patience(Duration::from_millis(600))
        .start()
        .await
        .expect("the daemon starts")
}

/// The daemon's agent link, with its token.
async fn agent_link(daemon: &FakeInstance) -> Socket {
    let url = format!("{}/agent/ws", daemon.url().replacen("http", "ws", 1));
    let mut request = url.into_client_request().expect("a request");
    request.headers_mut().insert(
        "authorization",
        format!("Bearer {}", daemon.token())
            .parse()
            .expect("a header"),
    );
    let (socket, _) = timeout(DEADLINE, tokio_tungstenite::connect_async(request))
        .await
        .expect("linked in time")
        .expect("linked");
    socket
}

async fn send_all(socket: &mut Socket, frames: &[&str]) {
    for frame in frames {
        socket
            .send(Message::Text((*frame).into()))
            .await
            .expect("the frame goes out");
    }
}

/// The next JSON text frame the daemon sends.
async fn next_json(socket: &mut Socket) -> Value {
    timeout(DEADLINE, async {
        while let Some(message) = socket.next().await {
            if let Ok(Message::Text(text)) = message
                && let Ok(value) = serde_json::from_str(&text)
            {
                return value;
            }
        }
        panic!("the link ended");
    })
    .await
    .expect("a frame in time")
}

const HELLO: &str = r#"{"v":1,"type":"hello","sessionId":"s-1","seq":0,"ts":1799999999999,"session":{"id":"s-1","name":null,"cwd":"/w","model":"m","provider":"p","agent":false,"repo":null,"startedAt":1}}"#;

#[tokio::test]
async fn frames_that_are_no_envelope_are_findings_and_the_daemon_serves_on() {
    let daemon = daemon().await;
    let mut socket = agent_link(&daemon).await;
    send_all(
        &mut socket,
        &[
            "not json",
            "[1, 2]",
            r#"{"no": "type"}"#,
            r#"{"type": 7}"#,
            // An event before hello.
            r#"{"v":1,"type":"agent_settled","sessionId":"s-1","seq":1,"ts":1799999999999}"#,
        ],
    )
    .await;
    socket
        .send(Message::Binary(vec![0xff, 0x00].into()))
        .await
        .expect("the frame goes out");
    send_all(&mut socket, &[HELLO]).await;
    let welcome = next_json(&mut socket).await;
    assert_eq!(welcome["type"], "welcome", "{welcome}");
    assert_eq!(welcome["lastSeq"], 0, "{welcome}");
    // Envelopes of every wrong type, and numbers past any range.
    send_all(
        &mut socket,
        &[
            r#"{"v":"1","type":"agent_start","sessionId":"s-1","seq":1,"ts":1799999999999}"#,
            r#"{"v":1,"type":"agent_start","sessionId":5,"seq":1,"ts":1799999999999}"#,
            r#"{"v":1,"type":"agent_start","sessionId":"s-1","seq":"1","ts":1799999999999}"#,
            r#"{"v":1,"type":"agent_start","sessionId":"s-1","seq":-1,"ts":1799999999999}"#,
            r#"{"v":1,"type":"agent_start","sessionId":"s-1","seq":1e308,"ts":1799999999999}"#,
            r#"{"v":1,"type":"agent_start","sessionId":"s-1","seq":1,"ts":1e999}"#,
            // The largest seq there is, kept: the next hello's welcome says it.
            r#"{"v":1,"type":"agent_end","sessionId":"s-1","seq":18446744073709551615,"ts":1799999999999,"usage":{}}"#,
            r#"{"v":1,"type":"message_end","sessionId":"s-1","seq":1,"ts":1799999999999,"message":null}"#,
            r#"{"v":1,"type":"tool_execution_end","sessionId":"s-1","seq":2,"ts":1799999999999,"resultPreview":{"a":1}}"#,
        ],
    )
    .await;
    // The daemon still serves: once it kept the largest seq, the session's next link is
    // welcomed with it, and another session with none.
    let events = format!("{}/api/sessions/s-1/events", daemon.url());
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        let kept: Value = reqwest::Client::new()
            .get(&events)
            .bearer_auth(daemon.token())
            .send()
            .await
            .expect("the daemon answers")
            .json()
            .await
            .expect("a list");
        let largest = kept
            .as_array()
            .into_iter()
            .flatten()
            .any(|e| e["seq"] == u64::MAX);
        if largest {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "never kept: {kept}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut again = agent_link(&daemon).await;
    send_all(&mut again, &[HELLO]).await;
    let welcome = timeout(DEADLINE, async {
        loop {
            let frame = next_json(&mut again).await;
            if frame["type"] == "welcome" {
                return frame;
            }
        }
    })
    .await
    .expect("welcomed in time");
    assert_eq!(welcome["lastSeq"], u64::MAX, "{welcome}");
    let mut other = agent_link(&daemon).await;
    send_all(&mut other, &[&HELLO.replace("s-1", "s-2")]).await;
    assert_eq!(next_json(&mut other).await["type"], "welcome");
    let broken = daemon.verdict().await.broken_rules();
    for rule in [
        "lvmh.frames.json",
        "lvmh.plugin.hello.first",
        "lvmh.envelope",
        "lvmh.plugin.message_end.shape",
        "lvmh.plugin.tool_end.shape",
    ] {
        assert!(broken.contains(&rule.to_string()), "{rule}: {broken:?}");
    }
}

#[tokio::test]
async fn a_browser_that_sends_nonsense_is_a_finding_and_its_link_goes_on() {
    let daemon = daemon().await;
    let url = format!(
        "{}/ws?token={}",
        daemon.url().replacen("http", "ws", 1),
        daemon.token()
    );
    let (mut browser, _) = timeout(DEADLINE, tokio_tungstenite::connect_async(url))
        .await
        .expect("opened in time")
        .expect("opened");
    send_all(
        &mut browser,
        &[
            "{",
            r#"{"type":"subscribe"}"#,
            r#"{"type":"subscribe","sessionId":123}"#,
            r#"{"type":"unsubscribe","sessionId":null}"#,
            r#"{"type":"who knows"}"#,
        ],
    )
    .await;
    // A plugin's session still reaches the browser's list.
    let mut plugin = agent_link(&daemon).await;
    send_all(&mut plugin, &[HELLO]).await;
    let list = timeout(DEADLINE, async {
        loop {
            let frame = next_json(&mut browser).await;
            if frame["type"] == "session_list"
                && frame["sessions"]
                    .as_array()
                    .is_some_and(|s| s.iter().any(|s| s["id"] == "s-1"))
            {
                return frame;
            }
        }
    })
    .await
    .expect("the list in time");
    assert_eq!(list["sessions"][0]["online"], true, "{list}");
    let broken = daemon.verdict().await.broken_rules();
    assert_eq!(broken, ["lvmh.frames.json"], "{broken:?}");
}
