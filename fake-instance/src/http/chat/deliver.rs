//! How an answer goes out: whole, or as server-sent events ending with `data: [DONE]`, paced,
//! and possibly cut part-way (cleanly, or by dropping the connection).

use std::io;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::header;
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

/// Where an answer stops early.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Cut {
    /// Stream events sent before it.
    pub after_chunks: usize,
    /// Drop the connection there, rather than end the body cleanly.
    pub reset: bool,
}

/// The error that makes the server drop the connection mid-body: hyper aborts a body whose
/// stream fails, so the client sees the response end without its terminating chunk.
fn dropped() -> io::Error {
    io::Error::other("fake-instance cut the answer on purpose")
}

/// The whole answer as one JSON body; cut, it is half of it.
pub(super) fn whole(body: &Value, cut: Option<Cut>) -> Response {
    let Some(cut) = cut else {
        return axum::Json(body).into_response();
    };
    let mut text = body.to_string().into_bytes();
    text.truncate(text.len() / 2);
    let mut parts: Vec<Result<Bytes, io::Error>> = vec![Ok(Bytes::from(text))];
    if cut.reset {
        parts.push(Err(dropped()));
    }
    let mut response = Body::from_stream(paced(parts, Duration::ZERO)).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    response
}

/// The answer as a stream of `data:` events, `delay` apart, then `data: [DONE]`; cut, it stops
/// after `after_chunks` events without `[DONE]`.
pub(super) fn streamed(chunks: Vec<Value>, delay: Duration, cut: Option<Cut>) -> Response {
    let mut events: Vec<Result<Event, io::Error>> = chunks
        .iter()
        .map(|c| Ok(Event::default().data(c.to_string())))
        .chain([Ok(Event::default().data("[DONE]"))])
        .collect();
    if let Some(cut) = cut {
        events.truncate(cut.after_chunks.min(chunks.len()));
        if cut.reset {
            events.push(Err(dropped()));
        }
    }
    Sse::new(paced(events, delay)).into_response()
}

/// The items as a stream, `delay` apart. Before an error it yields once: hyper writes what it
/// has buffered while the body is pending, so what came before the cut reaches the client
/// before the connection drops, rather than being thrown away with it.
fn paced<T: Send + 'static>(
    items: Vec<Result<T, io::Error>>,
    delay: Duration,
) -> impl futures_util::Stream<Item = Result<T, io::Error>> + Send + 'static {
    futures_util::stream::unfold(
        (items.into_iter(), true),
        move |(mut rest, first)| async move {
            let next = rest.next()?;
            if !first && !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            if next.is_err() {
                tokio::task::yield_now().await;
            }
            Some((next, (rest, false)))
        },
    )
}
