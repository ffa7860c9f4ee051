//! The hostile-peer suite, fake-device's side (issue 16): an instance that sends what no
//! instance should. Each gets a finding naming the rule where the spec has one, no panic, no
//! hang past a deadline, and the device goes on serving (or, when the link could not go on,
//! dials again).

use std::time::Duration;

#[path = "../../fake-instance/tests/common/raw_link.rs"]
mod raw_link;

use fake_device::FakeDevice;
use futures_util::{SinkExt, StreamExt};
use harness::lembas::DISCOVERY_PATH;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::time::timeout;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;

/// The longest any step here may take.
const DEADLINE: Duration = Duration::from_secs(10);

/// The largest frame the device takes in these tests (small, so "too large" is cheap to send).
const FRAME_LIMIT: usize = 1024 * 1024;

type Socket = WebSocketStream<TcpStream>;

/// A raw instance: serves discovery, and hands each link the device dials to the test.
struct HostileInstance {
    url: String,
    links: mpsc::UnboundedReceiver<Socket>,
}

impl HostileInstance {
    async fn start() -> HostileInstance {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("a port");
        let url = format!("http://{}", listener.local_addr().expect("an address"));
        let (linked, links) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let linked = linked.clone();
                tokio::spawn(serve_connection(stream, linked));
            }
        });
        HostileInstance { url, links }
    }

    /// Whether the device dials again, and serves that link.
    async fn dialled_again_and_served(&mut self) -> bool {
        let mut again = self.initialized_link().await;
        still_serves(&mut again, 1).await
    }

    /// The next link the device dials, once it said hello, initialized.
    async fn initialized_link(&mut self) -> Socket {
        let mut socket = timeout(DEADLINE, self.links.recv())
            .await
            .expect("the device dials in time")
            .expect("a link");
        let hello = next_message(&mut socket).await;
        assert_eq!(hello["method"], "_lembas/hello", "{hello}");
        let protocol = hello["params"]["protocol"].as_u64().unwrap_or(1);
        send(
            &mut socket,
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": 1,
                "clientCapabilities": {"_meta": {"lembas": {"protocol": protocol}}},
            }}),
        )
        .await;
        let answer = answer_to(&mut socket, &json!(0)).await;
        assert!(answer.get("result").is_some(), "{answer}");
        socket
    }
}

/// Serves discovery over plain HTTP, or takes the WebSocket handshake of a link.
async fn serve_connection(stream: TcpStream, linked: mpsc::UnboundedSender<Socket>) {
    let mut peeked = [0u8; 512];
    let Ok(n) = stream.peek(&mut peeked).await else {
        return;
    };
    let head = String::from_utf8_lossy(&peeked[..n]);
    if head.starts_with(&format!("GET {DISCOVERY_PATH} ")) {
        answer_discovery(stream).await;
        return;
    }
    if let Ok(socket) = tokio_tungstenite::accept_async(stream).await {
        let _ = linked.send(socket);
    }
}

async fn answer_discovery(mut stream: TcpStream) {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let body = json!({"protocol": 1, "protocols": [1, 2]}).to_string();
    let response = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(response.as_bytes()).await;
}

async fn send(socket: &mut Socket, message: Value) {
    socket
        .send(Message::Text(message.to_string().into()))
        .await
        .expect("sent");
}

async fn send_text(socket: &mut Socket, text: &str) {
    socket
        .send(Message::Text(text.to_string().into()))
        .await
        .expect("sent");
}

/// The next JSON message from the device.
async fn next_message(socket: &mut Socket) -> Value {
    raw_link::next_json(socket, DEADLINE)
        .await
        .expect("a message in time")
        .expect("the link goes on")
}

/// The device's answer to request `id`, skipping what else it sends.
async fn answer_to(socket: &mut Socket, id: &Value) -> Value {
    loop {
        let message = next_message(socket).await;
        if message.get("id") == Some(id) && message.get("method").is_none() {
            return message;
        }
    }
}

/// Whether the device still serves the link: a request for a method it does not have is
/// answered with -32601.
async fn still_serves(socket: &mut Socket, id: u64) -> bool {
    send(
        socket,
        json!({"jsonrpc": "2.0", "id": id, "method": "_lembas/no_such_method"}),
    )
    .await;
    let answer = answer_to(socket, &json!(id)).await;
    answer["error"]["code"] == -32601
}

/// The close code the device ends the link with (none: the stream just ended).
async fn close_code(socket: &mut Socket) -> Option<u16> {
    raw_link::close_code(socket, DEADLINE)
        .await
        .expect("the device ends the link in time")
}

/// A device linked to a hostile instance, and the link it dialled (initialized).
struct Linked {
    instance: HostileInstance,
    device: FakeDevice,
    socket: Socket,
    /// Held for the device's life.
    _root: tempfile::TempDir,
}

/// Starts a raw instance and a device (with a [`FRAME_LIMIT`] frame limit, and `change` made
/// to its options), and takes the device's first link.
async fn linked_with(
    change: impl FnOnce(fake_device::DeviceBuilder) -> fake_device::DeviceBuilder,
) -> Linked {
    let mut instance = HostileInstance::start().await;
    let root = tempfile::tempdir().expect("a root");
    let device = change(
        FakeDevice::builder(instance.url.clone())
            .root(root.path())
            .max_message_bytes(FRAME_LIMIT),
    )
    .start()
    .await
    .expect("the device starts");
    let socket = instance.initialized_link().await;
    Linked {
        instance,
        device,
        socket,
        _root: root,
    }
}

async fn linked() -> Linked {
    linked_with(|device| device).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_messages_are_findings_and_the_device_serves_on() {
    let Linked {
        device,
        mut socket,
        _root: root,
        ..
    } = linked().await;
    let nested = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    for text in [
        "this is not JSON",
        "{\"jsonrpc\": \"2.0\", \"method\": ",
        &nested,
        // Wrong types in every field a message has.
        r#"{"jsonrpc": 2, "id": 5, "method": "session/new", "params": {}}"#,
        r#"{"jsonrpc": "2.0", "id": {"an": "object"}, "method": "session/new"}"#,
        r#"{"jsonrpc": "2.0", "id": 6, "method": 42}"#,
        r#"{"jsonrpc": "2.0", "id": 7, "method": "session/new", "params": "a string"}"#,
        r#"{"jsonrpc": "2.0", "id": 8, "method": "session/prompt", "params": {"sessionId": 1, "prompt": "x"}}"#,
        // A response to a request never sent.
        r#"{"jsonrpc": "2.0", "id": "never-asked", "result": {}}"#,
        "[]",
        "null",
    ] {
        send_text(&mut socket, text).await;
    }
    socket
        .send(Message::Binary(vec![0xff, 0x00, 0x7b].into()))
        .await
        .expect("sent");
    // A request whose id is that of one still waiting for its answer: a prompt runs a turn (the
    // echo agent's three pieces, 50 ms apart), and the same id again, in the same write, comes
    // while it runs. The second is refused (-32600); the first is still answered.
    let cwd = root.path().to_string_lossy().into_owned();
    send(
        &mut socket,
        json!({"jsonrpc": "2.0", "id": 90, "method": "session/new",
            "params": {"cwd": cwd, "mcpServers": []}}),
    )
    .await;
    let opened = answer_to(&mut socket, &json!(90)).await;
    let session = opened["result"]["sessionId"].clone();
    assert!(session.is_string(), "{opened}");
    let prompt = json!({"jsonrpc": "2.0", "id": 91, "method": "session/prompt",
        "params": {"sessionId": session, "prompt": [{"type": "text", "text": "a turn"}]}})
    .to_string();
    for _ in 0..2 {
        socket
            .feed(Message::Text(prompt.clone().into()))
            .await
            .expect("fed");
    }
    socket.flush().await.expect("sent");
    let refused = answer_to(&mut socket, &json!(91)).await;
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    let answered = answer_to(&mut socket, &json!(91)).await;
    assert!(answered["result"]["stopReason"].is_string(), "{answered}");
    assert!(still_serves(&mut socket, 1000).await);
    drop(socket);
    let report = device.verdict().await;
    let broken = report.broken_rules();
    for rule in [
        "jsonrpc.json",
        "jsonrpc.envelope",
        "jsonrpc.response.id",
        "jsonrpc.text",
        "jsonrpc.request.id",
    ] {
        assert!(broken.iter().any(|r| r == rule), "{rule} in {broken:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frame_over_the_limit_ends_the_link_with_1009_and_the_device_dials_again() {
    let Linked {
        mut instance,
        device,
        mut socket,
        ..
    } = linked().await;
    let huge = format!(
        r#"{{"jsonrpc":"2.0","method":"x/huge","params":{{"data":"{}"}}}}"#,
        "x".repeat(4 * FRAME_LIMIT)
    );
    // The device may close while the frame is still going out.
    let _ = socket.send(Message::Text(huge.into())).await;
    assert_eq!(close_code(&mut socket).await, Some(1009));
    assert!(instance.dialled_again_and_served().await);
    device.dismiss();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_text_frame_that_is_not_utf8_is_a_finding_a_1007_close_and_a_new_dial() {
    use tokio_tungstenite::tungstenite::protocol::frame::Frame;
    use tokio_tungstenite::tungstenite::protocol::frame::coding::{Data, OpCode};
    let Linked {
        mut instance,
        device,
        mut socket,
        ..
    } = linked().await;
    let frame = Frame::message(vec![b'{', 0xc3, 0x28, b'}'], OpCode::Data(Data::Text), true);
    socket.send(Message::Frame(frame)).await.expect("sent");
    assert_eq!(close_code(&mut socket).await, Some(1007));
    assert!(instance.dialled_again_and_served().await);
    let report = device.verdict().await;
    assert!(
        report.broken_rules().iter().any(|r| r == "jsonrpc.text"),
        "{:?}",
        report.broken_rules()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_200_000_messages_is_taken_and_the_device_serves_on() {
    let Linked {
        device, mut socket, ..
    } = linked().await;
    let (mut sink, mut stream) = socket.split();
    // Its answers are read meanwhile: a device held back by an unread link is the backpressure
    // test's, not this one's.
    let reader = tokio::spawn(async move {
        while let Some(Ok(message)) = stream.next().await {
            if let Message::Text(text) = &message
                && text.contains("\"id\":\"last\"")
            {
                return Some(stream);
            }
        }
        None
    });
    let burst = json!({"jsonrpc": "2.0", "method": "x/burst", "params": {"n": 1}}).to_string();
    for _ in 0..200_000 {
        sink.feed(Message::Text(burst.clone().into()))
            .await
            .expect("fed");
    }
    sink.send(Message::Text(
        json!({"jsonrpc": "2.0", "id": "last", "method": "_lembas/unknown"})
            .to_string()
            .into(),
    ))
    .await
    .expect("sent");
    let stream = timeout(Duration::from_secs(60), reader)
        .await
        .expect("answered after the burst")
        .expect("the reader ends")
        .expect("the last request answered");
    socket = sink.reunite(stream).expect("one socket");
    assert!(still_serves(&mut socket, 2).await);
    drop(socket);
    let report = device.verdict().await;
    assert!(
        report.findings().len() <= harness::finding::FINDINGS_KEPT,
        "findings are bounded: {}",
        report.findings().len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_that_vanishes_mid_frame_is_dialled_again() {
    let Linked {
        mut instance,
        device,
        mut socket,
        ..
    } = linked().await;
    // A text frame's header saying 1000 bytes, then 3 of them, then nothing: the TCP stream
    // just ends.
    let stream = socket.get_mut();
    stream
        .write_all(&[0x81, 0x7e, 0x03, 0xe8, b'{', b'"', b'j'])
        .await
        .expect("written");
    drop(socket);
    assert!(instance.dialled_again_and_served().await);
    device.dismiss();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_gone_silent_is_pinged_then_let_go_and_dialled_again() {
    // A half-open TCP connection: the instance's machine vanished without a FIN, and this
    // test's socket is never read again, so not even a pong comes back.
    let Linked {
        mut instance,
        device,
        socket: _gone,
        ..
    } = linked_with(|device| device.silence(Duration::from_secs(1))).await;
    assert!(instance.dialled_again_and_served().await);
    device.dismiss();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_editor_sending_garbage_on_stdio_gets_findings_and_is_served_on() {
    use tokio::io::AsyncBufReadExt;
    let (editor, device_side) = tokio::io::duplex(1 << 20);
    let (device_read, device_write) = tokio::io::split(device_side);
    let (editor_read, mut to_device) = tokio::io::split(editor);
    let limits = harness::transport::FrameLimits {
        max_message_bytes: FRAME_LIMIT,
        ..Default::default()
    };
    let connection =
        harness::transport::stdio::from_streams(device_read, device_write, limits, "editor".into());
    let device = FakeDevice::builder("http://127.0.0.1:9")
        .stdio(connection)
        .start()
        .await
        .expect("the device serves stdio");
    let mut from_device = tokio::io::BufReader::new(editor_read).lines();
    let nested = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let mut garbage: Vec<Vec<u8>> = [
        "this is not JSON",
        "{\"jsonrpc\": \"2.0\", \"method\": ",
        &nested,
        r#"{"jsonrpc": 2, "id": 5, "method": "session/new", "params": {}}"#,
        r#"{"jsonrpc": "2.0", "id": {"an": "object"}, "method": "session/new"}"#,
        r#"{"jsonrpc": "2.0", "id": 7, "method": "session/new", "params": "a string"}"#,
        r#"{"jsonrpc": "2.0", "id": "never-asked", "result": {}}"#,
        "[]",
        "null",
    ]
    .iter()
    .map(|line| line.as_bytes().to_vec())
    .collect();
    // Not UTF-8.
    garbage.push(b"{\"jsonrpc\": \"2.0\", \"method\": \"\xff\xfe\"}".to_vec());
    for mut line in garbage {
        line.push(b'\n');
        to_device.write_all(&line).await.expect("written");
    }
    // Served on: initialize is answered, then a method it lacks is refused (before
    // initialize's answer any request is refused with -32600, as the ACP SDKs refuse it).
    let asks = [
        json!({"jsonrpc": "2.0", "id": 10, "method": "initialize", "params": {"protocolVersion": 1, "clientCapabilities": {}}}),
        json!({"jsonrpc": "2.0", "id": 9, "method": "_lembas/no_such_method"}),
    ];
    for ask in &asks {
        to_device
            .write_all(format!("{ask}\n").as_bytes())
            .await
            .expect("written");
    }
    let mut answers = std::collections::HashMap::new();
    timeout(DEADLINE, async {
        while answers.len() < 2 {
            let line = from_device
                .next_line()
                .await
                .expect("read")
                .expect("a line");
            let message: Value = serde_json::from_str(&line).expect("JSON from the device");
            if let Some(id @ (9 | 10)) = message["id"].as_i64()
                && message.get("method").is_none()
            {
                answers.insert(id, message);
            }
        }
    })
    .await
    .expect("both answered in time");
    assert_eq!(answers[&9]["error"]["code"], -32601, "{:?}", answers[&9]);
    assert!(answers[&10].get("result").is_some(), "{:?}", answers[&10]);
    // A line over the limit ends the connection (its end is the editor's, as on stdio).
    let mut long = vec![b'x'; 2 * FRAME_LIMIT];
    long.push(b'\n');
    let _ = to_device.write_all(&long).await;
    let ended = timeout(DEADLINE, async {
        while let Ok(Some(_)) = from_device.next_line().await {}
    })
    .await;
    assert!(
        ended.is_ok(),
        "the device's output ends after a line over the limit"
    );
    let report = device.verdict().await;
    let broken = report.broken_rules();
    for rule in [
        "jsonrpc.json",
        "jsonrpc.envelope",
        "jsonrpc.response.id",
        "jsonrpc.text",
    ] {
        assert!(broken.iter().any(|r| r == rule), "{rule} in {broken:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_before_initialize_is_answered_is_refused_as_the_acp_sdks_refuse_it() {
    let mut instance = HostileInstance::start().await;
    let root = tempfile::tempdir().expect("a root");
    let device = FakeDevice::builder(instance.url.clone())
        .root(root.path())
        .start()
        .await
        .expect("the device starts");
    let mut socket = timeout(DEADLINE, instance.links.recv())
        .await
        .expect("the device dials in time")
        .expect("a link");
    let hello = next_message(&mut socket).await;
    assert_eq!(hello["method"], "_lembas/hello", "{hello}");
    let cwd = root.path().to_string_lossy().into_owned();
    let early = json!({"jsonrpc": "2.0", "id": 1, "method": "session/new",
        "params": {"cwd": cwd, "mcpServers": []}});
    send(&mut socket, early.clone()).await;
    let refused = answer_to(&mut socket, &json!(1)).await;
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    send(
        &mut socket,
        json!({"jsonrpc": "2.0", "id": 2, "method": "initialize",
            "params": {"protocolVersion": 1, "clientCapabilities": {}}}),
    )
    .await;
    assert!(
        answer_to(&mut socket, &json!(2))
            .await
            .get("result")
            .is_some()
    );
    // Once initialized, the same request is served.
    let mut again = early;
    again["id"] = json!(3);
    send(&mut socket, again).await;
    let opened = answer_to(&mut socket, &json!(3)).await;
    assert!(opened["result"]["sessionId"].is_string(), "{opened}");
    drop(socket);
    device
        .verdict()
        .await
        .assert_failed_on("instance.initialize.first");
}
