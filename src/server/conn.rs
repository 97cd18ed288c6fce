//! Connections: at most N open per listener (a full `table` evicting an idle one), each closed
//! once silent for the idle timeout, and none kept past the maximum age. Applied below TLS, so
//! a client stalled before, during or after the handshake is covered alike.

mod table;

use std::{
    io,
    net::{IpAddr, Ipv4Addr},
    pin::Pin,
    sync::{Arc, Mutex, PoisonError},
    task::{Context, Poll},
    time::Duration,
};

use axum::{extract::Request, response::Response};
use axum_server::{ConnectionShutdown, accept::Accept};
use futures::future::BoxFuture;
use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    net::TcpStream,
    time::{Instant, Sleep},
};
use tokio_util::sync::WaitForCancellationFutureOwned;

use crate::metrics::Metrics;
use table::{Admission, Live, Slot, Table};

/// How long every connection of a listener may live.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Lifetimes {
    /// Silent this long (nothing read or written): closed.
    pub(crate) idle: Duration,
    /// Open this long: closed gracefully (GOAWAY on HTTP/2, after the response on HTTP/1.1).
    pub(crate) max_age: Duration,
    /// Past `max_age` by this much, still open (a response that never ends): closed at once.
    pub(crate) grace: Duration,
}

/// An acceptor that keeps a listener's connections within its table and lifetimes.
#[derive(Clone)]
pub(crate) struct Guard<A> {
    inner: A,
    shared: Arc<Shared>,
}

struct Shared {
    table: Mutex<Table>,
    /// Activity is kept in milliseconds since then, in one atomic per connection.
    epoch: Instant,
    lifetimes: Lifetimes,
    listener: &'static str,
    metrics: Arc<Metrics>,
}

impl Shared {
    fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn table(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<A> Guard<A> {
    pub(crate) fn new(
        inner: A,
        max_connections: usize,
        lifetimes: Lifetimes,
        listener: &'static str,
        metrics: Arc<Metrics>,
    ) -> Self {
        let shared = Shared {
            table: Mutex::new(Table::new(max_connections)),
            epoch: Instant::now(),
            lifetimes,
            listener,
            metrics,
        };
        Guard { inner, shared: Arc::new(shared) }
    }
}

impl<A, S> Accept<TcpStream, S> for Guard<A>
where
    A: Accept<TcpStream, Counted<S>>,
    A::Future: Send + 'static,
    A::Stream: Send + 'static,
    A::Service: Send + 'static,
{
    type Stream = Tracked<A::Stream>;
    type Service = A::Service;
    type Future = BoxFuture<'static, io::Result<(Self::Stream, Self::Service)>>;

    fn accept(&self, stream: TcpStream, service: S) -> Self::Future {
        let peer = stream.peer_addr().map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |a| a.ip());
        let live = Arc::new(Live::new(self.shared.now_ms()));
        let admission = self.shared.table().admit(peer, live.clone());
        // Refuse rather than queue when every connection is busy: a queued socket still holds
        // a file descriptor, which is what ran out when connections piled up.
        let Admission::Admitted { slot, evicted } = admission else {
            self.shared.metrics.connection_refused(self.shared.listener);
            drop(stream);
            return Box::pin(std::future::ready(Err(io::Error::other("connection limit reached"))));
        };
        if evicted.is_some() {
            self.shared.metrics.connection_evicted(self.shared.listener);
        }
        let counted =
            Counted { inner: service, live: live.clone(), opened: Instant::now(), shared: self.shared.clone() };
        // The slot is given back when the stream drops, or here if the handshake fails first.
        let ticket = Ticket { slot, shared: self.shared.clone() };
        let accepted = self.inner.accept(stream, counted);
        Box::pin(async move {
            let (stream, service) = accepted.await?;
            Ok((Tracked::new(stream, live, ticket), service))
        })
    }
}

/// A slot of the table, given back when dropped.
struct Ticket {
    slot: Slot,
    shared: Arc<Shared>,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.shared.table().remove(self.slot);
    }
}

/// The service of one connection: counts its requests in flight (idle ones may be evicted), and
/// closes it gracefully after the response once it is past its age.
#[derive(Clone)]
pub(crate) struct Counted<S> {
    inner: S,
    live: Arc<Live>,
    opened: Instant,
    shared: Arc<Shared>,
}

/// A request in flight, until its response is ready or it is dropped.
struct Busy(Arc<Live>);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.end_request();
    }
}

impl<S, B> tower_service::Service<Request<B>> for Counted<S>
where
    S: tower_service::Service<Request<B>, Response = Response>,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        self.live.start_request();
        let busy = Busy(self.live.clone());
        self.live.know_shutdown(|| request.extensions().get::<ConnectionShutdown>().cloned());
        if self.opened.elapsed() >= self.shared.lifetimes.max_age {
            self.live.close_gracefully();
        }
        let response = self.inner.call(request);
        Box::pin(async move {
            let response = response.await;
            drop(busy);
            response
        })
    }
}

/// A stream that fails its reads once evicted, idle, or past its age and grace (at its age it
/// asks hyper to close gracefully). Gives its slot back when dropped.
pub(crate) struct Tracked<S> {
    inner: S,
    live: Arc<Live>,
    ticket: Ticket,
    opened: Instant,
    last: Instant,
    aged: bool,
    timer: Pin<Box<Sleep>>,
    evicted: Pin<Box<WaitForCancellationFutureOwned>>,
}

impl<S> Tracked<S> {
    fn new(inner: S, live: Arc<Live>, ticket: Ticket) -> Self {
        let now = Instant::now();
        let first = now + ticket.shared.lifetimes.idle.min(ticket.shared.lifetimes.max_age);
        Tracked {
            evicted: Box::pin(live.evicted().clone().cancelled_owned()),
            inner,
            live,
            ticket,
            opened: now,
            last: now,
            aged: false,
            timer: Box::pin(tokio::time::sleep_until(first)),
        }
    }

    fn lifetimes(&self) -> Lifetimes {
        self.ticket.shared.lifetimes
    }

    fn active(&mut self) {
        self.last = Instant::now();
        self.live.touch(self.ticket.shared.now_ms());
    }

    /// The next idle timeout, age (until acted on) or end of grace.
    fn next_due(&self) -> Instant {
        let Lifetimes { idle, max_age, grace } = self.lifetimes();
        let age = if self.aged { self.opened + max_age + grace } else { self.opened + max_age };
        (self.last + idle).min(age)
    }

    /// Pending while the connection may stay open; the timer is re-armed lazily, not per read.
    fn poll_due(&mut self, cx: &mut Context<'_>) -> Poll<io::Error> {
        if self.evicted.as_mut().poll(cx).is_ready() {
            return Poll::Ready(io::Error::new(io::ErrorKind::ConnectionAborted, "evicted from a full listener"));
        }
        loop {
            if self.timer.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            let now = Instant::now();
            let Lifetimes { idle, max_age, grace } = self.lifetimes();
            if now >= self.last + idle {
                return Poll::Ready(io::Error::new(io::ErrorKind::TimedOut, "connection idle"));
            }
            if now >= self.opened + max_age + grace {
                return Poll::Ready(io::Error::new(io::ErrorKind::TimedOut, "connection past its maximum age"));
            }
            if !self.aged && now >= self.opened + max_age {
                self.aged = true;
                // No request yet means nothing to close gracefully: close now.
                if !self.live.close_gracefully() {
                    return Poll::Ready(io::Error::new(io::ErrorKind::TimedOut, "connection past its maximum age"));
                }
            }
            let due = self.next_due();
            self.timer.as_mut().reset(due);
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Tracked<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(result) => {
                this.active();
                Poll::Ready(result)
            }
            Poll::Pending => this.poll_due(cx).map(Err),
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Tracked<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        if polled.is_ready() {
            self.active();
        }
        polled
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
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if polled.is_ready() {
            self.active();
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}
