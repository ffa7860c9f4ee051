//! Issue 16's hostile peers, measured: each double runs alone in a process of its own (this
//! binary again, `--role`), a raw peer in this process sends it what no peer should, and the
//! bench reads the double's resident memory: its peak (`VmHWM`) and what it holds after. It
//! also says whether the double still served. The suite in `*/tests/hostile.rs` proves the
//! behaviour; this bench gives the figures in docs/book/src/performance.md, and asserts none of
//! them.
//!
//! ```sh
//! cargo bench -p harness-cli --bench hostile
//! cargo bench -p harness-cli --bench hostile -- device     # only cases whose name has "device"
//! ```

// The bench reads close codes only.
#[allow(dead_code)]
#[path = "../../fake-instance/tests/common/raw_link.rs"]
mod raw_link;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream as StdTcpStream;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::timeout;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

/// mimalloc, as the commands have (why is in the workspace's Cargo.toml).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The longest any one step of a case may take.
const STEP: Duration = Duration::from_secs(60);
/// The token the instance role accepts.
const TOKEN: &str = "hostile-bench-token";
const MB: usize = 1_000_000;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(at) = args.iter().position(|a| a == "--role") {
        return role(&args[at + 1..]);
    }
    // `cargo bench -- FILTER` passes `--bench` first; the filter is the first other argument.
    let filter = args
        .iter()
        .skip(1)
        .find(|a| !a.starts_with("--"))
        .cloned()
        .unwrap_or_default();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    println!(
        "{:<44} {:>9} {:>9} {:>9} {:>9}  outcome",
        "case", "idle MB", "peak MB", "held MB", "after MB"
    );
    for case in CASES {
        if case.name.contains(&filter) {
            let reading = runtime.block_on(async {
                timeout(Duration::from_secs(300), (case.run)())
                    .await
                    .unwrap_or_else(|_| Reading::failed("the case took over 300 s"))
            });
            reading.print(case.name);
        }
    }
}

/// One hostile input and the double it is aimed at.
struct Case {
    name: &'static str,
    run: fn() -> std::pin::Pin<Box<dyn std::future::Future<Output = Reading>>>,
}

macro_rules! case {
    ($name:literal, $run:path) => {
        Case {
            name: $name,
            run: || Box::pin($run()),
        }
    };
}

const CASES: &[Case] = &[
    case!("instance: ten 30 MB frames", instance_big_frames),
    case!("instance: a 200 MB frame", instance_huge_frame),
    case!("instance: 200,000 messages at once", instance_burst),
    case!("instance: a device that reads nothing", instance_unread),
    case!(
        "instance: 256 silent TCP connections",
        instance_silent_connections
    ),
    case!(
        "instance: a hundred 2 MB chat requests",
        instance_chat_requests
    ),
    case!("instance: a 300 MB HTTP body", instance_huge_body),
    case!("device: ten 30 MB frames", device_big_frames),
    case!("device: a 200 MB frame", device_huge_frame),
    case!("device: 200,000 messages at once", device_burst),
    case!("device: a 300 MB discovery body", device_huge_discovery),
    case!(
        "device: yes in a terminal nobody reads",
        device_terminal_unread
    ),
    case!("device stdio: three 50 MB lines", stdio_big_lines),
    case!("device stdio: stdout never read", stdio_unread),
];

/// What a case measured, in kB (as /proc gives them).
struct Reading {
    /// Resident once up and linked, before the hostile input.
    idle: u64,
    /// The highest resident size the process reached.
    peak: u64,
    /// Resident right after the input, the link still up.
    held: u64,
    /// Resident once the hostile link closed and a second passed.
    after: u64,
    outcome: String,
}

impl Reading {
    fn failed(why: &str) -> Reading {
        Reading {
            idle: 0,
            peak: 0,
            held: 0,
            after: 0,
            outcome: format!("FAILED: {why}"),
        }
    }

    fn print(&self, name: &str) {
        let mb = |kib: u64| format!("{:.0}", kib as f64 * 1.024 / 1000.0);
        println!(
            "{:<44} {:>9} {:>9} {:>9} {:>9}  {}",
            name,
            mb(self.idle),
            mb(self.peak),
            mb(self.held),
            mb(self.after),
            self.outcome
        );
    }
}

// ---------------------------------------------------------------------------------------------
// The doubles' processes.

fn role(args: &[String]) {
    // As the commands do.
    harness::cli::return_freed_memory();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    match args {
        [role] if role == "instance" => runtime.block_on(instance_role()),
        [role, url] if role == "device" => runtime.block_on(device_role(url)),
        [role] if role == "stdio" => runtime.block_on(stdio_role()),
        _ => panic!("--role instance | device URL | stdio"),
    }
}

/// fake-instance with the bench's token; prints its address, serves until killed.
async fn instance_role() {
    let instance = fake_instance::FakeInstance::builder()
        .token(TOKEN)
        .patience(Duration::from_secs(600))
        .start()
        .await
        .expect("the instance runs");
    println!("ready {}", instance.addr());
    std::future::pending::<()>().await;
}

/// fake-device dialing `url`, remote terminals on; serves until killed.
async fn device_role(url: &str) {
    let root = tempfile::tempdir().expect("a root");
    let home = tempfile::tempdir().expect("a home");
    let _device = fake_device::FakeDevice::builder(url)
        .root(root.path())
        .remote_terminal(false, Some(home.path()))
        .patience(Duration::from_secs(600))
        .start()
        .await
        .expect("the device runs");
    println!("ready");
    std::future::pending::<()>().await;
}

/// `fake-device serve --stdio` on this process's stdin and stdout.
async fn stdio_role() {
    let connection = harness::transport::stdio::stdio(harness::transport::FrameLimits::default());
    let _ = fake_device::serve_stdio(
        fake_device::Options::for_instance(String::new()),
        connection,
        std::future::pending(),
    )
    .await;
}

/// A role's process, killed when dropped.
struct Double {
    child: Child,
    /// Its stdout, until a case takes it.
    out: Option<BufReader<ChildStdout>>,
}

impl Drop for Double {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Double {
    fn start(args: &[&str]) -> Double {
        let me = std::env::current_exe().expect("this binary");
        let mut child = Command::new(me)
            .arg("--role")
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("a role starts");
        let out = child.stdout.take().map(BufReader::new);
        Double { child, out }
    }

    /// Its `ready` line's words after `ready`.
    fn ready(&mut self) -> String {
        let mut line = String::new();
        if let Some(out) = self.out.as_mut() {
            out.read_line(&mut line).expect("the role's ready line");
        }
        line.trim()
            .strip_prefix("ready")
            .expect("`ready ...`")
            .trim()
            .to_string()
    }

    fn status(&self, key: &str) -> u64 {
        std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .unwrap_or_default()
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    }

    fn rss(&self) -> u64 {
        self.status("VmRSS:")
    }

    fn peak(&self) -> u64 {
        self.status("VmHWM:")
    }

    fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// The reading, `idle` as taken before the input; `after` a second from now.
    async fn reading(&mut self, idle: u64, held: u64, outcome: String) -> Reading {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let outcome = if self.alive() {
            outcome
        } else {
            format!("DIED ({outcome})")
        };
        Reading {
            idle,
            peak: self.peak(),
            held,
            after: self.rss(),
            outcome,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// A hostile device against fake-instance.

type Socket = tokio_tungstenite::WebSocketStream<TcpStream>;
type ClientSocket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<TcpStream>>;

/// A hello as a protocol-2 device says it.
const HELLO: &str = r#"{"jsonrpc":"2.0","method":"_lembas/hello","params":{"protocol":2,"version":"1.3.0","harness_spec":"1.1.0","device":{"host":"h","platform":"linux"},"limits":{"roots":[],"max_mode":"edit","require_trust":true}}}"#;

/// Starts fake-instance; gives it, its address and its idle size.
fn instance() -> (Double, String, u64) {
    let mut double = Double::start(&["instance"]);
    let addr = double.ready();
    std::thread::sleep(Duration::from_millis(300));
    let idle = double.rss();
    (double, addr, idle)
}

/// A device's link to the instance at `addr`, hello said; frames of any size may be sent.
async fn link(addr: &str) -> ClientSocket {
    let mut request = format!("ws://{addr}{}", harness::lembas::LINK_PATH)
        .into_client_request()
        .expect("a request");
    request.headers_mut().insert(
        "authorization",
        format!("Bearer {TOKEN}").parse().expect("a header"),
    );
    let config = WebSocketConfig::default()
        .max_message_size(None)
        .max_frame_size(None);
    let (mut socket, _) = timeout(
        STEP,
        tokio_tungstenite::connect_async_with_config(request, Some(config), true),
    )
    .await
    .expect("linked in time")
    .expect("linked");
    socket
        .send(Message::Text(HELLO.into()))
        .await
        .expect("hello");
    socket
}

/// A request for a method no client has, its params carrying `bytes` bytes.
fn big_request(id: u64, bytes: usize) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"x/big","params":{{"data":"{}"}}}}"#,
        "x".repeat(bytes)
    )
}

/// Ten requests of 30 MB each, each awaiting its answer; how many were answered.
async fn big_frames<S>(socket: &mut S) -> usize
where
    S: futures_util::Sink<Message>
        + futures_util::Stream<Item = Result<Message, tokio_tungstenite::tungstenite::Error>>
        + Unpin,
    S::Error: std::fmt::Debug,
{
    let mut answers = 0;
    for id in 1..=10 {
        socket
            .send(Message::Text(big_request(id, 30 * MB).into()))
            .await
            .expect("sent");
        answers += usize::from(answered(socket, &json!(id)).await);
    }
    answers
}

/// 200,000 notifications as fast as they go, then the request `last` (for a method nobody has)
/// whose answer says the burst was read through.
async fn burst<S>(sink: &mut S)
where
    S: futures_util::Sink<Message> + Unpin,
    S::Error: std::fmt::Debug,
{
    let burst = r#"{"jsonrpc":"2.0","method":"x/burst","params":{"n":1}}"#;
    for _ in 0..200_000 {
        sink.feed(Message::Text(burst.into())).await.expect("fed");
    }
    sink.send(Message::Text(
        r#"{"jsonrpc":"2.0","id":"last","method":"x/none"}"#.into(),
    ))
    .await
    .expect("sent");
}

/// Reads `socket` until the answer to `id` (true) or the link ends (false).
async fn answered<S>(socket: &mut S, id: &Value) -> bool
where
    S: futures_util::Stream<Item = Result<Message, tokio_tungstenite::tungstenite::Error>> + Unpin,
{
    timeout(STEP, async {
        while let Some(Ok(message)) = socket.next().await {
            if let Message::Text(text) = message
                && let Ok(value) = serde_json::from_str::<Value>(&text)
                && value.get("id") == Some(id)
                && value.get("method").is_none()
            {
                return true;
            }
        }
        false
    })
    .await
    .unwrap_or(false)
}

/// The close code the other end ends `socket` with.
async fn close_code<S>(socket: &mut S) -> Option<u16>
where
    S: futures_util::Stream<Item = Result<Message, tokio_tungstenite::tungstenite::Error>> + Unpin,
{
    raw_link::close_code(socket, STEP).await.unwrap_or(None)
}

/// Whether a second, well-behaved device is served meanwhile: its hello gets initialize.
async fn instance_serves(addr: &str) -> bool {
    let mut other = link(addr).await;
    let served = timeout(STEP, async {
        while let Some(Ok(message)) = other.next().await {
            if let Message::Text(text) = message
                && text.contains("\"initialize\"")
            {
                return true;
            }
        }
        false
    })
    .await
    .unwrap_or(false);
    let _ = other.close(None).await;
    served
}

fn served(yes: bool) -> &'static str {
    if yes {
        "another device served"
    } else {
        "ANOTHER DEVICE NOT SERVED"
    }
}

async fn instance_big_frames() -> Reading {
    let (mut double, addr, idle) = instance();
    let mut socket = link(&addr).await;
    let answers = big_frames(&mut socket).await;
    let held = double.rss();
    let other = instance_serves(&addr).await;
    let _ = socket.close(None).await;
    drop(socket);
    double
        .reading(
            idle,
            held,
            format!("{answers}/10 answered; {}", served(other)),
        )
        .await
}

async fn instance_huge_frame() -> Reading {
    let (mut double, addr, idle) = instance();
    let mut socket = link(&addr).await;
    // The instance may close while the frame is still going out.
    let _ = socket
        .send(Message::Text(big_request(1, 200 * MB).into()))
        .await;
    let code = close_code(&mut socket).await;
    let held = double.rss();
    let other = instance_serves(&addr).await;
    double
        .reading(idle, held, format!("closed {code:?}; {}", served(other)))
        .await
}

async fn instance_burst() -> Reading {
    let (mut double, addr, idle) = instance();
    let socket = link(&addr).await;
    let (mut sink, mut stream) = socket.split();
    let reader = tokio::spawn(async move {
        let last = answered(&mut stream, &json!("last")).await;
        (last, stream)
    });
    let started = Instant::now();
    burst(&mut sink).await;
    let (last, _stream) = reader.await.expect("the reader");
    let took = started.elapsed();
    let held = double.rss();
    let other = instance_serves(&addr).await;
    double
        .reading(
            idle,
            held,
            format!(
                "the request after them answered: {last}, {:.1} s; {}",
                took.as_secs_f64(),
                served(other)
            ),
        )
        .await
}

async fn instance_unread() -> Reading {
    let (mut double, addr, idle) = instance();
    let mut flood = link(&addr).await;
    let name = "m".repeat(100_000);
    let mut sent = 0;
    // Requests whose answers (method not found, naming it) are 100 kB each, none read; until
    // the instance stops reading them (3 s without one going out), at most 2,000.
    for id in 0..2000 {
        let request = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"{name}"}}"#);
        match timeout(
            Duration::from_secs(3),
            flood.send(Message::Text(request.into())),
        )
        .await
        {
            Ok(Ok(())) => sent += 1,
            _ => break,
        }
    }
    let held = double.rss();
    let other = instance_serves(&addr).await;
    drop(flood);
    double
        .reading(
            idle,
            held,
            format!(
                "held back after {sent} requests ({} MB of answers owed); {}",
                sent / 10,
                served(other)
            ),
        )
        .await
}

/// Plain HTTP/1.1 over a fresh connection: the status line's code, within `within`.
fn http(addr: &str, head: &str, body: &[u8], within: Duration) -> Option<u16> {
    let mut stream = StdTcpStream::connect(addr).ok()?;
    stream.set_read_timeout(Some(within)).ok()?;
    stream.set_write_timeout(Some(within)).ok()?;
    stream.write_all(head.as_bytes()).ok()?;
    // A server that refuses early may stop reading the body: what it says still counts.
    let _ = stream.write_all(body);
    let mut answer = [0u8; 64];
    let n = stream.read(&mut answer).ok()?;
    let text = String::from_utf8_lossy(&answer[..n]);
    text.split_whitespace().nth(1)?.parse().ok()
}

fn discovery_status(addr: &str) -> Option<u16> {
    let head = format!(
        "GET /.well-known/lembas.json HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n\r\n"
    );
    http(addr, &head, b"", Duration::from_secs(5))
}

async fn instance_silent_connections() -> Reading {
    let (mut double, addr, idle) = instance();
    let silent: Vec<StdTcpStream> = (0..256)
        .filter_map(|_| StdTcpStream::connect(&addr).ok())
        .collect();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let started = Instant::now();
    let status = discovery_status(&addr);
    let took = started.elapsed();
    let held = double.rss();
    // The connections are cut off by the instance's header deadline: how many it still holds.
    tokio::time::sleep(Duration::from_secs(11)).await;
    let mut cut = 0;
    for mut stream in silent {
        let _ = stream.set_read_timeout(Some(Duration::from_millis(100)));
        let mut buf = [0u8; 1];
        if matches!(stream.read(&mut buf), Ok(0) | Err(_)) {
            cut += 1;
        }
    }
    double
        .reading(
            idle,
            held,
            format!(
                "discovery {status:?} in {:.0} ms meanwhile; {cut}/256 cut off after 11 s",
                took.as_secs_f64() * 1000.0
            ),
        )
        .await
}

fn chat_request(addr: &str, content_bytes: usize) -> Option<u16> {
    let body = json!({
        "model": "fake/echo",
        "messages": [{ "role": "user", "content": "x".repeat(content_bytes) }],
    })
    .to_string();
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: {addr}\r\nauthorization: Bearer {TOKEN}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    http(addr, &head, body.as_bytes(), STEP)
}

async fn instance_chat_requests() -> Reading {
    let (mut double, addr, idle) = instance();
    let mut statuses = std::collections::BTreeMap::new();
    for _ in 0..100 {
        let status = chat_request(&addr, 2 * MB - 1000);
        *statuses.entry(format!("{status:?}")).or_insert(0) += 1;
    }
    let held = double.rss();
    double
        .reading(idle, held, format!("statuses {statuses:?}"))
        .await
}

async fn instance_huge_body() -> Reading {
    let (mut double, addr, idle) = instance();
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: {addr}\r\nauthorization: Bearer {TOKEN}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        300 * MB
    );
    let body = vec![b' '; 300 * MB];
    let status = tokio::task::spawn_blocking(move || http(&addr, &head, &body, STEP))
        .await
        .expect("the request");
    let held = double.rss();
    double
        .reading(idle, held, format!("answered {status:?}"))
        .await
}

// ---------------------------------------------------------------------------------------------
// A hostile instance against fake-device.

/// A raw instance: answers discovery with `discovery`, and hands over each link once the
/// device said hello and answered initialize.
struct RawInstance {
    url: String,
    links: tokio::sync::mpsc::UnboundedReceiver<Socket>,
}

impl RawInstance {
    async fn start(discovery: fn() -> Vec<u8>) -> RawInstance {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("a port");
        let url = format!("http://{}", listener.local_addr().expect("an address"));
        let (linked, links) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let linked = linked.clone();
                tokio::spawn(async move {
                    let mut peeked = [0u8; 64];
                    let Ok(n) = stream.peek(&mut peeked).await else {
                        return;
                    };
                    if peeked[..n].starts_with(b"GET /.well-known/") {
                        answer_discovery(stream, discovery()).await;
                    } else {
                        let config = WebSocketConfig::default()
                            .max_message_size(None)
                            .max_frame_size(None);
                        if let Ok(socket) =
                            tokio_tungstenite::accept_async_with_config(stream, Some(config)).await
                        {
                            let _ = linked.send(socket);
                        }
                    }
                });
            }
        });
        RawInstance { url, links }
    }

    async fn initialized_link(&mut self) -> Option<Socket> {
        let mut socket = timeout(STEP, self.links.recv()).await.ok()??;
        socket
            .send(Message::Text(
                json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                    "protocolVersion": 1,
                    "clientCapabilities": {"_meta": {"lembas": {"protocol": 2}}},
                }})
                .to_string()
                .into(),
            ))
            .await
            .ok()?;
        answered(&mut socket, &json!(0)).await.then_some(socket)
    }
}

fn small_discovery() -> Vec<u8> {
    json!({"protocol": 1, "protocols": [1, 2]})
        .to_string()
        .into_bytes()
}

async fn answer_discovery(mut stream: TcpStream, body: Vec<u8>) {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let response = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    let _ = stream.write_all(response.as_bytes()).await;
    let _ = stream.write_all(&body).await;
}

/// Starts fake-device against a raw instance serving `discovery`; gives the double, its
/// instance and its idle size.
async fn device(discovery: fn() -> Vec<u8>) -> (Double, RawInstance, u64) {
    let instance = RawInstance::start(discovery).await;
    let mut double = Double::start(&["device", &instance.url]);
    double.ready();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let idle = double.rss();
    (double, instance, idle)
}

/// Whether the device serves `socket`: a request for a method it lacks is answered.
async fn device_serves(socket: &mut Socket, id: u64) -> bool {
    let request = json!({"jsonrpc": "2.0", "id": id, "method": "x/none"}).to_string();
    socket.send(Message::Text(request.into())).await.is_ok() && answered(socket, &json!(id)).await
}

async fn device_big_frames() -> Reading {
    let (mut double, mut instance, idle) = device(small_discovery).await;
    let Some(mut socket) = instance.initialized_link().await else {
        return Reading::failed("no link");
    };
    let answers = big_frames(&mut socket).await;
    let held = double.rss();
    let serves = device_serves(&mut socket, 100).await;
    let _ = socket.close(None).await;
    drop(socket);
    double
        .reading(
            idle,
            held,
            format!("{answers}/10 answered; serves on: {serves}"),
        )
        .await
}

async fn device_huge_frame() -> Reading {
    let (mut double, mut instance, idle) = device(small_discovery).await;
    let Some(mut socket) = instance.initialized_link().await else {
        return Reading::failed("no link");
    };
    let _ = socket
        .send(Message::Text(big_request(1, 200 * MB).into()))
        .await;
    let code = close_code(&mut socket).await;
    let held = double.rss();
    let redialled = match instance.initialized_link().await {
        Some(mut again) => device_serves(&mut again, 1).await,
        None => false,
    };
    double
        .reading(
            idle,
            held,
            format!("closed {code:?}; dialled again and served: {redialled}"),
        )
        .await
}

async fn device_burst() -> Reading {
    let (mut double, mut instance, idle) = device(small_discovery).await;
    let Some(socket) = instance.initialized_link().await else {
        return Reading::failed("no link");
    };
    let (mut sink, mut stream) = socket.split();
    let reader = tokio::spawn(async move { answered(&mut stream, &json!("last")).await });
    let started = Instant::now();
    burst(&mut sink).await;
    let last = reader.await.expect("the reader");
    let took = started.elapsed();
    let held = double.rss();
    double
        .reading(
            idle,
            held,
            format!(
                "the request after them answered: {last}, {:.1} s",
                took.as_secs_f64()
            ),
        )
        .await
}

fn huge_discovery() -> Vec<u8> {
    let mut body = br#"{"protocol": 1, "pad": ""#.to_vec();
    body.resize(300 * MB, b'x');
    body.extend_from_slice(br#""}"#);
    body
}

async fn device_huge_discovery() -> Reading {
    let (mut double, mut instance, idle) = device(huge_discovery).await;
    // It refuses the body and tries again, as it would an instance that is down.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let linked = timeout(Duration::from_millis(100), instance.links.recv())
        .await
        .is_ok();
    let held = double.rss();
    double
        .reading(
            idle,
            held,
            format!("linked anyway: {linked} (it should not)"),
        )
        .await
}

async fn device_terminal_unread() -> Reading {
    let (mut double, mut instance, idle) = device(small_discovery).await;
    let Some(mut socket) = instance.initialized_link().await else {
        return Reading::failed("no link");
    };
    let open = json!({"jsonrpc": "2.0", "id": 1, "method": "_lembas/terminal/open", "params": {}});
    socket
        .send(Message::Text(open.to_string().into()))
        .await
        .expect("sent");
    let terminal = timeout(STEP, async {
        while let Some(Ok(Message::Text(text))) = socket.next().await {
            let value: Value = serde_json::from_str(&text).unwrap_or_default();
            if value["id"] == 1 {
                return value["result"]["terminalId"].as_str().map(String::from);
            }
        }
        None
    })
    .await
    .ok()
    .flatten();
    let Some(terminal) = terminal else {
        return Reading::failed("no terminal opened");
    };
    // "exec yes\n", base64.
    let keys = "ZXhlYyB5ZXMK";
    let input = json!({"jsonrpc": "2.0", "method": "_lembas/terminal/input",
        "params": {"terminalId": terminal, "data": keys}});
    socket
        .send(Message::Text(input.to_string().into()))
        .await
        .expect("sent");
    // Twenty seconds of `yes` with nothing read (less than the writer's 30 s stall limit, which
    // would end the link); the size each 5 s.
    let mut sizes = Vec::new();
    for _ in 0..4 {
        tokio::time::sleep(Duration::from_secs(5)).await;
        sizes.push(format!("{:.0}", double.rss() as f64 * 1.024 / 1000.0));
    }
    let held = double.rss();
    drop(socket);
    double
        .reading(
            idle,
            held,
            format!("MB at 5/10/15/20 s: {}", sizes.join(", ")),
        )
        .await
}

/// Starts `serve --stdio`; gives the double, its stdin and its idle size.
fn stdio() -> (Double, ChildStdin, u64) {
    let mut double = Double::start(&["stdio"]);
    let stdin = double.child.stdin.take().expect("piped");
    std::thread::sleep(Duration::from_millis(300));
    let idle = double.rss();
    (double, stdin, idle)
}

async fn stdio_big_lines() -> Reading {
    let (mut double, mut stdin, idle) = stdio();
    let Some(mut out) = double.out.take() else {
        return Reading::failed("no stdout");
    };
    let writer = std::thread::spawn(move || {
        for id in 1..=3 {
            let line = big_request(id, 50 * MB) + "\n";
            if stdin.write_all(line.as_bytes()).is_err() {
                return stdin;
            }
        }
        stdin
    });
    let answers = tokio::task::spawn_blocking(move || {
        let mut answers = 0;
        let mut line = String::new();
        while answers < 3 && out.read_line(&mut line).is_ok_and(|n| n > 0) {
            if line.contains("\"id\":") {
                answers += 1;
            }
            line.clear();
        }
        answers
    })
    .await
    .expect("the reader");
    let _stdin = writer.join().expect("the writer");
    let held = double.rss();
    double
        .reading(idle, held, format!("{answers}/3 answered"))
        .await
}

async fn stdio_unread() -> Reading {
    let (mut double, stdin, idle) = stdio();
    // Requests whose answers nobody reads, until the device stops taking them (writes stall 3 s).
    let (sent_tx, sent_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut stdin = stdin;
        for id in 0..1_000_000u64 {
            let line = format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"{}\"}}\n",
                "m".repeat(10_000)
            );
            if stdin.write_all(line.as_bytes()).is_err() {
                return;
            }
            let _ = sent_tx.send(id + 1);
        }
    });
    let mut sent = 0;
    while let Ok(n) = sent_rx.recv_timeout(Duration::from_secs(3)) {
        sent = n;
    }
    let held = double.rss();
    double
        .reading(
            idle,
            held,
            format!(
                "held back after {sent} requests ({} MB of answers owed)",
                sent / 100
            ),
        )
        .await
}
