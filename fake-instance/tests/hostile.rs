//! The hostile-peer suite, fake-instance's side (issue 16): a device that sends what no device
//! should. Each gets a finding naming the rule, no panic, no hang past a deadline, and the
//! double stays up for a well-behaved peer.

use std::time::Duration;

#[path = "common/raw_link.rs"]
mod raw_link;

use fake_instance::FakeInstance;
use futures_util::{SinkExt, StreamExt};
use tokio::time::timeout;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::frame::Frame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::{Data, OpCode};

/// How long the instance waits for what a device owes, in these tests.
const PATIENCE: Duration = Duration::from_millis(600);
/// The longest any step here may take.
const DEADLINE: Duration = Duration::from_secs(10);

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn instance() -> FakeInstance {
    FakeInstance::builder()
        .patience(PATIENCE)
        .start()
        .await
        .expect("fake-instance starts")
}

async fn link(instance: &FakeInstance) -> Socket {
    let mut request = instance.ws_url().into_client_request().expect("a request");
    request.headers_mut().insert(
        "authorization",
        format!("Bearer {}", instance.token())
            .parse()
            .expect("a header"),
    );
    let (socket, _) = timeout(DEADLINE, tokio_tungstenite::connect_async(request))
        .await
        .expect("linked in time")
        .expect("linked");
    socket
}

/// The close code the instance ends the link with (none: the stream just ended).
async fn close_code(socket: &mut Socket) -> Option<u16> {
    raw_link::close_code(socket, DEADLINE)
        .await
        .expect("the instance ends the link in time")
}

/// Whether the instance answers a ping on `socket` (within [`DEADLINE`]): the link is up and
/// served.
async fn answers_ping(socket: &mut Socket) -> bool {
    socket
        .send(Message::Ping(b"there?".to_vec().into()))
        .await
        .expect("a ping goes out");
    timeout(DEADLINE, async {
        loop {
            match socket.next().await {
                Some(Ok(Message::Pong(_))) => return true,
                Some(Ok(_)) => continue,
                _ => return false,
            }
        }
    })
    .await
    .expect("answered in time")
}

#[tokio::test]
async fn a_device_that_never_says_hello_is_flagged_and_its_link_closed() {
    let instance = instance().await;
    let mut silent = link(&instance).await;
    assert_eq!(close_code(&mut silent).await, Some(1008));
    let report = instance.verdict().await;
    assert_eq!(report.broken_rules(), ["device.hello.first"]);
}

#[tokio::test]
async fn a_text_frame_that_is_not_utf8_is_a_finding_and_a_1007_close() {
    let instance = instance().await;
    let mut socket = link(&instance).await;
    let frame = Frame::message(vec![b'{', 0xc3, 0x28, b'}'], OpCode::Data(Data::Text), true);
    socket
        .send(Message::Frame(frame))
        .await
        .expect("the frame goes out");
    assert_eq!(close_code(&mut socket).await, Some(1007));
    let report = instance.verdict().await;
    assert!(
        report.broken_rules().contains(&"jsonrpc.text".to_string()),
        "{:?}",
        report.broken_rules()
    );
}

#[tokio::test]
async fn a_hello_with_protocol_minus_one_or_1e308_is_a_wrong_protocol() {
    for said in ["-1", "1e308"] {
        let instance = instance().await;
        let mut socket = link(&instance).await;
        let hello = format!(
            r#"{{"jsonrpc":"2.0","method":"_lembas/hello","params":{{"protocol":{said},"version":"1.3.0","harness_spec":"1.1.0","device":{{"host":"h","platform":"linux"}},"limits":{{"roots":[],"max_mode":"edit","require_trust":true}}}}}}"#
        );
        socket
            .send(Message::Text(hello.into()))
            .await
            .expect("hello goes out");
        // The instance answers hello with initialize; that it came is enough.
        let first = timeout(DEADLINE, socket.next()).await.expect("in time");
        assert!(matches!(first, Some(Ok(Message::Text(_)))), "{first:?}");
        let report = instance.verdict().await;
        assert!(
            report
                .broken_rules()
                .contains(&"device.hello.protocol".to_string()),
            "{said}: {:?}",
            report.broken_rules()
        );
    }
}

#[tokio::test]
async fn a_binary_frame_is_a_finding_and_the_link_goes_on() {
    let instance = instance().await;
    let mut socket = link(&instance).await;
    socket
        .send(Message::Binary(vec![0xff, 0x00].into()))
        .await
        .expect("the frame goes out");
    assert!(
        answers_ping(&mut socket).await,
        "the link stays up after a binary frame"
    );
    let report = instance.verdict().await;
    assert!(report.broken_rules().contains(&"jsonrpc.text".to_string()));
}

/// A hello as a protocol-2 device says it.
const HELLO: &str = r#"{"jsonrpc":"2.0","method":"_lembas/hello","params":{"protocol":2,"version":"1.3.0","harness_spec":"1.1.0","device":{"host":"h","platform":"linux"},"limits":{"roots":[],"max_mode":"edit","require_trust":true}}}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_device_that_never_reads_is_held_back_and_the_instance_serves_on() {
    let instance = FakeInstance::builder()
        .patience(Duration::from_secs(60))
        .start()
        .await
        .expect("fake-instance starts");
    let mut flood = link(&instance).await;
    flood
        .send(Message::Text(HELLO.into()))
        .await
        .expect("hello goes out");
    // Requests for a method no client has, each named with 100 kB: each answer (method not
    // found, naming it) is as long. 100 MB of answers, for a device that reads none of them.
    const REQUESTS: usize = 1000;
    let sent = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let sender = tokio::spawn({
        let sent = sent.clone();
        async move {
            let name = "m".repeat(100_000);
            for id in 0..REQUESTS {
                let request = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"{name}"}}"#);
                if flood.send(Message::Text(request.into())).await.is_err() {
                    break;
                }
                sent.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            flood
        }
    });
    // Until the flood stops going anywhere: held back, its requests no longer read (3 s without
    // one going out: long enough that a busy machine's pause is not taken for it).
    let count = || sent.load(std::sync::atomic::Ordering::Relaxed);
    timeout(Duration::from_secs(120), async {
        loop {
            let before = count();
            tokio::time::sleep(Duration::from_secs(3)).await;
            if count() == before || count() == REQUESTS {
                return;
            }
        }
    })
    .await
    .expect("the flood settles");
    assert!(
        count() < REQUESTS,
        "the instance read every request of a device that read none of its answers"
    );
    assert!(
        !sender.is_finished(),
        "the flood's link ended after {} requests, instead of being held back",
        count()
    );
    // The instance stays at the service of everyone else meanwhile.
    let discovery = timeout(
        DEADLINE,
        reqwest::get(format!("{}/.well-known/lembas.json", instance.url())),
    )
    .await
    .expect("discovery answers in time")
    .expect("discovery answers");
    assert!(discovery.status().is_success());
    // A well-behaved device linking meanwhile is served at the protocol's level, not only the
    // socket's: its hello is answered with initialize.
    let mut other = link(&instance).await;
    other
        .send(Message::Text(HELLO.into()))
        .await
        .expect("hello goes out");
    let initialize = next_json(&mut other).await;
    assert_eq!(initialize["method"], "initialize", "{initialize}");
    sender.abort();
    let report = instance.verdict().await;
    let paused = report
        .recent()
        .iter()
        .find(|e| e.msg["event"] == "reading_paused");
    if let Some(paused) = paused {
        let queued = paused.msg["queued_bytes"].as_u64().unwrap_or_default();
        assert!(
            queued < 16 * 1024 * 1024,
            "it stopped with {queued} bytes queued, not near the outbox's high water"
        );
    }
}

/// The next JSON message the instance sends on `socket`.
async fn next_json(socket: &mut Socket) -> serde_json::Value {
    raw_link::next_json(socket, DEADLINE)
        .await
        .expect("a message in time")
        .expect("the link goes on")
}

#[tokio::test]
async fn a_request_reusing_the_id_of_one_unanswered_is_refused_and_a_finding() {
    let instance = FakeInstance::builder()
        .patience(PATIENCE)
        .cards(fake_instance::CardPolicy {
            permission: fake_instance::PermissionPolicy::Ignore,
            ..Default::default()
        })
        .start()
        .await
        .expect("fake-instance starts");
    let mut socket = link(&instance).await;
    socket
        .send(Message::Text(HELLO.into()))
        .await
        .expect("hello goes out");
    // An approval the person leaves up (the instance takes it down after its 30 s timeout):
    // the first request is still unanswered when the second, with its id, comes.
    let card = r#"{"jsonrpc":"2.0","id":77,"method":"session/request_permission","params":{"sessionId":"ses_1","toolCall":{"toolCallId":"call_1","title":"rm"},"options":[{"optionId":"allow","name":"Allow","kind":"allow_once"}]}}"#;
    for _ in 0..2 {
        socket.send(Message::Text(card.into())).await.expect("sent");
    }
    let refused = loop {
        let message = next_json(&mut socket).await;
        if message["id"] == 77 && message.get("method").is_none() {
            break message;
        }
    };
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    let report = instance.verdict().await;
    assert!(
        report
            .broken_rules()
            .contains(&"jsonrpc.request.id".to_string()),
        "{:?}",
        report.broken_rules()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_device_gone_silent_after_hello_is_pinged_then_let_go() {
    // What a half-open TCP connection looks like: the device's machine vanished, no FIN came,
    // and nothing more ever will (this test's socket is not read, so not even a pong).
    let silence = Duration::from_millis(100);
    let instance = FakeInstance::builder()
        .patience(Duration::from_secs(60))
        .silence(silence)
        .start()
        .await
        .expect("fake-instance starts");
    let mut gone = link(&instance).await;
    gone.send(Message::Text(HELLO.into()))
        .await
        .expect("hello goes out");
    // Far past two silences: the instance has pinged, waited, and let go by then.
    tokio::time::sleep(30 * silence).await;
    let mut pings = 0;
    let code = timeout(DEADLINE, async {
        while let Some(message) = gone.next().await {
            match message {
                Ok(Message::Ping(_)) => pings += 1,
                Ok(Message::Close(frame)) => return frame.map(|f| u16::from(f.code)),
                Ok(_) => continue,
                Err(_) => return None,
            }
        }
        None
    })
    .await
    .expect("the link ended");
    assert_eq!(code, Some(1001), "after {pings} pings");
    assert_eq!(pings, 1, "one ping, then the link let go");
    instance.dismiss();
}
