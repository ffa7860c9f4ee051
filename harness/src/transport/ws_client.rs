//! The client side of a WebSocket link, on tokio-tungstenite.
//!
//! [`connect`] dials a `ws://` or `wss://` URL and returns the same [`Connection`] the server side
//! produces; the frame pump is shared with [`super::ws_server`].

use std::sync::Once;
use std::time::Duration;

use http::header::{AUTHORIZATION, HeaderName, HeaderValue};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::{self, client::IntoClientRequest, protocol::WebSocketConfig};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream, client_async_tls_with_config};

use super::half_close::{HalfClosable, HalfCloseSwitch};
use super::ws_server::{WsEvent, WsMessage, spawn_pumps};
use super::{CloseInfo, Connection, FrameLimits};

/// How to reach a WebSocket server.
#[derive(Debug, Clone)]
pub struct ClientRequest {
    /// `ws://host:port/path` or `wss://host:port/path`.
    pub url: String,
    /// Sent as `Authorization: Bearer <token>`; replaces any `Authorization` in `headers`.
    pub bearer_token: Option<String>,
    /// Extra request headers, sent in this order (a name may repeat).
    pub headers: Vec<(String, String)>,
    /// The whole connect (DNS, TCP, TLS, HTTP upgrade) must finish within this.
    pub timeout: Duration,
}

/// Why [`connect`] produced no connection.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConnectError {
    /// The server answered the HTTP upgrade with something other than 101 (401, 404, ...).
    #[error("the server refused the WebSocket upgrade with HTTP {status}{}", body_suffix(.body))]
    Refused {
        /// The HTTP status the server answered with.
        status: u16,
        /// The response body, as text (lossy), possibly empty.
        body: String,
    },
    /// The connect did not finish within [`ClientRequest::timeout`].
    #[error("timed out connecting: no WebSocket session within the configured timeout")]
    Timeout,
    /// The server could not be reached (refused, reset, unknown host, ...).
    #[error("could not reach the server: {0}")]
    Io(String),
    /// The URL or a header could not be turned into a WebSocket request.
    #[error("invalid WebSocket request: {0}")]
    Url(String),
    /// The TLS handshake of a `wss://` connect failed (certificate, protocol, ...).
    #[error("TLS handshake failed: {0}")]
    Tls(String),
    /// Anything else, e.g. a server that answered 101 but broke the handshake.
    #[error("WebSocket handshake failed: {0}")]
    Other(String),
}

/// Formats a refusal body for [`ConnectError`]'s message: short, and only when there is one.
fn body_suffix(body: &str) -> String {
    const SHOWN_CHARS: usize = 200;
    let body = body.trim();
    if body.is_empty() {
        return String::new();
    }
    let mut shown: String = body.chars().take(SHOWN_CHARS).collect();
    if shown.len() < body.len() {
        shown.push('…');
    }
    format!(": {shown}")
}

/// Connects to a WebSocket server and returns the live [`Connection`].
///
/// Nagle's algorithm is off (request/response traffic of small messages). Incoming messages
/// and frames larger than `limits.max_message_bytes` end the connection. The whole attempt is
/// bounded by `request.timeout`.
///
/// # Errors
///
/// [`ConnectError::Refused`] when the server answers the upgrade with a non-101 status (a wrong
/// token gets 401), [`ConnectError::Timeout`] when `request.timeout` passes first, and the other
/// variants for an unreachable server, a bad URL or header, or a failed TLS handshake.
pub async fn connect(
    request: ClientRequest,
    limits: FrameLimits,
) -> Result<Connection, ConnectError> {
    install_crypto_provider();

    let mut http_request = request
        .url
        .as_str()
        .into_client_request()
        .map_err(|error| ConnectError::Url(format!("{}: {error}", request.url)))?;
    // Checked here, before any dialling: tokio-tungstenite would only notice after TCP connects,
    // so a wrong scheme would surface as whatever the network said instead.
    if !matches!(http_request.uri().scheme_str(), Some("ws" | "wss")) {
        return Err(ConnectError::Url(format!(
            "{}: the URL must start with ws:// or wss://",
            request.url
        )));
    }
    let headers = http_request.headers_mut();
    for (name, value) in &request.headers {
        let name = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| ConnectError::Url(format!("{name:?} is not a valid header name")))?;
        let value = HeaderValue::from_str(value)
            .map_err(|_| ConnectError::Url(format!("the value of header {name} is not valid")))?;
        headers.append(name, value);
    }
    if let Some(token) = &request.bearer_token {
        let value = HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
            ConnectError::Url("the bearer token cannot be sent in a header".to_owned())
        })?;
        headers.insert(AUTHORIZATION, value);
    }

    let config = WebSocketConfig::default()
        .max_message_size(Some(limits.max_message_bytes))
        .max_frame_size(Some(limits.max_message_bytes))
        .read_buffer_size(super::LINK_READ_BUFFER);
    let attempt = dial(http_request, config, &request.url);
    let (socket, half_close) = tokio::time::timeout(request.timeout, attempt)
        .await
        .map_err(|_| ConnectError::Timeout)??;

    let peer = match socket.get_ref() {
        MaybeTlsStream::Plain(tcp) => tcp.get_ref().peer_addr().ok(),
        MaybeTlsStream::Rustls(tls) => tls.get_ref().0.get_ref().peer_addr().ok(),
        _ => None,
    }
    .map_or_else(|| request.url.clone(), |addr| addr.to_string());
    tracing::debug!(peer = %peer, url = %request.url, "WebSocket connected");
    Ok(spawn_pumps(socket, peer, limits.silence, half_close))
}

/// The TCP connect (Nagle off: small request/response messages) and the WebSocket handshake
/// over it, TLS in between for `wss://`. The socket is dialled here, not by tokio-tungstenite, so
/// it can be wrapped for the half-close fault (see [`super::half_close`]).
async fn dial(
    request: tungstenite::handshake::client::Request,
    config: WebSocketConfig,
    url: &str,
) -> Result<(Socket, HalfCloseSwitch), ConnectError> {
    let uri = request.uri();
    let secure = uri.scheme_str() == Some("wss");
    let host = uri
        .host()
        .ok_or_else(|| ConnectError::Url(format!("{url}: the URL names no host")))?
        // An IPv6 literal comes in brackets, which a socket address does not take.
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned();
    let port = uri.port_u16().unwrap_or(if secure { 443 } else { 80 });
    let tcp = TcpStream::connect((host.as_str(), port))
        .await
        .map_err(|io| ConnectError::Io(format!("{url}: {io}")))?;
    // Only a latency hint: a socket that refuses it still works.
    let _ = tcp.set_nodelay(true);
    let (stream, half_close) = HalfClosable::new(tcp);
    let (socket, _response) = client_async_tls_with_config(request, stream, Some(config), None)
        .await
        .map_err(|error| classify(error, url))?;
    Ok((socket, half_close))
}

/// A dialled link's socket, as tokio-tungstenite wraps it.
type Socket = WebSocketStream<MaybeTlsStream<HalfClosable<TcpStream>>>;

/// Makes sure rustls has a crypto provider before any `wss://` connect.
///
/// rustls panics when it has none, or when several are compiled in and none was chosen; ring is
/// installed here once. If someone else installed a provider first, theirs stays.
fn install_crypto_provider() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// Turns a failed connect into the [`ConnectError`] a person can act on.
fn classify(error: tungstenite::Error, url: &str) -> ConnectError {
    use tungstenite::Error;
    match error {
        Error::Http(response) => ConnectError::Refused {
            status: response.status().as_u16(),
            body: response
                .body()
                .as_deref()
                .map(|body| String::from_utf8_lossy(body).into_owned())
                .unwrap_or_default(),
        },
        // tokio-tungstenite reports a failed TLS handshake as an I/O error wrapping rustls's.
        Error::Io(io) if is_tls_failure(&io) => ConnectError::Tls(format!("{url}: {io}")),
        Error::Io(io) => ConnectError::Io(format!("{url}: {io}")),
        Error::Tls(tls) => ConnectError::Tls(format!("{url}: {tls}")),
        Error::Url(bad) => ConnectError::Url(format!("{url}: {bad}")),
        Error::HttpFormat(bad) => ConnectError::Url(format!("{url}: {bad}")),
        other => ConnectError::Other(format!("{url}: {other}")),
    }
}

/// Whether an I/O error is really a TLS failure (rustls errors travel inside `io::Error`).
fn is_tls_failure(error: &std::io::Error) -> bool {
    error
        .get_ref()
        .is_some_and(|inner| inner.downcast_ref::<rustls::Error>().is_some())
}

impl WsMessage for tungstenite::Message {
    fn text(text: String) -> Self {
        tungstenite::Message::Text(text.into())
    }

    fn close(code: u16, reason: String) -> Self {
        tungstenite::Message::Close(Some(tungstenite::protocol::CloseFrame {
            code: code.into(),
            reason: reason.into(),
        }))
    }

    fn ping() -> Self {
        tungstenite::Message::Ping(Vec::new().into())
    }

    fn into_event(self) -> WsEvent {
        match self {
            tungstenite::Message::Text(text) => WsEvent::Text(text.as_str().to_owned()),
            tungstenite::Message::Binary(bytes) => WsEvent::Binary(bytes.to_vec()),
            tungstenite::Message::Close(frame) => WsEvent::Close(frame.map(|frame| CloseInfo {
                code: frame.code.into(),
                reason: frame.reason.as_str().to_owned(),
            })),
            tungstenite::Message::Ping(_)
            | tungstenite::Message::Pong(_)
            | tungstenite::Message::Frame(_) => WsEvent::Control,
        }
    }
}

#[cfg(test)]
mod tests;
