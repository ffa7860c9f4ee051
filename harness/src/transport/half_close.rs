//! A byte stream whose sending direction can be ended on its own: the half-close link fault.
//!
//! A WebSocket library owns its socket, so the writer cannot reach the TCP stream to shut it
//! down. [`HalfClosable`] sits between the two: once its [`HalfCloseSwitch`] is thrown, the next
//! write or flush shuts the stream's sending side (the peer reads the end of the stream, with no
//! close frame), and everything written after that is taken and thrown away, as bytes sent into
//! a dead direction are. Reading goes on untouched, so what the peer still sends is heard.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Ends a [`HalfClosable`]'s sending direction (cloned into the writer that decides when).
#[derive(Debug, Clone, Default)]
pub struct HalfCloseSwitch(Arc<AtomicBool>);

impl HalfCloseSwitch {
    /// From now on the stream sends nothing: its next write or flush shuts its sending side.
    pub fn throw(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    fn thrown(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// A stream that sends until its switch is thrown, then shuts its sending side and goes on
/// reading.
#[derive(Debug)]
pub struct HalfClosable<S> {
    inner: S,
    switch: HalfCloseSwitch,
    shut: bool,
}

impl<S> HalfClosable<S> {
    /// Wraps `inner`; the switch returned is the only way to half-close it.
    pub fn new(inner: S) -> (HalfClosable<S>, HalfCloseSwitch) {
        let switch = HalfCloseSwitch::default();
        let stream = HalfClosable {
            inner,
            switch: switch.clone(),
            shut: false,
        };
        (stream, switch)
    }

    /// The wrapped stream (for its peer address).
    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

impl<S: AsyncWrite + Unpin> HalfClosable<S> {
    /// Once the switch is thrown, shuts the sending side (once) and says so.
    fn poll_half_closed(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<bool>> {
        if !self.switch.thrown() {
            return Poll::Ready(Ok(false));
        }
        if !self.shut {
            // A peer already gone makes the shutdown fail; the direction is ended either way.
            let _ = ready!(Pin::new(&mut self.inner).poll_shutdown(cx));
            self.shut = true;
        }
        Poll::Ready(Ok(true))
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for HalfClosable<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for HalfClosable<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if ready!(self.poll_half_closed(cx))? {
            // Taken and lost: the library above must not see an error and end the reading too.
            return Poll::Ready(Ok(buf.len()));
        }
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if ready!(self.poll_half_closed(cx))? {
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.shut {
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn a_thrown_switch_ends_the_sending_side_and_reading_goes_on() {
        let (ours, mut theirs) = tokio::io::duplex(64);
        let (mut ours, switch) = HalfClosable::new(ours);
        ours.write_all(b"before").await.unwrap();
        switch.throw();
        ours.write_all(b"after").await.unwrap();
        ours.flush().await.unwrap();

        let mut heard = Vec::new();
        theirs.read_to_end(&mut heard).await.unwrap();
        assert_eq!(
            heard, b"before",
            "the peer reads the end right after what came first"
        );

        theirs.write_all(b"still heard").await.unwrap();
        let mut buf = [0u8; 11];
        ours.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"still heard");
    }

    #[tokio::test]
    async fn an_unthrown_switch_changes_nothing() {
        let (ours, mut theirs) = tokio::io::duplex(64);
        let (mut ours, _switch) = HalfClosable::new(ours);
        ours.write_all(b"all of it").await.unwrap();
        ours.shutdown().await.unwrap();
        let mut heard = Vec::new();
        theirs.read_to_end(&mut heard).await.unwrap();
        assert_eq!(heard, b"all of it");
    }
}
