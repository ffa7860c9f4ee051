//! Issue 16's round trip: one JSON-RPC request answered by a double's default behaviour over
//! loopback, against a raw tokio-tungstenite echo of the same request, all in one process on one
//! tokio runtime. Criterion gives the medians; with `--bench` (what `cargo bench` passes) a
//! second pass times 20,000 single round trips of each and prints the median and p99, which
//! criterion does not report. The numbers go to docs/book/src/performance.md; nothing here
//! asserts them.
//!
//! ```sh
//! cargo bench -p harness-cli --bench round_trip
//! ```

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::Criterion;
use fake_device::FakeDevice;
use fake_instance::FakeInstance;
use futures_util::{SinkExt, StreamExt};
use harness::lembas::{DISCOVERY_PATH, LINK_PATH};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Mutex;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

/// Round trips timed one by one in the percentile pass, per variant.
const SAMPLES: usize = 20_000;
/// Round trips before those, so connections, caches and the allocator are warm.
const WARM_UP: usize = 2_000;
/// Criterion's time per bench: the whole run stays under two minutes on the 2-core machine.
const MEASURE: Duration = Duration::from_secs(3);
/// How long any setup step may take before the bench gives up.
const SETUP: Duration = Duration::from_secs(10);

/// The session the device-playing client announces, so the instance's cards name a known one.
const SESSION: &str = "ses_bench";

/// One side of a link, and the request it times: `send` a request with a fresh id and wait for
/// the frame that answers it. Every variant parses each frame it receives the same way, so the
/// client's own cost is the same in all three and the difference is the server's.
struct Link<S> {
    socket: WebSocketStream<S>,
    /// The request, with `{id}` where its id goes.
    request: fn(u64) -> String,
    /// The echo sends the request itself back: any frame with its id answers it.
    echo: bool,
    next_id: u64,
}

impl<S> Link<S>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    async fn round_trip(&mut self) {
        self.next_id += 1;
        let id = self.next_id;
        let text = (self.request)(id);
        self.socket
            .send(Message::Text(text.into()))
            .await
            .expect("the request goes out");
        loop {
            let frame = self
                .socket
                .next()
                .await
                .expect("the link stays up")
                .expect("a frame");
            let Message::Text(text) = frame else { continue };
            let message: Value = serde_json::from_str(&text).expect("JSON");
            if message.get("id").and_then(Value::as_u64) != Some(id) {
                // A notification, or a request of the peer's that no default waits on.
                continue;
            }
            if self.echo {
                return;
            }
            assert!(
                message.get("result").is_some(),
                "the double answers with a result: {message}"
            );
            return;
        }
    }
}

/// The three variants, each a linked socket ready to time.
enum Variant {
    Echo(Link<tokio_tungstenite::MaybeTlsStream<TcpStream>>),
    Instance(Link<tokio_tungstenite::MaybeTlsStream<TcpStream>>),
    Device(Link<TcpStream>),
}

impl Variant {
    async fn round_trip(&mut self) {
        match self {
            Variant::Echo(link) | Variant::Instance(link) => link.round_trip().await,
            Variant::Device(link) => link.round_trip().await,
        }
    }
}

/// A card the device asks the instance to answer: the instance allows it once by default.
/// The echo is sent the same text, so both frames are the same size.
fn permission_request(id: u64) -> String {
    json!({
        "jsonrpc": "2.0",
        "id": id,
        "method": "session/request_permission",
        "params": {
            "sessionId": SESSION,
            "toolCall": {
                "toolCallId": format!("call_{id}"),
                "title": "ls",
                "kind": "execute",
                "status": "pending",
                "rawInput": { "command": "ls" },
            },
            "options": [
                { "optionId": "once", "name": "Allow once", "kind": "allow_once" },
                { "optionId": "session", "name": "Allow always", "kind": "allow_always" },
                { "optionId": "deny", "name": "Deny", "kind": "reject_once" },
            ],
            "_meta": { "lembas": { "reason": "runs a command" } },
        },
    })
    .to_string()
}

/// What the instance-playing server asks the device: the status of the session it opened,
/// answered from memory.
fn status_request(id: u64) -> String {
    json!({
        "jsonrpc": "2.0",
        "id": id,
        "method": "_lembas/session/status",
        "params": { "sessionId": device_session() },
    })
    .to_string()
}

/// The session the device opened in setup (its id is the device's to choose).
fn device_session() -> &'static str {
    DEVICE_SESSION.get().expect("the device's session is open")
}

static DEVICE_SESSION: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Reads frames until the one `until` accepts, as JSON.
async fn read_until<S>(socket: &mut WebSocketStream<S>, until: impl Fn(&Value) -> bool) -> Value
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    tokio::time::timeout(SETUP, async {
        loop {
            let frame = socket
                .next()
                .await
                .expect("the link stays up")
                .expect("a frame");
            if let Message::Text(text) = frame {
                let message: Value = serde_json::from_str(&text).expect("JSON");
                if until(&message) {
                    return message;
                }
            }
        }
    })
    .await
    .expect("in time during setup")
}

async fn send<S>(socket: &mut WebSocketStream<S>, message: Value)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    socket
        .send(Message::Text(message.to_string().into()))
        .await
        .expect("sent");
}

/// The baseline: an echo server (each text frame sent back as it came) and a client linked to it.
async fn echo() -> Variant {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("a port");
    let addr = listener.local_addr().expect("an address");
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let Ok(mut socket) = tokio_tungstenite::accept_async(stream).await else {
                    return;
                };
                while let Some(Ok(message)) = socket.next().await {
                    if message.is_text() && socket.send(message).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    let (socket, _) = tokio_tungstenite::connect_async(format!("ws://{addr}"))
        .await
        .expect("linked to the echo");
    Variant::Echo(Link {
        socket,
        request: permission_request,
        echo: true,
        next_id: 0,
    })
}

/// fake-instance with its defaults, and a raw client playing a device on it: linked with the
/// token, hello said, initialize answered, a terminal's session announced.
async fn instance() -> (FakeInstance, Variant) {
    let instance = FakeInstance::builder()
        .protocol(2)
        .start()
        .await
        .expect("fake-instance starts");
    let mut request = instance.ws_url().into_client_request().expect("a request");
    request.headers_mut().insert(
        "authorization",
        format!("Bearer {}", instance.token())
            .parse()
            .expect("a header"),
    );
    let (mut socket, _) = tokio_tungstenite::connect_async(request)
        .await
        .expect("linked to fake-instance");
    send(
        &mut socket,
        json!({
            "jsonrpc": "2.0",
            "method": "_lembas/hello",
            "params": {
                "protocol": 2,
                "version": "1.3.0",
                "harness_spec": "1.1.0",
                "device": { "host": "bench", "platform": "linux" },
                "limits": { "roots": [], "max_mode": "edit", "require_trust": true },
            },
        }),
    )
    .await;
    let initialize = read_until(&mut socket, |m| m["method"] == "initialize").await;
    send(
        &mut socket,
        json!({
            "jsonrpc": "2.0",
            "id": initialize["id"],
            "result": {
                "protocolVersion": 1,
                "agentCapabilities": {
                    "loadSession": false,
                    "promptCapabilities": { "image": true, "audio": false, "embeddedContext": true },
                    "mcpCapabilities": { "http": false, "sse": false },
                },
                "authMethods": [],
                "agentInfo": { "name": "LLeMbas CLI", "version": "1.3.0" },
                "_meta": { "lembas": {
                    "protocol": 2,
                    "harness_spec": "1.1.0",
                    "limits": { "roots": [], "max_mode": "edit" },
                    "connection": null,
                    // Every capability of spec 1.1.0, as a device that has them all says.
                    "capabilities": harness::lembas::Spec::V1_1_0.capabilities(),
                } },
            },
        }),
    )
    .await;
    send(
        &mut socket,
        json!({
            "jsonrpc": "2.0",
            "method": "_lembas/session/announce",
            "params": {
                "sessionId": SESSION,
                "cwd": "/tmp",
                "title": "bench",
                "model": "example/model",
                "instance": false,
                "mode": "edit",
                "effort": "off",
                "busy": false,
                "origin": "terminal",
            },
        }),
    )
    .await;
    instance
        .wait_for_device(SETUP)
        .await
        .expect("the instance sees the device");
    (
        instance,
        Variant::Instance(Link {
            socket,
            request: permission_request,
            echo: false,
            next_id: 0,
        }),
    )
}

/// fake-device with its defaults and one root, dialling a raw server that plays the instance:
/// discovery answered, the link accepted, initialize sent and a session opened in the root.
async fn device(root: &std::path::Path) -> (FakeDevice, Variant) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("a port");
    let addr = listener.local_addr().expect("an address");
    let (linked, link) = tokio::sync::oneshot::channel();
    tokio::spawn(serve_as_instance(listener, linked));
    let device = FakeDevice::builder(format!("http://{addr}"))
        .root(root)
        .start()
        .await
        .expect("fake-device starts");
    let mut socket = tokio::time::timeout(SETUP, link)
        .await
        .expect("the device links in time")
        .expect("a link");
    read_until(&mut socket, |m| m["method"] == "_lembas/hello").await;
    send(
        &mut socket,
        json!({
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": 1,
                "clientCapabilities": { "_meta": { "lembas": { "protocol": 2 } } },
            },
        }),
    )
    .await;
    read_until(&mut socket, |m| m["id"] == 1).await;
    send(
        &mut socket,
        json!({
            "jsonrpc": "2.0",
            "id": 2,
            "method": "session/new",
            "params": { "cwd": root.display().to_string(), "mcpServers": [] },
        }),
    )
    .await;
    let opened = read_until(&mut socket, |m| m["id"] == 2).await;
    let session = opened["result"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("session/new answered with a session: {opened}"));
    DEVICE_SESSION.get_or_init(|| session.to_string());
    (
        device,
        Variant::Device(Link {
            socket,
            request: status_request,
            echo: false,
            // Past the ids setup used.
            next_id: 100,
        }),
    )
}

/// The instance's two doors on one port: discovery over plain HTTP (protocol 2 listed), and the
/// link, whose socket goes to `linked`. Anything else gets a 404.
async fn serve_as_instance(
    listener: TcpListener,
    linked: tokio::sync::oneshot::Sender<WebSocketStream<TcpStream>>,
) {
    let mut linked = Some(linked);
    while let Ok((mut stream, _)) = listener.accept().await {
        let target = request_target(&stream).await;
        if target.as_deref() == Some(LINK_PATH) {
            let socket = tokio_tungstenite::accept_async(stream)
                .await
                .expect("the device's handshake");
            if let Some(linked) = linked.take() {
                let _ = linked.send(socket);
            }
            continue;
        }
        let body = if target.as_deref() == Some(DISCOVERY_PATH) {
            Some(json!({ "protocol": 1, "protocols": [1, 2] }).to_string())
        } else {
            None
        };
        tokio::spawn(async move {
            // The request was only peeked at: read its head before answering.
            let mut head = Vec::new();
            let mut buf = [0u8; 1024];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                match stream.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => head.extend_from_slice(&buf[..n]),
                }
            }
            let response = match body {
                Some(body) => format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                ),
                None => "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                    .to_string(),
            };
            let _ = stream.write_all(response.as_bytes()).await;
            let _ = stream.shutdown().await;
        });
    }
}

/// The path of the HTTP request waiting on `stream`, peeked at so a WebSocket handshake can
/// still read the whole request.
async fn request_target(stream: &TcpStream) -> Option<String> {
    let mut buf = [0u8; 2048];
    for _ in 0..100 {
        let n = stream.peek(&mut buf).await.ok()?;
        if n == 0 {
            return None;
        }
        let text = String::from_utf8_lossy(&buf[..n]);
        if let Some(line) = text.split("\r\n").next().filter(|_| text.contains("\r\n")) {
            return line.split(' ').nth(1).map(String::from);
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    None
}

/// The median and the 99th percentile of `SAMPLES` round trips timed one by one.
async fn percentiles(variant: &mut Variant) -> (Duration, Duration) {
    for _ in 0..WARM_UP {
        variant.round_trip().await;
    }
    let mut times = Vec::with_capacity(SAMPLES);
    for _ in 0..SAMPLES {
        let start = Instant::now();
        variant.round_trip().await;
        times.push(start.elapsed());
    }
    times.sort_unstable();
    (times[SAMPLES / 2], times[SAMPLES * 99 / 100])
}

fn micros(d: Duration) -> String {
    format!("{:.1} µs", d.as_secs_f64() * 1e6)
}

fn main() {
    // Two workers, as many as the machine has cores; the timing client runs on the main thread
    // in `block_on`, the servers (echo, doubles) on the workers.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let root = tempfile::tempdir().expect("a root for the device");
    let (instance, device, variants) = runtime.block_on(async {
        let echo = echo().await;
        let (instance, linked_instance) = instance().await;
        let (device, linked_device) = device(root.path()).await;
        (
            instance,
            device,
            [
                ("raw tokio-tungstenite echo", Arc::new(Mutex::new(echo))),
                ("fake-instance", Arc::new(Mutex::new(linked_instance))),
                ("fake-device", Arc::new(Mutex::new(linked_device))),
            ],
        )
    });

    let mut criterion = Criterion::default()
        .sample_size(100)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(MEASURE)
        .configure_from_args();
    let mut group = criterion.benchmark_group("round_trip");
    for (name, variant) in &variants {
        group.bench_function(*name, |b| {
            b.to_async(&runtime).iter_custom(|iters| {
                let variant = variant.clone();
                async move {
                    let mut variant = variant.lock().await;
                    let start = Instant::now();
                    for _ in 0..iters {
                        variant.round_trip().await;
                    }
                    start.elapsed()
                }
            });
        });
    }
    group.finish();

    // `cargo bench` passes `--bench`; `cargo test --benches` does not, and only checks that the
    // criterion pass runs.
    if std::env::args().any(|a| a == "--bench") {
        println!("\nround trips timed one by one ({SAMPLES} each, after {WARM_UP} to warm up):");
        let mut baseline = None;
        for (name, variant) in &variants {
            let (median, p99) =
                runtime.block_on(async { percentiles(&mut *variant.lock().await).await });
            let (base_median, base_p99) = *baseline.get_or_insert((median, p99));
            println!(
                "  {name:<28} median {:>9}  p99 {:>9}  ({:.2}x, {:.2}x the echo)",
                micros(median),
                micros(p99),
                median.as_secs_f64() / base_median.as_secs_f64(),
                p99.as_secs_f64() / base_p99.as_secs_f64(),
            );
        }
    }

    // What each double found wrong with its raw peer: the traffic timed should be clean.
    runtime.block_on(async {
        for (name, report) in [
            ("fake-instance", instance.verdict().await),
            ("fake-device", device.verdict().await),
        ] {
            let broken = report.broken_rules();
            if !broken.is_empty() {
                eprintln!("{name} found its raw peer breaking {broken:?}");
            }
        }
    });
    criterion.final_summary();
}
