//! Reading a raw WebSocket link as a hostile peer does: the next JSON message, skipping frames
//! that are not one, and the close code the other end ends the link with. fake-device's hostile
//! tests and the hostile bench include this file too (by path): they read links the same way.

use std::time::Duration;

use futures_util::{Stream, StreamExt};
use serde_json::Value;
use tokio::time::{error::Elapsed, timeout};
use tokio_tungstenite::tungstenite::{Error, Message};

/// The next text frame that holds JSON, within `within`; `Ok(None)` when the link ended first.
pub async fn next_json<S>(socket: &mut S, within: Duration) -> Result<Option<Value>, Elapsed>
where
    S: Stream<Item = Result<Message, Error>> + Unpin,
{
    timeout(within, async {
        while let Some(Ok(message)) = socket.next().await {
            if let Message::Text(text) = message
                && let Ok(value) = serde_json::from_str(&text)
            {
                return Some(value);
            }
        }
        None
    })
    .await
}

/// The close code the other end ends the link with, within `within` (none: the stream just
/// ended, or broke).
pub async fn close_code<S>(socket: &mut S, within: Duration) -> Result<Option<u16>, Elapsed>
where
    S: Stream<Item = Result<Message, Error>> + Unpin,
{
    timeout(within, async {
        while let Some(message) = socket.next().await {
            match message {
                Ok(Message::Close(frame)) => return frame.map(|f| u16::from(f.code)),
                Ok(_) => continue,
                Err(_) => return None,
            }
        }
        None
    })
    .await
}
