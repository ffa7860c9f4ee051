//! Transports: how text messages reach the peer and come back.
//!
//! Every transport (WebSocket server side, WebSocket client side, stdio) is turned into the same
//! [`Connection`]: a pair of channels carrying whole text messages plus the close handshake. The
//! layers above never see axum, tungstenite or file descriptors, and never assume JSON-RPC.

mod bearer;
pub mod guarded;
pub mod half_close;
mod http_client;
pub mod outbox;
pub mod stdio;
pub mod ws_client;
pub mod ws_server;

pub use bearer::bearer_token;
pub use http_client::http_client;
pub use outbox::outbox;

use tokio::sync::mpsc;

/// WebSocket close code 1000: a normal closure.
pub const CLOSE_NORMAL: u16 = 1000;

/// How much a WebSocket link reads from its socket at a time. tungstenite's default (128 KiB)
/// is held by every link for its whole life, which made an idle link cost ~145 kB; link
/// messages are mostly a few hundred bytes, and a larger frame still arrives whole (the
/// buffer grows for it and the frame limit bounds it), in more reads.
pub const LINK_READ_BUFFER: usize = 4 * 1024;

/// A close code and its reason, as sent or as received.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CloseInfo {
    /// The WebSocket close code (1000 normal, 4400 the LLeMbas protocol mismatch, ...).
    pub code: u16,
    /// Free text the closing side gave.
    pub reason: String,
}

/// Limits on what a transport reads, and on how long a WebSocket link may hear nothing.
#[derive(Debug, Clone, Copy)]
pub struct FrameLimits {
    /// The largest message accepted, in bytes; a larger one ends the connection.
    pub max_message_bytes: usize,
    /// A WebSocket link that hears nothing from its peer for this long pings it; hearing
    /// nothing for as long again (not even the pong every WebSocket library sends by itself),
    /// it takes the peer for gone and ends the link (1001, and `Closed(None)` on this side). A
    /// half-open TCP connection (the peer's machine or network vanished without a FIN) would
    /// otherwise hold the link for ever. What is heard is a whole frame: a peer trickling one
    /// frame slower than that is let go too. Zero: no pings, no limit. Not used on stdio, where
    /// the end of a pipe is always seen.
    pub silence: std::time::Duration,
}

/// How long a WebSocket link hears nothing before it pings its peer ([`FrameLimits::silence`]).
pub const SILENCE: std::time::Duration = std::time::Duration::from_secs(20);

impl Default for FrameLimits {
    fn default() -> Self {
        // Generous for JSON-RPC (a prompt may carry 25 MB of base64 attachments) yet bounded.
        Self {
            max_message_bytes: 64 * 1024 * 1024,
            silence: SILENCE,
        }
    }
}

/// What a transport delivers from the peer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Incoming {
    /// One whole text message (a WebSocket text frame, or one stdin line without its newline).
    Text(String),
    /// A message that was not valid text (a binary frame, invalid UTF-8): kept raw for the report.
    Binary(Vec<u8>),
    /// A WebSocket text frame that was not UTF-8, and why the library refused it. Its bytes are
    /// not kept (the library does not give them); the connection closes after it with 1007.
    NotUtf8(String),
    /// The connection ended. `Some` when the peer sent a close frame (its code and reason);
    /// `None` when it vanished without one (TCP reset, EOF on stdin, a frame over the limit, a
    /// peer silent past [`FrameLimits::silence`]).
    Closed(Option<CloseInfo>),
}

/// What the local side hands a transport to send, counted as its bytes wait (see [`outbox()`]).
pub type Outbox = outbox::Outbox<Outgoing>;
/// What a transport's writer takes messages from.
pub type OutboxReceiver = outbox::OutboxReceiver<Outgoing>;

impl outbox::Weighed for Outgoing {
    fn bytes(&self) -> usize {
        match self {
            Outgoing::Text(text) => text.len(),
            Outgoing::Close(info) => info.reason.len(),
            Outgoing::Drop | Outgoing::Stall(_) | Outgoing::HalfClose => 0,
        }
    }
}

/// What the local side asks a transport to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outgoing {
    /// Send one text message.
    Text(String),
    /// Close the connection with this code and reason (stdio just stops writing).
    Close(CloseInfo),
    /// End the connection without a close frame, as a crashed process or a lost network does:
    /// the socket is dropped at once (stdio just stops writing).
    Drop,
    /// Send nothing for this long: what comes after waits and then goes, in order (a peer
    /// that stalls; it still reads).
    Stall(std::time::Duration),
    /// End the sending direction only (TCP's end of stream, no close frame) and go on reading
    /// what the peer sends: a link that is half gone (stdio closes the peer's input).
    HalfClose,
}

/// A live connection to the peer, whatever carries it.
///
/// Dropping `outgoing` closes the connection normally; `incoming` ends with exactly one
/// [`Incoming::Closed`] and then yields `None`.
#[derive(Debug)]
pub struct Connection {
    /// Messages and the close request, to the peer (its bytes counted: see [`outbox()`]).
    pub outgoing: Outbox,
    /// Messages and the close event, from the peer.
    pub incoming: mpsc::Receiver<Incoming>,
    /// Who the peer is, for logs and reports (`127.0.0.1:53124`, `stdio`).
    pub peer: String,
}
