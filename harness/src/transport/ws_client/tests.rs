//! Server and client together, over real loopback sockets.

use std::net::SocketAddr;
use std::time::Duration;

use crate::transport::ws_server::LinkUpgrade;
use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures_util::SinkExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::{Instant, timeout};
use tokio_tungstenite::tungstenite::Message;

use super::*;
use crate::transport::{CloseInfo, Connection, FrameLimits, Incoming, Outgoing, ws_server};

/// Far above what any of these steps takes; only a bug reaches it.
const STEP: Duration = Duration::from_secs(3);
const TOKEN: &str = "s3cret";

/// A running axum server whose accepted connections come out of `connections`.
struct Server {
    addr: SocketAddr,
    connections: mpsc::UnboundedReceiver<Connection>,
    task: JoinHandle<()>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[derive(Clone)]
struct AppState {
    limits: FrameLimits,
    connections: mpsc::UnboundedSender<Connection>,
}

async fn ws_handler(
    State(state): State<AppState>,
    headers: HeaderMap,
    upgrade: LinkUpgrade,
) -> Response {
    let expected = format!("Bearer {TOKEN}");
    let authorized = headers
        .get(http::header::AUTHORIZATION)
        .is_some_and(|value| value.as_bytes() == expected.as_bytes());
    if !authorized {
        return (StatusCode::UNAUTHORIZED, "bad token").into_response();
    }
    let connections = state.connections.clone();
    ws_server::accept(upgrade, state.limits, "test-client".into(), move |conn| {
        let _ = connections.send(conn);
    })
}

async fn start_server(limits: FrameLimits) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("local addr");
    let (tx, connections) = mpsc::unbounded_channel();
    let app = Router::new()
        .route("/ws", get(ws_handler))
        .with_state(AppState {
            limits,
            connections: tx,
        });
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Server {
        addr,
        connections,
        task,
    }
}

fn request(addr: SocketAddr, token: Option<&str>) -> ClientRequest {
    ClientRequest {
        url: format!("ws://{addr}/ws"),
        bearer_token: token.map(str::to_owned),
        headers: vec![("x-test".into(), "1".into())],
        timeout: STEP,
    }
}

/// A connected (server side, client side) pair.
async fn pair(
    server_limits: FrameLimits,
    client_limits: FrameLimits,
) -> (Server, Connection, Connection) {
    let mut server = start_server(server_limits).await;
    let client = connect(request(server.addr, Some(TOKEN)), client_limits)
        .await
        .expect("connect");
    let accepted = accepted(&mut server).await;
    (server, accepted, client)
}

/// The server side of the connection `server` accepts next.
async fn accepted(server: &mut Server) -> Connection {
    timeout(STEP, server.connections.recv())
        .await
        .expect("server side in time")
        .expect("server side connection")
}

/// The upgrade request a raw tungstenite client sends: the test's token and nothing else, for
/// the frames the Connection API never sends.
fn raw_upgrade(addr: SocketAddr) -> tokio_tungstenite::tungstenite::handshake::client::Request {
    let mut upgrade = format!("ws://{addr}/ws").into_client_request().unwrap();
    upgrade.headers_mut().insert(
        http::header::AUTHORIZATION,
        format!("Bearer {TOKEN}").parse().unwrap(),
    );
    upgrade
}

/// A raw tungstenite client connected to `server`, and the server side of its connection.
async fn raw_pair(
    server: &mut Server,
) -> (
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<TcpStream>>,
    Connection,
) {
    let (raw, _) = tokio_tungstenite::connect_async(raw_upgrade(server.addr))
        .await
        .expect("raw connect");
    (raw, accepted(server).await)
}

/// The close both sides of these tests send: an application code and its reason.
fn mismatch() -> CloseInfo {
    CloseInfo {
        code: 4400,
        reason: "mismatch".into(),
    }
}

async fn next(conn: &mut Connection) -> Option<Incoming> {
    next_within(conn, STEP).await
}

/// Asserts that the next thing `conn` hears is the text `words`.
async fn hears(conn: &mut Connection, words: &str) {
    assert_eq!(next(conn).await, Some(Incoming::Text(words.into())));
}

fn text(s: &str) -> Outgoing {
    Outgoing::Text(s.to_owned())
}

#[tokio::test]
async fn text_flows_both_ways() {
    let (_server, mut server_side, mut client) =
        pair(FrameLimits::default(), FrameLimits::default()).await;
    assert_eq!(server_side.peer, "test-client");
    assert!(client.peer.starts_with("127.0.0.1:"), "{}", client.peer);

    client
        .outgoing
        .send(text(r#"{"jsonrpc":"2.0","id":1}"#))
        .unwrap();
    client.outgoing.send(text("second")).unwrap();
    hears(&mut server_side, r#"{"jsonrpc":"2.0","id":1}"#).await;
    hears(&mut server_side, "second").await;

    server_side.outgoing.send(text("reply")).unwrap();
    hears(&mut client, "reply").await;
}

#[tokio::test]
async fn client_close_reaches_server_with_code_and_reason() {
    let (_server, mut server_side, mut client) =
        pair(FrameLimits::default(), FrameLimits::default()).await;
    let info = mismatch();
    client.outgoing.send(Outgoing::Close(info.clone())).unwrap();

    assert_eq!(
        next(&mut server_side).await,
        Some(Incoming::Closed(Some(info.clone())))
    );
    assert_eq!(next(&mut server_side).await, None);
    // The client sees the server's echo, promptly (not after the closing deadline).
    let started = Instant::now();
    assert_eq!(next(&mut client).await, Some(Incoming::Closed(Some(info))));
    assert_eq!(next(&mut client).await, None);
    assert!(started.elapsed() < Duration::from_secs(1));
}

#[tokio::test]
async fn server_close_reaches_client_with_code_and_reason() {
    let (_server, mut server_side, mut client) =
        pair(FrameLimits::default(), FrameLimits::default()).await;
    let info = mismatch();
    server_side.outgoing.send(text("last words")).unwrap();
    server_side
        .outgoing
        .send(Outgoing::Close(info.clone()))
        .unwrap();

    hears(&mut client, "last words").await;
    assert_eq!(
        next(&mut client).await,
        Some(Incoming::Closed(Some(info.clone())))
    );
    assert_eq!(next(&mut client).await, None);
    let started = Instant::now();
    assert_eq!(
        next(&mut server_side).await,
        Some(Incoming::Closed(Some(info)))
    );
    assert_eq!(next(&mut server_side).await, None);
    assert!(started.elapsed() < Duration::from_secs(1));
    // The writer has stopped, so sending now fails instead of vanishing silently.
    assert!(server_side.outgoing.send(text("too late")).is_err());
}

/// `drop` ends the link as a crash does: the other side sees it end without a close frame,
/// at once (no close handshake waited for), and the text sent before it still arrives.
#[tokio::test]
async fn a_dropped_link_ends_at_once_without_a_close_frame() {
    for dropping_side_is_server in [true, false] {
        let (_server, mut server_side, mut client) =
            pair(FrameLimits::default(), FrameLimits::default()).await;
        let (dropping, other) = match dropping_side_is_server {
            true => (&mut server_side, &mut client),
            false => (&mut client, &mut server_side),
        };
        dropping.outgoing.send(text("last words")).unwrap();
        dropping.outgoing.send(Outgoing::Drop).unwrap();
        let started = Instant::now();
        hears(other, "last words").await;
        assert_eq!(next(other).await, Some(Incoming::Closed(None)));
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(next(dropping).await, Some(Incoming::Closed(None)));
    }
}

/// `stall` holds what is sent after it for its time, then sends it in order.
#[tokio::test]
async fn a_stalled_link_sends_nothing_for_its_time_then_all_in_order() {
    let (_server, mut server_side, mut client) =
        pair(FrameLimits::default(), FrameLimits::default()).await;
    server_side.outgoing.send(text("before")).unwrap();
    server_side
        .outgoing
        .send(Outgoing::Stall(Duration::from_millis(300)))
        .unwrap();
    server_side.outgoing.send(text("after")).unwrap();
    hears(&mut client, "before").await;
    let started = Instant::now();
    // It still reads while stalled.
    client.outgoing.send(text("heard")).unwrap();
    hears(&mut server_side, "heard").await;
    assert!(
        started.elapsed() < Duration::from_millis(250),
        "{:?}",
        started.elapsed()
    );
    hears(&mut client, "after").await;
    assert!(
        started.elapsed() >= Duration::from_millis(250),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn dropping_outgoing_closes_normally() {
    let (_server, mut server_side, client) =
        pair(FrameLimits::default(), FrameLimits::default()).await;
    let Connection {
        outgoing,
        mut incoming,
        ..
    } = client;
    drop(outgoing);
    assert_eq!(
        next(&mut server_side).await,
        Some(Incoming::Closed(Some(CloseInfo {
            code: 1000,
            reason: String::new()
        })))
    );
    let echo = timeout(STEP, incoming.recv())
        .await
        .expect("client close in time");
    assert!(
        matches!(
            echo,
            Some(Incoming::Closed(Some(CloseInfo { code: 1000, .. })))
        ),
        "{echo:?}"
    );
    assert_eq!(
        timeout(STEP, incoming.recv()).await.expect("end in time"),
        None
    );
}

#[tokio::test]
async fn binary_frame_arrives_as_binary() {
    // The Connection API only sends text, so a raw tungstenite client sends the binary frame.
    let mut server = start_server(FrameLimits::default()).await;
    let (mut raw, mut accepted) = raw_pair(&mut server).await;
    raw.send(Message::Binary(vec![0xff, 0x00, 0x7f].into()))
        .await
        .unwrap();
    assert_eq!(
        next(&mut accepted).await,
        Some(Incoming::Binary(vec![0xff, 0x00, 0x7f]))
    );
    // Pings are answered by the library and never surface.
    raw.send(Message::Ping(b"p".to_vec().into())).await.unwrap();
    raw.send(Message::Text("after ping".into())).await.unwrap();
    hears(&mut accepted, "after ping").await;
}

#[tokio::test]
async fn a_text_frame_that_is_not_utf8_is_said_and_closed_with_1007() {
    let mut server = start_server(FrameLimits::default()).await;
    let (mut raw, mut accepted) = raw_pair(&mut server).await;
    // A text frame's payload must be UTF-8; tungstenite only sends such a frame raw.
    let frame = tungstenite::protocol::frame::Frame::message(
        vec![b'{', 0xff, 0xfe, b'}'],
        tungstenite::protocol::frame::coding::OpCode::Data(
            tungstenite::protocol::frame::coding::Data::Text,
        ),
        true,
    );
    raw.send(Message::Frame(frame)).await.unwrap();
    assert!(
        matches!(next(&mut accepted).await, Some(Incoming::NotUtf8(_))),
        "the local side is told"
    );
    assert_eq!(next(&mut accepted).await, Some(Incoming::Closed(None)));
    let close = timeout(STEP, async {
        loop {
            match futures_util::StreamExt::next(&mut raw).await {
                Some(Ok(Message::Close(frame))) => break frame.map(|f| u16::from(f.code)),
                Some(Ok(_)) => continue,
                _ => break None,
            }
        }
    })
    .await
    .expect("a close in time");
    assert_eq!(close, Some(1007));
}

#[tokio::test]
async fn client_vanishing_gives_server_closed_none() {
    let mut server = start_server(FrameLimits::default()).await;
    let (raw, mut accepted) = raw_pair(&mut server).await;
    // Dropping the stream closes TCP without a close frame.
    drop(raw);
    assert_eq!(next(&mut accepted).await, Some(Incoming::Closed(None)));
    assert_eq!(next(&mut accepted).await, None);
}

#[tokio::test]
async fn server_vanishing_gives_client_closed_none() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let raw_server = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        let ws = tokio_tungstenite::accept_async(tcp).await.unwrap();
        drop(ws); // No close frame: the peer just goes away.
    });
    let mut client = connect(request(addr, None), FrameLimits::default())
        .await
        .expect("connect");
    raw_server.await.unwrap();
    assert_eq!(next(&mut client).await, Some(Incoming::Closed(None)));
    assert_eq!(next(&mut client).await, None);
    // The writer followed the reader out.
    let started = Instant::now();
    while client.outgoing.send(text("anyone?")).is_ok() {
        assert!(started.elapsed() < STEP, "writer task did not stop");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn message_over_server_limit_ends_connection() {
    let small = FrameLimits {
        max_message_bytes: 1024,
        ..FrameLimits::default()
    };
    let (_server, mut server_side, mut client) = pair(small, FrameLimits::default()).await;
    client.outgoing.send(text(&"x".repeat(4096))).unwrap();
    assert_eq!(next(&mut server_side).await, Some(Incoming::Closed(None)));
    assert_eq!(next(&mut server_side).await, None);
    // The server tells the client why (1009) before dropping the socket.
    let seen = next(&mut client).await;
    assert!(
        matches!(
            seen,
            Some(Incoming::Closed(Some(CloseInfo { code: 1009, .. })))
        ),
        "{seen:?}"
    );
    assert_eq!(next(&mut client).await, None);
}

#[tokio::test]
async fn message_over_client_limit_ends_connection() {
    let small = FrameLimits {
        max_message_bytes: 1024,
        ..FrameLimits::default()
    };
    let (_server, mut server_side, mut client) = pair(FrameLimits::default(), small).await;
    server_side.outgoing.send(text("fits")).unwrap();
    server_side.outgoing.send(text(&"y".repeat(2048))).unwrap();
    hears(&mut client, "fits").await;
    assert_eq!(next(&mut client).await, Some(Incoming::Closed(None)));
    assert_eq!(next(&mut client).await, None);
    assert!(matches!(
        next(&mut server_side).await,
        Some(Incoming::Closed(_))
    ));
}

#[tokio::test]
async fn wrong_token_is_refused_with_401() {
    let server = start_server(FrameLimits::default()).await;
    let error = connect(request(server.addr, Some("wrong")), FrameLimits::default())
        .await
        .expect_err("must be refused");
    match &error {
        ConnectError::Refused { status, .. } => assert_eq!(*status, 401),
        other => panic!("expected Refused, got {other:?}"),
    }
    assert!(error.to_string().contains("401"), "{error}");

    let error = connect(request(server.addr, None), FrameLimits::default())
        .await
        .expect_err("no token, refused");
    assert!(
        matches!(error, ConnectError::Refused { status: 401, .. }),
        "{error:?}"
    );
}

#[tokio::test]
async fn closed_port_is_an_io_error() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let error = connect(request(addr, Some(TOKEN)), FrameLimits::default())
        .await
        .expect_err("nothing listens");
    assert!(matches!(error, ConnectError::Io(_)), "{error:?}");
    assert!(
        error.to_string().starts_with("could not reach the server"),
        "{error}"
    );
}

#[tokio::test]
async fn silent_server_times_out() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    // Accepts TCP and then says nothing: the HTTP upgrade never gets an answer.
    let silent = tokio::spawn(async move {
        let mut held: Vec<TcpStream> = Vec::new();
        while let Ok((tcp, _)) = listener.accept().await {
            held.push(tcp);
        }
    });
    let mut req = request(addr, Some(TOKEN));
    req.timeout = Duration::from_millis(200);
    let started = Instant::now();
    let error = connect(req, FrameLimits::default())
        .await
        .expect_err("must time out");
    let elapsed = started.elapsed();
    silent.abort();
    assert_eq!(error, ConnectError::Timeout);
    assert!(
        elapsed >= Duration::from_millis(200) && elapsed < Duration::from_secs(1),
        "{elapsed:?}"
    );
}

#[tokio::test]
async fn bad_urls_and_headers_are_url_errors() {
    let mut req = request("127.0.0.1:1".parse().unwrap(), None);
    req.url = "http://127.0.0.1:1/ws".into();
    let error = connect(req.clone(), FrameLimits::default())
        .await
        .expect_err("wrong scheme");
    assert!(matches!(error, ConnectError::Url(_)), "{error:?}");

    req.url = "not a url".into();
    let error = connect(req.clone(), FrameLimits::default())
        .await
        .expect_err("garbage");
    assert!(matches!(error, ConnectError::Url(_)), "{error:?}");

    req.url = "ws://127.0.0.1:1/ws".into();
    req.headers = vec![("bad header".into(), "v".into())];
    let error = connect(req, FrameLimits::default())
        .await
        .expect_err("bad header");
    assert!(matches!(error, ConnectError::Url(_)), "{error:?}");
}

#[tokio::test]
async fn wss_to_a_plain_server_is_a_tls_error_not_a_panic() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    // Answers the TLS ClientHello with plain HTTP, as a ws:// server would.
    let plain = tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        if let Ok((mut tcp, _)) = listener.accept().await {
            let mut buf = [0u8; 1024];
            let _ = tcp.read(&mut buf).await;
            let _ = tcp
                .write_all(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n")
                .await;
            let _ = tcp.read(&mut buf).await;
        }
    });
    let mut req = request(addr, Some(TOKEN));
    req.url = format!("wss://localhost:{}/ws", addr.port());
    let error = connect(req, FrameLimits::default())
        .await
        .expect_err("not TLS");
    plain.abort();
    assert!(matches!(error, ConnectError::Tls(_)), "{error:?}");
}

#[test]
fn refusal_message_is_readable() {
    let error = ConnectError::Refused {
        status: 401,
        body: "bad token\n".into(),
    };
    assert_eq!(
        error.to_string(),
        "the server refused the WebSocket upgrade with HTTP 401: bad token"
    );
    let error = ConnectError::Refused {
        status: 404,
        body: String::new(),
    };
    assert_eq!(
        error.to_string(),
        "the server refused the WebSocket upgrade with HTTP 404"
    );
}

/// Waits until no more than `target` tasks are alive on this runtime.
async fn wait_for_tasks(target: usize) {
    let metrics = tokio::runtime::Handle::current().metrics();
    let started = Instant::now();
    while metrics.num_alive_tasks() > target {
        assert!(
            started.elapsed() < STEP,
            "{} tasks still alive, expected {target}",
            metrics.num_alive_tasks()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn pump_tasks_end_when_either_side_closes() {
    let mut server = start_server(FrameLimits::default()).await;
    let baseline = tokio::runtime::Handle::current()
        .metrics()
        .num_alive_tasks();
    let connect_pair = async |server: &mut Server| {
        let client = connect(request(server.addr, Some(TOKEN)), FrameLimits::default())
            .await
            .expect("connect");
        (accepted(server).await, client)
    };

    // The client closes; both sides keep their Connection (senders included) alive meanwhile.
    let (mut server_side, client) = connect_pair(&mut server).await;
    // A reader and a writer on each side: the waits below are not vacuous.
    assert!(
        tokio::runtime::Handle::current()
            .metrics()
            .num_alive_tasks()
            >= baseline + 4
    );
    client.outgoing.send(Outgoing::Close(mismatch())).unwrap();
    assert!(matches!(
        next(&mut server_side).await,
        Some(Incoming::Closed(Some(_)))
    ));
    wait_for_tasks(baseline).await;
    drop((server_side, client));

    // The server's whole Connection is dropped while the client holds on to its own.
    let (server_side, mut client) = connect_pair(&mut server).await;
    drop(server_side);
    assert!(matches!(
        next(&mut client).await,
        Some(Incoming::Closed(Some(_)))
    ));
    wait_for_tasks(baseline).await;
    drop(client);

    // The client drops its Connection while the server never reads its incoming side.
    let (server_side, client) = connect_pair(&mut server).await;
    drop(client);
    wait_for_tasks(baseline).await;
    drop(server_side);
}

#[tokio::test]
async fn unanswered_close_gives_up_after_the_deadline() {
    // Completes the upgrade, then never reads again: our close frame is never answered.
    let (addr, mute, accepted_rx) = half_open_server().await;
    let mut client = connect(request(addr, None), FrameLimits::default())
        .await
        .expect("connect");
    accepted_rx.await.unwrap();

    // Virtual time from here: the 2 s deadline passes without the test waiting for it.
    tokio::time::pause();
    let started = Instant::now();
    client.outgoing.send(Outgoing::Close(mismatch())).unwrap();
    assert_eq!(next(&mut client).await, Some(Incoming::Closed(None)));
    assert_eq!(next(&mut client).await, None);
    assert!(started.elapsed() >= crate::transport::ws_server::CLOSE_TIMEOUT);
    mute.abort();
}

/// A server that completes the upgrade, then is never heard from again: what a half-open TCP
/// connection looks like from this side (its machine gone, no FIN). Gives its address and the
/// task to abort.
async fn half_open_server() -> (
    SocketAddr,
    JoinHandle<()>,
    tokio::sync::oneshot::Receiver<()>,
) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (accepted_tx, accepted_rx) = tokio::sync::oneshot::channel();
    let mute = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        let ws = tokio_tungstenite::accept_async(tcp).await.unwrap();
        let _ = accepted_tx.send(());
        std::future::pending::<()>().await;
        drop(ws);
    });
    (addr, mute, accepted_rx)
}

#[tokio::test]
async fn a_peer_silent_after_a_ping_is_taken_for_gone() {
    let (addr, mute, accepted) = half_open_server().await;
    let silence = Duration::from_secs(20);
    let limits = FrameLimits {
        silence,
        ..FrameLimits::default()
    };
    // Before the link is up, so the reader's clock cannot start before this one.
    let started = Instant::now();
    let mut client = connect(request(addr, None), limits).await.expect("connect");
    accepted.await.unwrap();

    // Virtual time: two silences pass without the test waiting for them.
    tokio::time::pause();
    assert_eq!(
        next_within(&mut client, 3 * silence).await,
        Some(Incoming::Closed(None))
    );
    assert!(started.elapsed() >= 2 * silence, "{:?}", started.elapsed());
    mute.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_that_answers_pings_keeps_a_quiet_link() {
    // Short, for a quick test, but not so short that a busy machine's pause lets a link go.
    let silence = Duration::from_millis(250);
    let limits = FrameLimits {
        silence,
        ..FrameLimits::default()
    };
    let (_server, mut server_side, mut client) = pair(limits, limits).await;
    // Six silences with nothing sent: each side's pings are answered by the other's library.
    tokio::time::sleep(6 * silence).await;
    client.outgoing.send(text("still here")).unwrap();
    hears(&mut server_side, "still here").await;
    server_side.outgoing.send(text("so am I")).unwrap();
    hears(&mut client, "so am I").await;
}

async fn next_within(conn: &mut Connection, within: Duration) -> Option<Incoming> {
    timeout(within, conn.incoming.recv())
        .await
        .expect("incoming event in time")
}

/// `half-close` ends only the sending direction: the peer reads what came before and then the
/// end of the stream, with no close frame, while what it sends after still arrives.
#[tokio::test]
async fn a_half_closed_link_sends_no_more_and_still_hears_the_peer() {
    use futures_util::StreamExt;
    let mut server = start_server(FrameLimits::default()).await;
    let tcp = TcpStream::connect(server.addr).await.unwrap();
    let mut raw = tokio_tungstenite::client_async(raw_upgrade(server.addr), tcp)
        .await
        .expect("raw client connects")
        .0;
    let mut server_side = accepted(&mut server).await;

    server_side.outgoing.send(text("last words")).unwrap();
    server_side.outgoing.send(Outgoing::HalfClose).unwrap();
    server_side.outgoing.send(text("lost")).unwrap();
    let first = timeout(STEP, raw.next()).await.expect("in time");
    assert_eq!(first.unwrap().unwrap(), Message::Text("last words".into()));
    // The raw client still writes on its own direction, which the half-closed side reads.
    tokio::time::sleep(Duration::from_millis(100)).await;
    raw.send(Message::Text("still heard".into())).await.unwrap();
    hears(&mut server_side, "still heard").await;
    // And then it reads the end of the stream: no close frame, and nothing sent after the
    // half-close.
    match timeout(STEP, raw.next()).await.expect("in time") {
        None | Some(Err(_)) => {}
        Some(Ok(other)) => panic!("expected the end of the stream, got {other:?}"),
    }
}

/// A dialling side's half-close reaches the accepting side as an end without a close frame.
#[tokio::test]
async fn a_client_half_close_ends_the_stream_without_a_close_frame() {
    let (_server, mut server_side, client) =
        pair(FrameLimits::default(), FrameLimits::default()).await;
    client.outgoing.send(text("last words")).unwrap();
    client.outgoing.send(Outgoing::HalfClose).unwrap();
    hears(&mut server_side, "last words").await;
    assert_eq!(next(&mut server_side).await, Some(Incoming::Closed(None)));
}
