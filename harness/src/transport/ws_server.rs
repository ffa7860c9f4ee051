//! The server side of a WebSocket link, on axum.
//!
//! [`accept`] turns a [`LinkUpgrade`] (axum's upgrade request, with its socket) into a
//! [`Connection`]. This file also holds the pump shared with [`super::ws_client`]: both sides
//! speak the same close handshake, so the loop that moves frames between the socket and the
//! channels is written once, over the small `WsMessage` trait (both sides now run tungstenite
//! under it; the trait keeps the pump free of its types).

use std::convert::Infallible;
use std::fmt::Display;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::body::Body;
use axum::extract::FromRequestParts;
use axum::extract::ws::WebSocketUpgrade;
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures_util::{Sink, SinkExt, Stream, StreamExt};
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};

use super::half_close::{HalfClosable, HalfCloseSwitch};
use super::outbox::WRITE_STALL;
use super::{CLOSE_NORMAL, CloseInfo, Connection, FrameLimits, Incoming, Outgoing};

/// How long a closing side waits for the peer's close reply (or for a slow write) before it
/// drops the socket: long enough for any live peer on a test link, short enough that a dead
/// one cannot hold a connection open.
pub(super) const CLOSE_TIMEOUT: Duration = Duration::from_secs(2);

/// Incoming messages buffered before the reader stops reading the socket (backpressure).
const INCOMING_CAPACITY: usize = 64;

/// Close code 1005: RFC 6455's stand-in for "the close frame carried no status code".
const CLOSE_NO_STATUS: u16 = 1005;

/// Close code 1001: this side is going away (here: the peer stopped answering pings).
const CLOSE_GOING_AWAY: u16 = 1001;

/// Close code 1009: the message was too big to process.
const CLOSE_TOO_BIG: u16 = 1009;
/// WebSocket close code 1007: a text frame that is not UTF-8 (RFC 6455, 7.4.1).
const CLOSE_NOT_UTF8: u16 = 1007;

/// The longest close reason a close frame can carry: 125 bytes of payload minus the 2-byte code.
const MAX_CLOSE_REASON_BYTES: usize = 123;

/// A WebSocket upgrade request, taken by a handler like axum's `WebSocketUpgrade` (refused the
/// same way), but leaving the link its socket, which axum's keeps to itself: the half-close
/// fault ends the socket's sending direction alone (see [`super::half_close`]).
pub struct LinkUpgrade {
    key: HeaderValue,
    on_upgrade: OnUpgrade,
}

impl<S: Send + Sync> FromRequestParts<S> for LinkUpgrade {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        // Taken before axum's extractor removes it from the request.
        let on_upgrade = parts.extensions.get::<OnUpgrade>().cloned();
        // axum's own checks (GET, the Connection, Upgrade and version headers, the key), so a
        // request that is no upgrade is refused exactly as before.
        let _checked = WebSocketUpgrade::from_request_parts(parts, state)
            .await
            .map_err(IntoResponse::into_response)?;
        let key = parts.headers.get(header::SEC_WEBSOCKET_KEY).cloned();
        match (key, on_upgrade) {
            (Some(key), Some(on_upgrade)) => Ok(LinkUpgrade { key, on_upgrade }),
            // HTTP/2's extended CONNECT carries no key: the links speak HTTP/1.1.
            _ => Err((
                StatusCode::BAD_REQUEST,
                "the link is a WebSocket over HTTP/1.1",
            )
                .into_response()),
        }
    }
}

/// Accepts a WebSocket upgrade and hands the resulting [`Connection`] to `on_open`.
///
/// Messages (and single frames) larger than `limits.max_message_bytes` end the connection with
/// [`Incoming::Closed(None)`](Incoming::Closed) on this side and a 1009 close sent to the peer.
/// `peer` names the remote end in logs and in [`Connection::peer`]. `on_open` runs once the
/// upgrade has completed, on a task of its own; if the upgrade fails it is never called (the
/// failure is logged).
pub fn accept(
    upgrade: LinkUpgrade,
    limits: FrameLimits,
    peer: String,
    on_open: impl FnOnce(Connection) + Send + 'static,
) -> Response {
    let LinkUpgrade { key, on_upgrade } = upgrade;
    let config = WebSocketConfig::default()
        .max_message_size(Some(limits.max_message_bytes))
        .max_frame_size(Some(limits.max_message_bytes))
        .read_buffer_size(super::LINK_READ_BUFFER);
    tokio::spawn(async move {
        let upgraded = match on_upgrade.await {
            Ok(upgraded) => upgraded,
            Err(error) => {
                tracing::warn!(peer = %peer, %error, "WebSocket upgrade failed");
                return;
            }
        };
        let (io, half_close) = HalfClosable::new(TokioIo::new(upgraded));
        let socket = WebSocketStream::from_raw_socket(io, Role::Server, Some(config)).await;
        tracing::debug!(peer = %peer, "WebSocket connection accepted");
        on_open(spawn_pumps(socket, peer, limits.silence, half_close));
    });
    let mut response = Response::new(Body::empty());
    *response.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let headers = response.headers_mut();
    headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    headers.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    if let Ok(accept) = HeaderValue::from_str(&derive_accept_key(key.as_bytes())) {
        headers.insert(header::SEC_WEBSOCKET_ACCEPT, accept);
    }
    response
}

/// One frame as the pump sees it, whichever library produced it.
pub(super) enum WsEvent {
    /// A text message.
    Text(String),
    /// A binary message.
    Binary(Vec<u8>),
    /// The peer's close frame (`None` when it carried no code).
    Close(Option<CloseInfo>),
    /// Ping, pong or a raw frame: the library answers these itself.
    Control,
}

/// The two operations the pump needs from a WebSocket library's message type.
pub(super) trait WsMessage: Sized {
    /// A text message carrying `text`.
    fn text(text: String) -> Self;
    /// A close frame with this code and reason (the reason already cut to fit).
    fn close(code: u16, reason: String) -> Self;
    /// A ping with no payload.
    fn ping() -> Self;
    /// What this received message means to the pump.
    fn into_event(self) -> WsEvent;
}

/// Splits a WebSocket into a reader task and a writer task and returns the [`Connection`]
/// that feeds them.
///
/// The reader delivers messages to `incoming` and ends with exactly one `Closed`; the writer
/// sends `outgoing` and turns an `Outgoing::Close` or a dropped sender into a close frame. Each
/// tells the other when it stops, so both end when either side closes:
/// - the writer stopping (close sent, or the socket failed) gives the reader [`CLOSE_TIMEOUT`]
///   to see the peer's close reply and the end of the stream;
/// - the reader stopping (close received, error, end of stream) stops the writer, which first
///   sends a 1009 close when the reader stopped on a message over the limit.
///
/// After `silence` with nothing heard the reader has the writer ping the peer, and after as
/// long again it stops as if the stream had ended (see [`FrameLimits::silence`]).
pub(super) fn spawn_pumps<S, M, E>(
    socket: S,
    peer: String,
    silence: Duration,
    half_close: HalfCloseSwitch,
) -> Connection
where
    S: Stream<Item = Result<M, E>> + Sink<M, Error = E> + Send + 'static,
    M: WsMessage + Send + 'static,
    E: std::error::Error + Send + 'static,
{
    let (sink, stream) = socket.split();
    let (outgoing_tx, outgoing_rx) = super::outbox();
    let (incoming_tx, incoming_rx) = mpsc::channel(INCOMING_CAPACITY);
    // Never sent on: the writer drops it when it stops, which is the signal.
    let (writer_alive, writer_gone) = oneshot::channel::<Infallible>();
    let (reader_done_tx, reader_done_rx) = oneshot::channel();
    // One ping owed at a time is all the reader ever asks for.
    let (ping_tx, ping_rx) = mpsc::channel(1);
    let ping_sent = PingSent::default();
    // Set by the writer told to drop the connection: the reader then lets go of the socket at
    // once instead of waiting for a close handshake.
    let dropped = Arc::new(AtomicBool::new(false));

    tokio::spawn(read_pump(
        stream,
        incoming_tx,
        Watch {
            writer_gone,
            ping: ping_tx,
            ping_sent: ping_sent.clone(),
            silence,
            dropped: dropped.clone(),
        },
        reader_done_tx,
        peer.clone(),
    ));
    tokio::spawn(write_pump(
        sink,
        Orders {
            outgoing: outgoing_rx,
            ping: ping_rx,
            ping_sent,
            dropped,
            half_close,
        },
        reader_done_rx,
        writer_alive,
        peer.clone(),
    ));

    Connection {
        outgoing: outgoing_tx,
        incoming: incoming_rx,
        peer,
    }
}

/// What woke the reader up.
enum ReadStep<T> {
    Item(Option<T>),
    WriterGone,
    Deadline,
    Silence,
}

/// What the reader watches besides the socket: the writer's end, and the peer's silence.
struct Watch {
    writer_gone: oneshot::Receiver<Infallible>,
    /// Asks the writer for a ping.
    ping: mpsc::Sender<()>,
    /// When the writer put the asked ping on the wire.
    ping_sent: PingSent,
    silence: Duration,
    /// The writer was told to drop the connection.
    dropped: Arc<AtomicBool>,
}

/// What the writer takes orders from: the local side's messages, and the reader's pings.
struct Orders {
    outgoing: super::OutboxReceiver,
    ping: mpsc::Receiver<()>,
    /// Where the writer says when it sent the ping.
    ping_sent: PingSent,
    /// Set when told to drop the connection.
    dropped: Arc<AtomicBool>,
    /// Ends the socket's sending direction when told to half-close.
    half_close: HalfCloseSwitch,
}

/// When the writer put the reader's last asked ping on the wire (`None`: not yet). The peer's
/// time to answer counts from then: a writer that ran late (a starved CPU) must not make a
/// live peer look gone, nor let it go without a ping ever sent.
type PingSent = Arc<std::sync::Mutex<Option<Instant>>>;

/// The reader's watch on the peer's silence: after `silence` with nothing heard it asks for a
/// ping, and a peer still silent `silence` after that is taken for gone.
///
/// The silence timer is set once and moved only when it fires (a message does no more than
/// note the time): re-arming a timer for every message would cost the busy link.
struct Keepalive {
    /// Whether the watch is on. Zero turns it off; a silence too long for the clock is as good
    /// as none.
    on: bool,
    silence: Duration,
    last_heard: Instant,
    pinged: bool,
}

impl Keepalive {
    fn new(silence: Duration) -> Self {
        Self {
            on: !silence.is_zero() && Instant::now().checked_add(silence * 2).is_some(),
            silence,
            last_heard: Instant::now(),
            pinged: false,
        }
    }

    /// When the timer first fires.
    fn first_alarm(&self) -> Instant {
        match self.on {
            true => self.last_heard + self.silence,
            false => self.last_heard,
        }
    }

    /// A message came.
    fn heard(&mut self) {
        self.last_heard = Instant::now();
        self.pinged = false;
    }

    /// Pinged, and nothing heard since for the whole silence.
    fn overdue(&self) -> bool {
        self.pinged && self.last_heard.elapsed() >= self.silence
    }

    /// The timer fired: moves it on, asking for a ping first when none is out. False: the
    /// ping was sent and went unanswered for the whole silence, the peer is gone.
    fn still_waiting(
        &mut self,
        mut timer: std::pin::Pin<&mut tokio::time::Sleep>,
        ping: &mpsc::Sender<()>,
        ping_sent: &PingSent,
    ) -> bool {
        if self.last_heard.elapsed() < self.silence {
            timer.reset(self.last_heard + self.silence);
            return true;
        }
        if self.pinged {
            let sent = ping_sent.lock().map(|s| *s).unwrap_or(None);
            return match sent {
                // The writer has not got to it yet: the peer cannot have answered.
                None => {
                    timer.as_mut().reset(Instant::now() + self.silence);
                    true
                }
                Some(at) if at.elapsed() < self.silence => {
                    timer.as_mut().reset(at + self.silence);
                    true
                }
                Some(_) => false,
            };
        }
        self.pinged = true;
        self.last_heard = Instant::now();
        if let Ok(mut sent) = ping_sent.lock() {
            *sent = None;
        }
        timer.reset(self.last_heard + self.silence);
        let _ = ping.try_send(());
        true
    }
}

/// Reads the socket until the stream ends, fails, or the closing deadline passes.
///
/// Sends `Closed` exactly once, then reports on `done` the close frame (if any) the writer
/// should still send.
async fn read_pump<St, M, E>(
    mut stream: St,
    incoming: mpsc::Sender<Incoming>,
    mut watch: Watch,
    done: oneshot::Sender<Option<CloseInfo>>,
    peer: String,
) where
    St: Stream<Item = Result<M, E>> + Unpin,
    M: WsMessage,
    E: std::error::Error + 'static,
{
    let mut writer_running = true;
    // Set once either side has started closing: from then on the socket only has to deliver
    // the rest of the handshake, and a peer that never finishes it must not keep us here.
    let mut deadline: Option<Instant> = None;
    let mut reported = false;
    let mut close_for_writer = None;
    let mut alive = Keepalive::new(watch.silence);
    let silence = tokio::time::sleep_until(alive.first_alarm());
    tokio::pin!(silence);

    loop {
        let step = tokio::select! {
            item = stream.next() => ReadStep::Item(item),
            _ = &mut watch.writer_gone, if writer_running => ReadStep::WriterGone,
            () = tokio::time::sleep_until(deadline.unwrap_or_else(Instant::now)),
                if deadline.is_some() => ReadStep::Deadline,
            () = &mut silence, if alive.on && deadline.is_none() => ReadStep::Silence,
        };
        // select! picks among the ready at random: after a stall (a starved CPU) the pong may
        // be waiting beside the expired timer, and a live peer must not be let go for it.
        let step = match step {
            ReadStep::Silence if alive.overdue() => {
                match futures_util::FutureExt::now_or_never(stream.next()) {
                    Some(item) => ReadStep::Item(item),
                    None => ReadStep::Silence,
                }
            }
            step => step,
        };
        if matches!(step, ReadStep::Item(Some(_))) {
            alive.heard();
        }
        match step {
            ReadStep::Silence
                if alive.still_waiting(silence.as_mut(), &watch.ping, &watch.ping_sent) => {}
            ReadStep::Silence => {
                tracing::debug!(peer = %peer, silence = ?watch.silence,
                    "nothing heard since a ping: the peer is taken for gone");
                close_for_writer = Some(CloseInfo {
                    code: CLOSE_GOING_AWAY,
                    reason: "no answer to a ping".to_owned(),
                });
                break;
            }
            ReadStep::WriterGone if watch.dropped.load(Ordering::Relaxed) => {
                tracing::debug!(peer = %peer, "dropping the connection without a close frame");
                break;
            }
            ReadStep::WriterGone => {
                writer_running = false;
                deadline.get_or_insert_with(|| Instant::now() + CLOSE_TIMEOUT);
            }
            ReadStep::Deadline => {
                if !reported {
                    tracing::debug!(peer = %peer, "no close reply from the peer in time");
                }
                break;
            }
            ReadStep::Item(None) => break,
            ReadStep::Item(Some(Err(error))) => {
                if let Some(tungstenite::Error::Utf8(why)) = find_tungstenite_error(&error) {
                    deliver(&incoming, Incoming::NotUtf8(why.clone())).await;
                }
                close_for_writer = log_read_error(&error, &peer);
                break;
            }
            ReadStep::Item(Some(Ok(message))) => {
                let event = message.into_event();
                on_event(event, &incoming, &mut reported, &mut deadline, &peer).await;
            }
        }
    }

    if !reported {
        deliver(&incoming, Incoming::Closed(None)).await;
    }
    // The writer may already be gone; then there is no one left to tell.
    let _ = done.send(close_for_writer);
}

/// Hands a message the socket read to the local side. A close frame is reported once
/// (`reported`), and starts the closing deadline.
async fn on_event(
    event: WsEvent,
    incoming: &mpsc::Sender<Incoming>,
    reported: &mut bool,
    deadline: &mut Option<Instant>,
    peer: &str,
) {
    match event {
        WsEvent::Text(text) => deliver(incoming, Incoming::Text(text)).await,
        WsEvent::Binary(bytes) => deliver(incoming, Incoming::Binary(bytes)).await,
        WsEvent::Control => {}
        WsEvent::Close(info) => {
            if !*reported {
                *reported = true;
                let info = info.unwrap_or(CloseInfo {
                    code: CLOSE_NO_STATUS,
                    reason: String::new(),
                });
                tracing::debug!(peer = %peer, code = info.code, reason = %info.reason,
                    "peer closed the WebSocket");
                deliver(incoming, Incoming::Closed(Some(info))).await;
            }
            // Keep reading: that is what flushes the library's automatic close reply
            // and, on the client side, waits for the server to drop the TCP stream.
            deadline.get_or_insert_with(|| Instant::now() + CLOSE_TIMEOUT);
        }
    }
}

/// Hands one event to the local side. A local side that dropped its receiver no longer cares,
/// but the socket is still read so that pings and the close handshake are answered.
async fn deliver(incoming: &mpsc::Sender<Incoming>, event: Incoming) {
    let _ = incoming.send(event).await;
}

/// Logs why reading stopped; returns the close frame to send the peer, if one is owed.
fn log_read_error<E>(error: &E, peer: &str) -> Option<CloseInfo>
where
    E: std::error::Error + 'static,
{
    match find_tungstenite_error(error) {
        Some(tungstenite::Error::Capacity(capacity)) => {
            tracing::warn!(peer = %peer, %capacity, "message over the limit; closing");
            Some(CloseInfo {
                code: CLOSE_TOO_BIG,
                reason: "message too big".to_owned(),
            })
        }
        Some(tungstenite::Error::Utf8(why)) => {
            tracing::debug!(peer = %peer, %why, "a text frame that is not UTF-8; closing");
            Some(CloseInfo {
                code: CLOSE_NOT_UTF8,
                reason: "text frame not UTF-8".to_owned(),
            })
        }
        Some(
            tungstenite::Error::ConnectionClosed
            | tungstenite::Error::AlreadyClosed
            | tungstenite::Error::Io(_)
            | tungstenite::Error::Protocol(
                tungstenite::error::ProtocolError::ResetWithoutClosingHandshake,
            ),
        ) => {
            tracing::debug!(peer = %peer, %error, "peer went away without a close frame");
            None
        }
        _ => {
            tracing::warn!(peer = %peer, %error, "WebSocket read failed");
            None
        }
    }
}

/// The tungstenite error behind `error`: axum wraps it, tokio-tungstenite returns it as is.
fn find_tungstenite_error<'a>(
    error: &'a (dyn std::error::Error + 'static),
) -> Option<&'a tungstenite::Error> {
    let mut current = Some(error);
    while let Some(error) = current {
        if let Some(found) = error.downcast_ref::<tungstenite::Error>() {
            return Some(found);
        }
        current = error.source();
    }
    None
}

/// Sends `outgoing` until a close is asked for, the sender is dropped, or the reader stops.
///
/// `alive` is dropped on return, which tells the reader the writer is gone.
async fn write_pump<Si, M>(
    mut sink: Si,
    mut orders: Orders,
    reader_done: oneshot::Receiver<Option<CloseInfo>>,
    alive: oneshot::Sender<Infallible>,
    peer: String,
) where
    Si: Sink<M> + Unpin,
    Si::Error: Display,
    M: WsMessage,
{
    tokio::select! {
        () = write_until_close(&mut sink, &mut orders, &peer) => {}
        // A pending write to a peer that stopped reading is abandoned here too: the reader
        // ending means the connection is over.
        owed = reader_done => {
            if let Ok(Some(info)) = owed {
                send_close(&mut sink, info, &peer).await;
            }
        }
    }
    drop(alive);
}

/// The writer's normal life: text until a close request or the local side lets go.
async fn write_until_close<Si, M>(sink: &mut Si, orders: &mut Orders, peer: &str)
where
    Si: Sink<M> + Unpin,
    Si::Error: Display,
    M: WsMessage,
{
    let Orders {
        outgoing,
        ping,
        ping_sent,
        dropped,
        half_close,
    } = orders;
    loop {
        let next = tokio::select! {
            next = outgoing.recv() => next,
            Some(()) = ping.recv() => {
                // The reader counts the peer's time to answer from the ping's sending; a peer
                // that takes not even the ping in WRITE_STALL is gone, as for a message.
                match tokio::time::timeout(WRITE_STALL, sink.send(M::ping())).await {
                    Ok(Ok(())) => {
                        if let Ok(mut sent) = ping_sent.lock() {
                            *sent = Some(Instant::now());
                        }
                    }
                    Ok(Err(error)) => {
                        tracing::debug!(peer = %peer, %error, "WebSocket ping failed; writer stops");
                        return;
                    }
                    Err(_) => {
                        tracing::debug!(peer = %peer, "the peer took no ping; writer stops");
                        return;
                    }
                }
                continue;
            }
        };
        match next {
            Some(Outgoing::Text(text)) => {
                let bytes = text.len();
                let sent = tokio::time::timeout(WRITE_STALL, sink.send(M::text(text))).await;
                outgoing.written(bytes);
                match sent {
                    Ok(Ok(())) => {}
                    Ok(Err(error)) => {
                        tracing::debug!(peer = %peer, %error, "WebSocket write failed; writer stops");
                        return;
                    }
                    Err(_) => {
                        tracing::warn!(peer = %peer, "the peer took none of a message in {WRITE_STALL:?}: it is not reading; the connection ends");
                        return;
                    }
                }
            }
            Some(Outgoing::Close(info)) => {
                send_close(sink, info, peer).await;
                return;
            }
            Some(Outgoing::Drop) => {
                dropped.store(true, Ordering::Relaxed);
                return;
            }
            Some(Outgoing::Stall(pause)) => tokio::time::sleep(pause).await,
            Some(Outgoing::HalfClose) => {
                // The flush reaches the socket, which shuts its sending side; the writer lives
                // on (what it sends is lost), so the reader keeps hearing the peer.
                half_close.throw();
                let _ = tokio::time::timeout(WRITE_STALL, sink.flush()).await;
            }
            None => {
                let info = CloseInfo {
                    code: CLOSE_NORMAL,
                    reason: String::new(),
                };
                send_close(sink, info, peer).await;
                return;
            }
        }
    }
}

/// Sends one close frame, giving up after [`CLOSE_TIMEOUT`] so a stalled peer cannot hold the
/// writer.
async fn send_close<Si, M>(sink: &mut Si, info: CloseInfo, peer: &str)
where
    Si: Sink<M> + Unpin,
    Si::Error: Display,
    M: WsMessage,
{
    tracing::debug!(peer = %peer, code = info.code, reason = %info.reason, "closing the WebSocket");
    let frame = M::close(info.code, fit_close_reason(info.reason));
    match tokio::time::timeout(CLOSE_TIMEOUT, sink.send(frame)).await {
        Ok(Ok(())) => {}
        // Usually the peer closed first or vanished; either way there is nothing more to do.
        Ok(Err(error)) => tracing::debug!(peer = %peer, %error, "could not send the close frame"),
        Err(_) => tracing::debug!(peer = %peer, "timed out sending the close frame"),
    }
}

/// Cuts a close reason to what a close frame can carry, on a character boundary, so a long
/// reason cannot turn the close into a protocol error.
fn fit_close_reason(mut reason: String) -> String {
    if reason.len() > MAX_CLOSE_REASON_BYTES {
        let mut end = MAX_CLOSE_REASON_BYTES;
        while !reason.is_char_boundary(end) {
            end -= 1;
        }
        reason.truncate(end);
    }
    reason
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer that puts the ping on the wire late (a starved CPU) does not make a silent
    /// peer gone before it had the whole silence to answer the ping it was actually sent.
    #[tokio::test(start_paused = true)]
    async fn the_time_to_answer_a_ping_counts_from_its_sending() {
        let silence = Duration::from_millis(100);
        let (ping, mut asked) = mpsc::channel(1);
        let sent = PingSent::default();
        let mut alive = Keepalive::new(silence);
        let timer = tokio::time::sleep_until(alive.first_alarm());
        tokio::pin!(timer);
        tokio::time::advance(silence).await;
        assert!(
            alive.still_waiting(timer.as_mut(), &ping, &sent),
            "a ping is asked"
        );
        assert!(asked.try_recv().is_ok());
        // A silence later the writer has still not sent it: the peer cannot have answered.
        tokio::time::advance(silence * 3).await;
        assert!(alive.still_waiting(timer.as_mut(), &ping, &sent));
        *sent.lock().expect("not poisoned") = Some(Instant::now());
        tokio::time::advance(silence / 2).await;
        assert!(alive.still_waiting(timer.as_mut(), &ping, &sent));
        assert_eq!(timer.deadline(), Instant::now() + silence / 2);
        tokio::time::advance(silence / 2).await;
        assert!(
            !alive.still_waiting(timer.as_mut(), &ping, &sent),
            "now it is gone"
        );
    }

    #[test]
    fn close_reason_is_cut_on_a_char_boundary() {
        let reason = "é".repeat(100); // 200 bytes
        let fitted = fit_close_reason(reason);
        assert!(fitted.len() <= MAX_CLOSE_REASON_BYTES);
        assert_eq!(fitted.len(), 122);
        assert_eq!(fit_close_reason("short".into()), "short");
    }

    #[test]
    fn messages_map_to_events() {
        assert!(matches!(
            tungstenite::Message::Text("hi".into()).into_event(),
            WsEvent::Text(text) if text == "hi"
        ));
        assert!(matches!(
            tungstenite::Message::Close(None).into_event(),
            WsEvent::Close(None)
        ));
        assert!(matches!(
            tungstenite::Message::Ping(Vec::new().into()).into_event(),
            WsEvent::Control
        ));
    }
}
