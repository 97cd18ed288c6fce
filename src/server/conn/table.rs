//! The connection table of one listener (bookkeeping only, no I/O): which peer holds which slot.
//!
//! A full table evicts rather than refuses, so that a flood of idle connections cannot keep the
//! kubelet's probe or the API server out. The victim is an idle connection (no request in
//! flight) of the peer that holds the most slots, counting the newcomer as its peer's: a peer
//! holding no more than its fair share (the cap divided among the peers at the cap) is never
//! evicted for another's sake, and a peer over it competes only with itself. No fixed per-peer
//! quota: every webhook request comes from the API server's few addresses, which may need most
//! of the table under load, so a quota small enough to stop a flooder would starve them.

use std::{
    collections::HashMap,
    net::IpAddr,
    sync::{
        Arc, OnceLock,
        atomic::{AtomicU32, AtomicU64, Ordering},
    },
};

use axum_server::ConnectionShutdown;
use tokio_util::sync::CancellationToken;

/// What the stream, the request counter and the table share about one open connection.
#[derive(Debug, Default)]
pub(crate) struct Live {
    /// Milliseconds since the listener started, at the last byte read or written.
    last_active: AtomicU64,
    /// Requests in flight on the connection (HTTP/2 streams, or the one HTTP/1.1 request).
    busy: AtomicU32,
    /// Cancelled when the table gives the slot to a newcomer: the stream's reads then fail.
    evicted: CancellationToken,
    /// hyper's graceful close of this connection, known from its first request on.
    shutdown: OnceLock<ConnectionShutdown>,
}

impl Live {
    pub(crate) fn new(now_ms: u64) -> Self {
        Live { last_active: AtomicU64::new(now_ms), ..Live::default() }
    }

    pub(crate) fn touch(&self, now_ms: u64) {
        self.last_active.store(now_ms, Ordering::Relaxed);
    }

    /// When the connection was last active, if no request is in flight on it.
    fn idle_since(&self) -> Option<u64> {
        (self.busy.load(Ordering::Acquire) == 0).then(|| self.last_active.load(Ordering::Relaxed))
    }

    pub(crate) fn start_request(&self) {
        self.busy.fetch_add(1, Ordering::AcqRel);
    }

    pub(crate) fn end_request(&self) {
        self.busy.fetch_sub(1, Ordering::AcqRel);
    }

    pub(crate) fn evicted(&self) -> &CancellationToken {
        &self.evicted
    }

    /// Keeps the first request's handle to close the connection gracefully later.
    pub(crate) fn know_shutdown(&self, shutdown: impl FnOnce() -> Option<ConnectionShutdown>) {
        if self.shutdown.get().is_none()
            && let Some(handle) = shutdown()
        {
            let _ = self.shutdown.set(handle);
        }
    }

    /// GOAWAY on HTTP/2, close after the response on HTTP/1.1; `false` before any request.
    pub(crate) fn close_gracefully(&self) -> bool {
        self.shutdown.get().map(ConnectionShutdown::graceful_shutdown).is_some()
    }
}

/// The slot of an admitted connection, to give back with [`Table::remove`].
pub(crate) type Slot = u64;

/// What [`Table::admit`] decided.
#[derive(Debug)]
pub(crate) enum Admission {
    /// Admitted; `evicted` gave up its slot for it (and has been told so).
    Admitted { slot: Slot, evicted: Option<Arc<Live>> },
    /// Every slot is taken by a connection with a request in flight.
    Full,
}

#[derive(Debug)]
struct Entry {
    peer: IpAddr,
    live: Arc<Live>,
}

/// The open connections of one listener, at most `cap`.
#[derive(Debug)]
pub(crate) struct Table {
    cap: usize,
    next: Slot,
    entries: HashMap<Slot, Entry>,
    per_peer: HashMap<IpAddr, usize>,
}

impl Table {
    pub(crate) fn new(cap: usize) -> Self {
        Table { cap: cap.max(1), next: 0, entries: HashMap::new(), per_peer: HashMap::new() }
    }

    /// Open connections.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Takes a slot for a connection from `peer`, evicting one when the table is full.
    pub(crate) fn admit(&mut self, peer: IpAddr, live: Arc<Live>) -> Admission {
        let evicted = if self.entries.len() >= self.cap {
            let Some(victim) = self.victim(peer) else { return Admission::Full };
            self.remove(victim).inspect(|live| live.evicted.cancel())
        } else {
            None
        };
        let slot = self.next;
        self.next += 1;
        self.entries.insert(slot, Entry { peer, live });
        *self.per_peer.entry(peer).or_default() += 1;
        Admission::Admitted { slot, evicted }
    }

    /// Gives a slot back; the connection's shared state, if the slot was still held.
    pub(crate) fn remove(&mut self, slot: Slot) -> Option<Arc<Live>> {
        let entry = self.entries.remove(&slot)?;
        if let Some(count) = self.per_peer.get_mut(&entry.peer) {
            *count -= 1;
            if *count == 0 {
                self.per_peer.remove(&entry.peer);
            }
        }
        Some(entry.live)
    }

    /// The idle connection to evict for `newcomer`: of the peer holding the most slots (the
    /// newcomer counted as its peer's), then silent longest.
    fn victim(&self, newcomer: IpAddr) -> Option<Slot> {
        // Per peer: its oldest idle connection.
        let mut oldest: HashMap<IpAddr, (u64, Slot)> = HashMap::new();
        for (&slot, entry) in &self.entries {
            let Some(since) = entry.live.idle_since() else { continue };
            let best = oldest.entry(entry.peer).or_insert((since, slot));
            *best = (*best).min((since, slot));
        }
        let held = |peer: IpAddr| self.per_peer.get(&peer).copied().unwrap_or(0) + usize::from(peer == newcomer);
        // Most slots first, then silent longest (the smallest timestamp).
        oldest
            .into_iter()
            .max_by_key(|&(peer, (since, slot))| (held(peer), std::cmp::Reverse((since, slot))))
            .map(|(_, (_, slot))| slot)
    }
}

#[cfg(test)]
mod tests;
