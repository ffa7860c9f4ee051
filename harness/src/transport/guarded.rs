//! A TCP listener whose connections cannot hold a socket by saying nothing.
//!
//! axum's server reads a request's headers for as long as the client takes, and keeps an idle
//! keep-alive connection for good: 256 connections that send nothing exhaust a double's file
//! descriptors, and every new client then waits. Each accepted stream here has a deadline for
//! its first request's headers ([`HEADERS_WITHIN`]), and a plain HTTP connection (not upgraded
//! to a WebSocket, which has its own watchdogs) is closed once idle for [`IDLE_FOR`].

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::{Instant, Sleep};

/// How long a connection may take to send its first request's headers.
pub const HEADERS_WITHIN: Duration = Duration::from_secs(10);
/// How long a plain HTTP connection may sit with nothing read or written.
pub const IDLE_FOR: Duration = Duration::from_secs(60);
/// The most header bytes scanned for the end of the first request's headers; a client that
/// sends more without ending them is cut off by [`HEADERS_WITHIN`] all the same.
const SCAN_LIMIT: usize = 64 * 1024;

/// A listener handing out [`Guarded`] streams (with `TCP_NODELAY`: small JSON-RPC messages
/// stall behind Nagle's algorithm).
#[derive(Debug)]
pub struct GuardedListener {
    inner: TcpListener,
    headers_within: Duration,
    idle_for: Duration,
}

impl GuardedListener {
    /// Guards the connections `inner` accepts, with [`HEADERS_WITHIN`] and [`IDLE_FOR`].
    pub fn new(inner: TcpListener) -> Self {
        Self::with_deadlines(inner, HEADERS_WITHIN, IDLE_FOR)
    }

    /// Guards them with other deadlines (a test's).
    pub fn with_deadlines(
        inner: TcpListener,
        headers_within: Duration,
        idle_for: Duration,
    ) -> Self {
        GuardedListener {
            inner,
            headers_within,
            idle_for,
        }
    }
}

impl axum::serve::Listener for GuardedListener {
    type Io = Guarded;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        let (stream, addr) = axum::serve::Listener::accept(&mut self.inner).await;
        let _ = stream.set_nodelay(true);
        (
            Guarded::new(stream, self.headers_within, self.idle_for),
            addr,
        )
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.inner.local_addr()
    }
}

/// The peer's address of a connection a [`GuardedListener`] accepted, for axum's
/// `ConnectInfo` (axum gives `SocketAddr` itself only for its own listeners).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemoteAddr(pub SocketAddr);

impl std::fmt::Display for RemoteAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl axum::extract::connect_info::Connected<axum::serve::IncomingStream<'_, GuardedListener>>
    for RemoteAddr
{
    fn connect_info(stream: axum::serve::IncomingStream<'_, GuardedListener>) -> Self {
        RemoteAddr(*stream.remote_addr())
    }
}

/// Where a guarded stream is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Reading the first request's headers, against [`HEADERS_WITHIN`].
    Headers,
    /// Plain HTTP: closed after [`IDLE_FOR`] without a byte either way.
    Idle,
    /// A WebSocket upgrade was asked for: the link's own watchdogs take over.
    Unguarded,
}

/// A TCP stream with the deadlines of [`GuardedListener`].
#[derive(Debug)]
pub struct Guarded {
    stream: TcpStream,
    phase: Phase,
    deadline: Pin<Box<Sleep>>,
    idle_for: Duration,
    /// The first request's header bytes so far (up to [`SCAN_LIMIT`]).
    head: Vec<u8>,
}

impl Guarded {
    fn new(stream: TcpStream, headers_within: Duration, idle_for: Duration) -> Self {
        Guarded {
            stream,
            phase: Phase::Headers,
            deadline: Box::pin(tokio::time::sleep(headers_within)),
            idle_for,
            head: Vec::new(),
        }
    }

    /// Notes bytes read: the end of the first request's headers decides the next phase.
    fn saw(&mut self, bytes: &[u8]) {
        match self.phase {
            Phase::Headers => {
                let room = SCAN_LIMIT.saturating_sub(self.head.len());
                self.head.extend_from_slice(&bytes[..bytes.len().min(room)]);
                if let Some(end) = find(&self.head, b"\r\n\r\n") {
                    self.phase = if asks_upgrade(&self.head[..end]) {
                        Phase::Unguarded
                    } else {
                        Phase::Idle
                    };
                    self.head = Vec::new();
                    self.touch();
                }
            }
            Phase::Idle => self.touch(),
            Phase::Unguarded => {}
        }
    }

    fn touch(&mut self) {
        if self.phase == Phase::Idle {
            let at = Instant::now() + self.idle_for;
            self.deadline.as_mut().reset(at);
        }
    }

    /// An error once the phase's deadline has passed.
    fn expired(&mut self, cx: &mut Context<'_>) -> Option<io::Error> {
        if self.phase == Phase::Unguarded || self.deadline.as_mut().poll(cx).is_pending() {
            return None;
        }
        Some(io::Error::new(
            io::ErrorKind::TimedOut,
            match self.phase {
                Phase::Headers => "no request headers in time",
                _ => "idle for too long",
            },
        ))
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Whether a request's head asks for a WebSocket (`Upgrade: websocket`, in any case).
fn asks_upgrade(head: &[u8]) -> bool {
    String::from_utf8_lossy(head).lines().any(|line| {
        line.split_once(':').is_some_and(|(name, value)| {
            name.trim().eq_ignore_ascii_case("upgrade")
                && value.trim().eq_ignore_ascii_case("websocket")
        })
    })
}

impl AsyncRead for Guarded {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        match Pin::new(&mut self.stream).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                self.saw(&buf.filled()[before..]);
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => match self.expired(cx) {
                Some(error) => Poll::Ready(Err(error)),
                None => Poll::Pending,
            },
        }
    }
}

impl AsyncWrite for Guarded {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let written = Pin::new(&mut self.stream).poll_write(cx, data);
        if matches!(written, Poll::Ready(Ok(n)) if n > 0) {
            self.touch();
        }
        written
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_upgrade_is_told_from_a_plain_request_in_any_case() {
        assert!(asks_upgrade(
            b"GET /api/devices/link HTTP/1.1\r\nHost: x\r\nupgrade: WebSocket\r\nConnection: Upgrade"
        ));
        assert!(!asks_upgrade(b"GET /v1/models HTTP/1.1\r\nHost: x"));
        assert!(!asks_upgrade(b"GET / HTTP/1.1\r\nX-Upgrade: websocket"));
    }

    #[tokio::test]
    async fn a_connection_that_sends_no_headers_is_cut_off_and_one_that_does_is_served() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("binds");
        let addr = listener.local_addr().expect("an address");
        let short = Duration::from_millis(200);
        let mut guarded = GuardedListener::with_deadlines(listener, short, short);
        let _silent = TcpStream::connect(addr).await.expect("connects");
        let (mut stream, _) = axum::serve::Listener::accept(&mut guarded).await;
        let mut buf = [0u8; 64];
        let read = tokio::io::AsyncReadExt::read(&mut stream, &mut buf).await;
        let error = read.expect_err("cut off at the deadline");
        assert_eq!(error.kind(), io::ErrorKind::TimedOut);

        let mut talker = TcpStream::connect(addr).await.expect("connects");
        let (mut stream, _) = axum::serve::Listener::accept(&mut guarded).await;
        tokio::io::AsyncWriteExt::write_all(&mut talker, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .expect("writes");
        let n = tokio::io::AsyncReadExt::read(&mut stream, &mut buf)
            .await
            .expect("headers in time");
        assert!(n > 0);
        assert_eq!(stream.phase, Phase::Idle);
        // Then idle: cut off too.
        let idle = tokio::io::AsyncReadExt::read(&mut stream, &mut buf).await;
        assert_eq!(
            idle.expect_err("idle too long").kind(),
            io::ErrorKind::TimedOut
        );
    }
}
