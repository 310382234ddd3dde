//! The metrics endpoint's write timeout (`metrics.write_timeout`): a connection's IO that
//! fails a write with [`io::ErrorKind::TimedOut`] once writing has waited for the client that
//! long without the socket taking a byte, so a client that stops reading a response cannot
//! hold its connection (and its slots under the caps) until the connection's lifetime ends.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

/// `inner` with a deadline on its writes: from the moment a write, flush or shutdown finds
/// `inner` full (`Pending`), the next bytes must be taken within `timeout`, or that call and
/// every later write-side call fails with [`io::ErrorKind::TimedOut`]. Only a write that
/// takes bytes stops the count (the next stall starts a new one); reads are passed through
/// untouched.
pub(super) struct WriteDeadline<S> {
    inner: S,
    timeout: Duration,
    /// Running since writing first found `inner` full, until it takes bytes again.
    stalled: Option<Pin<Box<Sleep>>>,
}

impl<S> WriteDeadline<S> {
    /// `inner` whose writes may wait at most `timeout` for the peer.
    pub(super) fn new(inner: S, timeout: Duration) -> WriteDeadline<S> {
        WriteDeadline { inner, timeout, stalled: None }
    }

    /// `poll`, a write-side poll of `inner`, under the deadline: bytes taken stop the count;
    /// `Pending` starts it (if it does not run yet) and fails once it has run out.
    fn deadline<T>(
        &mut self,
        cx: &mut Context<'_>,
        poll: Poll<io::Result<T>>,
        took: impl Fn(&T) -> bool,
    ) -> Poll<io::Result<T>> {
        match poll {
            Poll::Ready(Ok(value)) => {
                if took(&value) {
                    self.stalled = None;
                }
                Poll::Ready(Ok(value))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => {
                let timeout = self.timeout;
                let stalled = self.stalled.get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
                match stalled.as_mut().poll(cx) {
                    Poll::Pending => Poll::Pending,
                    Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!("the client took no byte of a response for {}", humantime::format_duration(timeout)),
                    ))),
                }
            }
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for WriteDeadline<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for WriteDeadline<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let poll = Pin::new(&mut this.inner).poll_write(cx, buf);
        this.deadline(cx, poll, |&n| n > 0)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let poll = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        this.deadline(cx, poll, |&n| n > 0)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let poll = Pin::new(&mut this.inner).poll_flush(cx);
        // Only a write that takes bytes is progress (a socket's flush is always done).
        this.deadline(cx, poll, |_| false)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let poll = Pin::new(&mut this.inner).poll_shutdown(cx);
        this.deadline(cx, poll, |_| false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A peer that reads, even slowly, keeps the writer going; one that stops reading fails
    /// it once the timeout has passed, and every write after that at once.
    #[tokio::test]
    async fn a_write_the_peer_does_not_take_times_out() {
        let timeout = Duration::from_secs(1);
        let (near, mut far) = tokio::io::duplex(64);
        let mut w = WriteDeadline::new(near, timeout);
        let reader = tokio::spawn(async move {
            let mut got = vec![0u8; 1024];
            for chunk in got.chunks_mut(64) {
                tokio::time::sleep(Duration::from_millis(100)).await;
                far.read_exact(chunk).await.expect("read a chunk");
            }
            far
        });
        let t0 = tokio::time::Instant::now();
        w.write_all(&[7u8; 1024]).await.expect("a slow reader is not cut off");
        assert!(t0.elapsed() > timeout, "longer in all than the timeout: {:?}", t0.elapsed());
        let _far = reader.await.expect("the reader");

        // Nobody reads now: the buffer fills, and the write fails once the timeout has passed.
        let t0 = tokio::time::Instant::now();
        let e = w.write_all(&[7u8; 1024]).await.expect_err("a stalled write times out");
        assert_eq!(e.kind(), io::ErrorKind::TimedOut, "{e}");
        assert!(t0.elapsed() >= timeout, "{:?}", t0.elapsed());
        // A flush is no progress: the next write fails as well, without a new wait.
        w.flush().await.expect("nothing buffered in a duplex");
        let t0 = tokio::time::Instant::now();
        let e = w.write_all(&[7u8; 1]).await.expect_err("still stalled");
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        assert!(t0.elapsed() < timeout, "{:?}", t0.elapsed());
    }
}
