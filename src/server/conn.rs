//! Connections: at most N open per listener (the rest are closed at once and counted), and each
//! closed once it has been silent, reading and writing nothing, for the idle timeout. Applied
//! below TLS, so a client stalled before, during or after the handshake is covered alike.

use std::{
    io,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
    time::Duration,
};

use axum_server::accept::Accept;
use futures::future::BoxFuture;
use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    sync::{OwnedSemaphorePermit, Semaphore},
    time::{Instant, Sleep},
};

use crate::metrics::Metrics;

/// An acceptor that caps open connections and wraps each in an [`Idle`] timeout.
#[derive(Clone)]
pub(crate) struct Guard<A> {
    inner: A,
    open: Arc<Semaphore>,
    idle: Duration,
    listener: &'static str,
    metrics: Arc<Metrics>,
}

impl<A> Guard<A> {
    pub(crate) fn new(
        inner: A,
        max_connections: usize,
        idle: Duration,
        listener: &'static str,
        metrics: Arc<Metrics>,
    ) -> Self {
        Guard { inner, open: Arc::new(Semaphore::new(max_connections)), idle, listener, metrics }
    }
}

impl<A, I, S> Accept<I, S> for Guard<A>
where
    A: Accept<I, S>,
    A::Future: Send + 'static,
    A::Stream: Send + 'static,
    A::Service: Send + 'static,
{
    type Stream = Idle<A::Stream>;
    type Service = A::Service;
    type Future = BoxFuture<'static, io::Result<(Self::Stream, Self::Service)>>;

    fn accept(&self, stream: I, service: S) -> Self::Future {
        // Refuse rather than queue: a queued socket still holds a file descriptor, which is
        // what ran out when idle connections piled up.
        let Ok(permit) = self.open.clone().try_acquire_owned() else {
            self.metrics.connection_refused(self.listener);
            drop(stream);
            return Box::pin(std::future::ready(Err(io::Error::other("connection limit reached"))));
        };
        let accepted = self.inner.accept(stream, service);
        let idle = self.idle;
        Box::pin(async move {
            let (stream, service) = accepted.await?;
            Ok((Idle::new(stream, permit, idle), service))
        })
    }
}

/// A stream that fails its reads with `TimedOut` once nothing was read or written for `idle`,
/// and gives its connection slot back when dropped.
pub(crate) struct Idle<S> {
    inner: S,
    _permit: OwnedSemaphorePermit,
    idle: Duration,
    last: Instant,
    timer: Pin<Box<Sleep>>,
}

impl<S> Idle<S> {
    fn new(inner: S, permit: OwnedSemaphorePermit, idle: Duration) -> Self {
        let last = Instant::now();
        Idle { inner, _permit: permit, idle, last, timer: Box::pin(tokio::time::sleep_until(last + idle)) }
    }

    /// Pending while the connection has been active within `idle`; the timer is re-armed
    /// lazily from the last activity, not on every read.
    fn poll_idle(&mut self, cx: &mut Context<'_>) -> Poll<io::Error> {
        loop {
            if self.timer.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            let due = self.last + self.idle;
            if Instant::now() >= due {
                return Poll::Ready(io::Error::new(io::ErrorKind::TimedOut, "connection idle"));
            }
            self.timer.as_mut().reset(due);
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Idle<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(result) => {
                this.last = Instant::now();
                Poll::Ready(result)
            }
            Poll::Pending => this.poll_idle(cx).map(Err),
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Idle<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let result = Pin::new(&mut this.inner).poll_write(cx, buf);
        if result.is_ready() {
            this.last = Instant::now();
        }
        result
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let result = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        if result.is_ready() {
            this.last = Instant::now();
        }
        result
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}
