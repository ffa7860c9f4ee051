//! Newline-delimited messages over a byte stream pair (stdin/stdout, pipes, test duplexes).
//!
//! One message per line. Reading strips the `\n` and an optional `\r` before it, skips empty
//! lines, and never buffers more than one line of at most `max_message_bytes`. Writing sends
//! each message followed by `\n`, so a message must not itself contain a newline: callers pass
//! compact JSON, which never does, and a text with a raw `\n` is refused (logged, not sent)
//! rather than split into two broken messages.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{
    AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader, ReadBuf,
};
use tokio::sync::mpsc;

use super::{Connection, FrameLimits, Incoming, Outgoing};

/// Incoming messages buffered before the reader stops reading (backpressure).
const INCOMING_CAPACITY: usize = 64;

/// Size of one read from the process's stdin.
const STDIN_CHUNK_BYTES: usize = 8 * 1024;

/// A [`Connection`] over this process's stdin and stdout, named `stdio`.
///
/// Stdin is read on a dedicated OS thread rather than tokio's blocking pool: a blocking read of
/// stdin cannot be cancelled, and a runtime waits for its blocking pool on shutdown, so a peer
/// that keeps stdin open without writing would hang the runtime's exit. The thread only
/// blocks itself, and ends at the next line or EOF after the connection is gone.
#[must_use = "dropping the Connection closes it"]
pub fn stdio(limits: FrameLimits) -> Connection {
    from_streams(
        spawn_stdin_reader(),
        tokio::io::stdout(),
        limits,
        "stdio".to_owned(),
    )
}

/// A [`Connection`] that reads lines from `reader` and writes lines to `writer`.
///
/// The reader task ends with exactly one `Incoming::Closed(None)`: at EOF, on a read error, or
/// on a line longer than `limits.max_message_bytes` (logged). A final line without a newline
/// before EOF is still delivered. A line that is not UTF-8 arrives as `Incoming::Binary`.
///
/// The writer task writes and flushes each `Outgoing::Text` as one line; `Outgoing::Close`, or
/// dropping `outgoing`, flushes and shuts the writer down. Reaching EOF on `reader` does not stop
/// the writer: with pipes the peer may close its end and still wait for the replies
/// (`printf '...\n' | harness`); drop `outgoing` once you have seen `Closed` to finish.
#[must_use = "dropping the Connection closes it"]
pub fn from_streams<R, W>(reader: R, writer: W, limits: FrameLimits, peer: String) -> Connection
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (outgoing_tx, outgoing_rx) = super::outbox();
    let (incoming_tx, incoming_rx) = mpsc::channel(INCOMING_CAPACITY);
    tokio::spawn(read_lines(reader, incoming_tx, limits, peer.clone()));
    tokio::spawn(write_lines(writer, outgoing_rx, peer.clone()));
    Connection {
        outgoing: outgoing_tx,
        incoming: incoming_rx,
        peer,
    }
}

/// Reads lines into `incoming` until EOF, an error, an over-long line, or the receiver is gone.
async fn read_lines<R>(
    reader: R,
    incoming: mpsc::Sender<Incoming>,
    limits: FrameLimits,
    peer: String,
) where
    R: AsyncRead + Unpin,
{
    let mut reader = BufReader::new(reader);
    // Room for the longest allowed message plus its "\r\n": one byte more means "too long",
    // and the bounded read never takes more than that into memory.
    let cap = limits.max_message_bytes.saturating_add(2);
    loop {
        let mut line = Vec::new();
        let read = (&mut reader)
            .take(u64::try_from(cap).unwrap_or(u64::MAX))
            .read_until(b'\n', &mut line)
            .await;
        match read {
            Ok(0) => break,
            Ok(_) => {}
            Err(error) => {
                tracing::warn!(peer = %peer, %error, "reading a line failed");
                break;
            }
        }
        let complete = line.last() == Some(&b'\n');
        if complete {
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
        } else if line.len() >= cap {
            // No newline within the cap: the line is too long whatever follows.
            tracing::warn!(peer = %peer, limit = limits.max_message_bytes,
                "line over the message limit; closing");
            break;
        }
        // (Not complete and under the cap: the last line before EOF, delivered as is.)
        if line.len() > limits.max_message_bytes {
            tracing::warn!(peer = %peer, limit = limits.max_message_bytes,
                "line over the message limit; closing");
            break;
        }
        if line.is_empty() {
            continue;
        }
        let event = match String::from_utf8(line) {
            Ok(text) => Incoming::Text(text),
            Err(not_utf8) => Incoming::Binary(not_utf8.into_bytes()),
        };
        if incoming.send(event).await.is_err() {
            // Nobody reads any more; unlike a WebSocket there is no handshake to keep up.
            return;
        }
    }
    let _ = incoming.send(Incoming::Closed(None)).await;
}

/// Writes each outgoing text as one line until a close request or the sender is dropped.
async fn write_lines<W>(mut writer: W, mut outgoing: super::OutboxReceiver, peer: String)
where
    W: AsyncWrite + Unpin,
{
    loop {
        let text = match outgoing.recv().await {
            Some(Outgoing::Text(text)) => text,
            Some(Outgoing::Stall(pause)) => {
                tokio::time::sleep(pause).await;
                continue;
            }
            // Close, drop, half-close, or the local side let go: on a byte stream all end the
            // writing (the peer's input closes; its output is still read).
            Some(Outgoing::Close(_) | Outgoing::Drop | Outgoing::HalfClose) | None => break,
        };
        let bytes = text.len();
        if text.contains('\n') {
            tracing::error!(peer = %peer, "refusing to send a message containing a newline: it would break line framing");
            outgoing.written(bytes);
            continue;
        }
        if text.is_empty() {
            tracing::warn!(peer = %peer, "not sending an empty message: the peer skips empty lines");
            continue;
        }
        // One buffer, one write: the line cannot interleave with other writers of the stream.
        let mut line = text.into_bytes();
        line.push(b'\n');
        let written = async {
            writer.write_all(&line).await?;
            writer.flush().await
        };
        let done = tokio::time::timeout(super::outbox::WRITE_STALL, written).await;
        outgoing.written(bytes);
        match done {
            Ok(Ok(())) => {}
            Ok(Err(error)) => {
                tracing::debug!(peer = %peer, %error, "writing a line failed; writer stops");
                return;
            }
            Err(_) => {
                tracing::warn!(peer = %peer, "the peer read none of a line in {:?}: it is not reading; the writer stops", super::outbox::WRITE_STALL);
                return;
            }
        }
    }
    // Close requested or the local side let go: a close code means nothing on a byte stream.
    if let Err(error) = writer.shutdown().await {
        tracing::debug!(peer = %peer, %error, "shutting the writer down failed");
    }
}

/// Starts the thread that reads stdin and returns the async end of it.
fn spawn_stdin_reader() -> ChannelReader {
    // Two chunks in flight: enough to keep the reader busy, bounded whatever the peer sends.
    let (tx, rx) = mpsc::channel::<io::Result<Vec<u8>>>(2);
    let spawned = std::thread::Builder::new()
        .name("stdin-reader".to_owned())
        .spawn(move || {
            use std::io::Read;
            let mut stdin = io::stdin().lock();
            loop {
                let mut chunk = vec![0; STDIN_CHUNK_BYTES];
                match stdin.read(&mut chunk) {
                    Ok(0) => return,
                    Ok(n) => {
                        chunk.truncate(n);
                        if tx.blocking_send(Ok(chunk)).is_err() {
                            return;
                        }
                    }
                    Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                    Err(error) => {
                        let _ = tx.blocking_send(Err(error));
                        return;
                    }
                }
            }
        });
    if let Err(error) = spawned {
        // The receiver then sees the sender gone, which reads as EOF: logged so it is not mistaken
        // for a peer that closed stdin.
        tracing::error!(%error, "could not start the stdin reader thread");
    }
    ChannelReader {
        chunks: rx,
        current: Vec::new(),
        position: 0,
    }
}

/// An [`AsyncRead`] over chunks that another thread reads; the sender going away is EOF.
struct ChannelReader {
    chunks: mpsc::Receiver<io::Result<Vec<u8>>>,
    current: Vec<u8>,
    position: usize,
}

impl AsyncRead for ChannelReader {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        while this.position >= this.current.len() {
            match this.chunks.poll_recv(cx) {
                Poll::Ready(Some(Ok(chunk))) => {
                    this.current = chunk;
                    this.position = 0;
                }
                Poll::Ready(Some(Err(error))) => return Poll::Ready(Err(error)),
                Poll::Ready(None) => return Poll::Ready(Ok(())),
                Poll::Pending => return Poll::Pending,
            }
        }
        let available = &this.current[this.position..];
        let n = available.len().min(buf.remaining());
        buf.put_slice(&available[..n]);
        this.position += n;
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, duplex};
    use tokio::time::timeout;

    use super::*;

    const STEP: Duration = Duration::from_secs(3);

    /// A connection plus the far ends of its two streams: write to `peer_in` to feed the
    /// connection, read `peer_out` to see what it wrote.
    fn connection(max_message_bytes: usize) -> (Connection, DuplexStream, BufReader<DuplexStream>) {
        let (conn_reader, peer_in) = duplex(64 * 1024);
        let (conn_writer, peer_out) = duplex(64 * 1024);
        let conn = from_streams(
            conn_reader,
            conn_writer,
            FrameLimits {
                max_message_bytes,
                ..FrameLimits::default()
            },
            "duplex".to_owned(),
        );
        (conn, peer_in, BufReader::new(peer_out))
    }

    async fn next(conn: &mut Connection) -> Option<Incoming> {
        timeout(STEP, conn.incoming.recv())
            .await
            .expect("event in time")
    }

    async fn read_line(out: &mut BufReader<DuplexStream>) -> String {
        let mut line = String::new();
        timeout(STEP, out.read_line(&mut line))
            .await
            .expect("line in time")
            .expect("read");
        line
    }

    #[tokio::test]
    async fn lines_in_become_text_messages() {
        let (mut conn, mut peer_in, _out) = connection(1024);
        peer_in
            .write_all(b"{\"id\":1}\r\n\n\r\n{\"id\":2}\nlast")
            .await
            .unwrap();
        drop(peer_in);
        assert_eq!(conn.peer, "duplex");
        assert_eq!(
            next(&mut conn).await,
            Some(Incoming::Text("{\"id\":1}".into()))
        );
        assert_eq!(
            next(&mut conn).await,
            Some(Incoming::Text("{\"id\":2}".into()))
        );
        // A final line without its newline still counts.
        assert_eq!(next(&mut conn).await, Some(Incoming::Text("last".into())));
        assert_eq!(next(&mut conn).await, Some(Incoming::Closed(None)));
        assert_eq!(next(&mut conn).await, None);
    }

    #[tokio::test]
    async fn eof_is_closed_none() {
        let (mut conn, peer_in, _out) = connection(1024);
        drop(peer_in);
        assert_eq!(next(&mut conn).await, Some(Incoming::Closed(None)));
        assert_eq!(next(&mut conn).await, None);
    }

    #[tokio::test]
    async fn invalid_utf8_is_binary() {
        let (mut conn, mut peer_in, _out) = connection(1024);
        peer_in.write_all(b"\xff\xfe\n").await.unwrap();
        assert_eq!(
            next(&mut conn).await,
            Some(Incoming::Binary(vec![0xff, 0xfe]))
        );
    }

    #[tokio::test]
    async fn over_long_line_closes_without_buffering_it_all() {
        let (mut conn, mut peer_in, _out) = connection(8);
        // Exactly at the limit (with \r\n) passes; one byte more ends the connection.
        peer_in.write_all(b"12345678\r\n123456789\n").await.unwrap();
        assert_eq!(
            next(&mut conn).await,
            Some(Incoming::Text("12345678".into()))
        );
        assert_eq!(next(&mut conn).await, Some(Incoming::Closed(None)));
        assert_eq!(next(&mut conn).await, None);

        // A line that never ends is cut off at the limit too, not read forever.
        let (mut conn, mut peer_in, _out) = connection(8);
        let writer = tokio::spawn(async move {
            let _ = peer_in.write_all(&vec![b'a'; 100_000]).await;
            peer_in
        });
        assert_eq!(next(&mut conn).await, Some(Incoming::Closed(None)));
        writer.abort();
    }

    #[tokio::test]
    async fn writes_are_one_line_each() {
        let (conn, _peer_in, mut out) = connection(1024);
        conn.outgoing
            .send(Outgoing::Text("{\"a\":1}".into()))
            .unwrap();
        conn.outgoing
            .send(Outgoing::Text("broken\nmessage".into()))
            .unwrap();
        conn.outgoing.send(Outgoing::Text(String::new())).unwrap();
        conn.outgoing
            .send(Outgoing::Text("{\"b\":2}".into()))
            .unwrap();
        assert_eq!(read_line(&mut out).await, "{\"a\":1}\n");
        // The message with a raw newline and the empty one were refused, not split or blanked.
        assert_eq!(read_line(&mut out).await, "{\"b\":2}\n");

        conn.outgoing
            .send(Outgoing::Close(crate::transport::CloseInfo {
                code: 1000,
                reason: String::new(),
            }))
            .unwrap();
        // Close shuts the writer down: the reading end sees EOF.
        assert_eq!(read_line(&mut out).await, "");
    }

    #[tokio::test]
    async fn dropping_outgoing_ends_the_writer() {
        let (conn, _peer_in, mut out) = connection(1024);
        conn.outgoing.send(Outgoing::Text("bye".into())).unwrap();
        drop(conn);
        assert_eq!(read_line(&mut out).await, "bye\n");
        assert_eq!(read_line(&mut out).await, "");
    }

    #[tokio::test]
    async fn tasks_end_after_eof_and_dropping_outgoing() {
        let metrics = tokio::runtime::Handle::current().metrics();
        let baseline = metrics.num_alive_tasks();
        let (mut conn, peer_in, _out) = connection(1024);
        drop(peer_in);
        assert_eq!(next(&mut conn).await, Some(Incoming::Closed(None)));
        drop(conn.outgoing);
        let started = tokio::time::Instant::now();
        while metrics.num_alive_tasks() > baseline {
            assert!(started.elapsed() < STEP, "stdio tasks still alive");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    #[tokio::test]
    async fn channel_reader_reads_chunks_then_eof() {
        let (tx, rx) = mpsc::channel(2);
        let mut reader = ChannelReader {
            chunks: rx,
            current: Vec::new(),
            position: 0,
        };
        tx.send(Ok(b"ab".to_vec())).await.unwrap();
        tx.send(Ok(b"cd".to_vec())).await.unwrap();
        drop(tx);
        let mut all = Vec::new();
        timeout(STEP, reader.read_to_end(&mut all))
            .await
            .expect("in time")
            .unwrap();
        assert_eq!(all, b"abcd");
    }
}
