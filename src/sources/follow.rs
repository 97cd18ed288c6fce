//! The one follower of a watched collection: [`Projection`], the pure state watcher events
//! build (a keyed map with kube's re-list semantics), and [`follow`], the async driver that pumps
//! a kube `watcher` into it. Every watch of the crate is one of these; [`follow_all`] streams or
//! pages its lists as [`lists`] decides, bounding pages in bytes as [`pages`] does.
//!
//! A re-list is applied as it arrives and what it did not return is dropped when it ends, so it
//! never holds two copies of a large collection.

pub(crate) mod fingerprint;
mod lists;
mod namespaced;
mod pages;
mod relist;

use std::{
    collections::{HashMap, HashSet},
    fmt::Debug,
    hash::Hash,
};

use futures::{Stream, StreamExt};
use kube::{
    Api, Resource,
    runtime::{WatchStreamExt, watcher},
};
use serde::de::DeserializeOwned;

use lists::Lists;
pub(crate) use lists::Strategy;
pub(crate) use namespaced::list_namespace;
pub(crate) use relist::RELIST_EVERY;
use relist::relist_due;

use self::fingerprint::{Fingerprints, Print};
use crate::{kind::Governed, policy::Policies};

/// What one watcher event did to a [`Projection`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Change<K, V> {
    /// A (re-)list began or returned an object: its end, [`Change::Listed`], is the news.
    Listing,
    /// A (re-)list ended: the map holds exactly what it returned (`first`: now synced);
    /// `dropped` are the keys it did not return, which the owner forgets too.
    Listed { first: bool, dropped: Vec<K> },
    /// `key` was added or modified; `old` is what it held before.
    Applied { key: K, old: Option<V> },
    /// `key` was deleted; `old` is what it held, if anything.
    Deleted { key: K, old: Option<V> },
}

/// What a follower's projection made of one object: a value to keep, a key to keep nothing
/// under (a change makes a held one go, as if deleted), or nothing (an object without a key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Projected<K, V> {
    Keep(K, V),
    Gone(K),
    Skip,
}

impl<K, V> From<Option<(K, V)>> for Projected<K, V> {
    fn from(projected: Option<(K, V)>) -> Self {
        projected.map_or(Projected::Skip, |(key, value)| Projected::Keep(key, value))
    }
}

/// The projected values of a watched collection, by key, as watcher events leave them.
#[derive(Debug)]
pub(crate) struct Projection<K, V> {
    values: HashMap<K, V>,
    /// The fingerprints of the keys the (re-)list in progress returned: 8 bytes a key, not a
    /// copy (a key sharing a listed one's fingerprint by chance is dropped a re-list later).
    listing: Option<HashSet<Print>>,
    prints: Fingerprints,
    synced: bool,
}

impl<K, V> Default for Projection<K, V> {
    fn default() -> Self {
        Projection { values: HashMap::new(), listing: None, prints: Fingerprints::default(), synced: false }
    }
}

impl<K: Eq + Hash + Clone, V> Projection<K, V> {
    /// Applies one event whose object is already projected to `(key, value)`.
    pub(crate) fn apply(&mut self, event: watcher::Event<(K, V)>) -> Change<K, V> {
        match event {
            watcher::Event::Init => {
                self.listing = Some(HashSet::new());
                Change::Listing
            }
            watcher::Event::InitApply((key, value)) => {
                if let Some(listing) = &mut self.listing {
                    listing.insert(self.prints.of(&key));
                }
                self.values.insert(key, value);
                Change::Listing
            }
            watcher::Event::InitDone => {
                let listing = self.listing.take();
                let unlisted = |key: &K, _: &mut V| listing.as_ref().is_some_and(|l| !l.contains(&self.prints.of(key)));
                let dropped = self.values.extract_if(unlisted).map(|(key, _)| key).collect();
                let first = !self.synced;
                self.synced = true;
                Change::Listed { first, dropped }
            }
            watcher::Event::Apply((key, value)) => {
                let old = self.values.insert(key.clone(), value);
                Change::Applied { key, old }
            }
            watcher::Event::Delete((key, _)) => {
                let old = self.values.remove(&key);
                Change::Deleted { key, old }
            }
        }
    }

    /// Whether a list has ended: before that, the map is partial.
    pub(crate) fn synced(&self) -> bool {
        self.synced
    }

    /// The map, once synced.
    pub(crate) fn view(&self) -> Option<&HashMap<K, V>> {
        self.synced.then_some(&self.values)
    }

    pub(crate) fn get(&self, key: &K) -> Option<&V> {
        self.values.get(key)
    }

    pub(crate) fn len(&self) -> usize {
        self.values.len()
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        self.values.iter()
    }

    /// The keys held, in an order that stays while none is added or removed.
    pub(crate) fn keys(&self) -> std::collections::hash_map::Keys<'_, K, V> {
        self.values.keys()
    }

    /// Removes `key` (an object the owner no longer keeps), as a deletion would.
    pub(crate) fn remove(&mut self, key: K) -> Change<K, V> {
        let old = self.values.remove(&key);
        Change::Deleted { key, old }
    }

    /// Stores what a list of one Namespace returned ([`list_namespace`]) if `key` holds
    /// nothing, as listed by a re-list in progress (which went by it before the owner kept it).
    /// `None` if held already.
    pub(crate) fn adopt(&mut self, key: K, value: V) -> Option<Change<K, V>> {
        if self.values.contains_key(&key) {
            return None;
        }
        if let Some(listing) = &mut self.listing {
            listing.insert(self.prints.of(&key));
        }
        self.values.insert(key.clone(), value);
        Some(Change::Applied { key, old: None })
    }

    /// Stores what the owner learnt outside the watch (a response to its own write). It does
    /// not count as listed: a re-list that does not return the key still drops it.
    pub(crate) fn insert(&mut self, key: K, value: V) {
        self.values.insert(key, value);
    }
}

/// Where a [`Projection`] is kept: behind the owner's lock, maybe beside other state.
pub(crate) trait Hold<K, V> {
    fn update<T>(&self, f: impl FnOnce(&mut Projection<K, V>) -> T) -> T;
}

impl<K, V> Hold<K, V> for std::sync::RwLock<Projection<K, V>> {
    fn update<T>(&self, f: impl FnOnce(&mut Projection<K, V>) -> T) -> T {
        // Every event leaves the projection consistent: a panic cannot leave half of one.
        f(&mut self.write().unwrap_or_else(std::sync::PoisonError::into_inner))
    }
}

/// How long the API server keeps one watch request open (unless `config` says otherwise):
/// shorter than the client's read timeout ([`crate::client::READ_TIMEOUT`]), so a quiet watch
/// ends cleanly and is resumed from its resourceVersion instead of failing as a stalled read.
pub(crate) const WATCH_TIMEOUT_SECS: u32 = 25;

/// Follows `api` (with `config`) into `held` until the task is aborted. Each object is
/// projected on arrival, so only the projection is ever kept; `hook` is then told, outside the
/// lock, what the event changed, or the watch error (retried with backoff).
///
/// `cap` bounds the retries (from 800 ms, doubling) instead of kube's 30 s, for a resource that
/// may not be served yet (a CRD installed after start-up), so it is noticed soon after.
pub(crate) async fn follow<R, K, V, P: Into<Projected<K, V>>>(
    api: Api<R>,
    config: watcher::Config,
    cap: Option<std::time::Duration>,
    project: impl Fn(R) -> P,
    held: &impl Hold<K, V>,
    hook: impl FnMut(Result<Change<K, V>, watcher::Error>),
) where
    R: Resource + Clone + Debug + DeserializeOwned + Send + 'static,
    K: Eq + Hash + Clone,
{
    follow_kept(api, config, cap, |_| true, project, held, hook).await;
}

/// [`follow`] of the watcher's events `keep` keeps (it sees each first, errors after their
/// backoff).
async fn follow_kept<R, K, V, P: Into<Projected<K, V>>>(
    api: Api<R>,
    config: watcher::Config,
    cap: Option<std::time::Duration>,
    mut keep: impl FnMut(&Result<watcher::Event<R>, watcher::Error>) -> bool,
    project: impl Fn(R) -> P,
    held: &impl Hold<K, V>,
    hook: impl FnMut(Result<Change<K, V>, watcher::Error>),
) where
    R: Resource + Clone + Debug + DeserializeOwned + Send + 'static,
    K: Eq + Hash + Clone,
{
    let config = if config.timeout.is_some() { config } else { config.timeout(WATCH_TIMEOUT_SECS) };
    let events = watcher(api, config);
    let kept = move |event: &Result<watcher::Event<R>, watcher::Error>| std::future::ready(keep(event));
    match cap {
        None => pump(events.default_backoff().filter(kept), project, held, hook).await,
        Some(cap) => pump(events.backoff(CappedBackoff::new(cap)).filter(kept), project, held, hook).await,
    }
}

/// Whether the policies need a watch of every object of kind `K` (Ingresses: always).
pub(crate) fn wanted<K: Governed>(policies: &Policies) -> bool {
    K::KIND.info().always_watched || policies.of(K::KIND).next().is_some()
}

/// Longest wait between two attempts of a failing watch of kind `K` (`None`: kube's default).
pub(crate) fn retry_cap<K: Governed>() -> Option<std::time::Duration> {
    K::KIND.info().optional_api.map(|_| RETRY_CAP)
}

/// Longest wait between two attempts of a failing watch of an API that may not be served (the
/// Gateway API's CRDs): how soon CRDs installed after start-up are noticed.
pub(crate) const RETRY_CAP: std::time::Duration = std::time::Duration::from_secs(10);

/// [`follow`] of every object of a governed kind (`R`, its lean projection), by streaming lists
/// or list pages ([`Lists`]), started over when `relist` is notified (at most once per
/// [`RELIST_EVERY`]), when pages are to grow back or streaming lists are given up; `strategy`
/// is told which one each start uses. Returns only if the watch ends.
pub(crate) async fn follow_all<R, K, V, P: Into<Projected<K, V>>>(
    client: &kube::Client,
    cap: Option<std::time::Duration>,
    project: impl Fn(R) -> P,
    held: &impl Hold<K, V>,
    mut hook: impl FnMut(Result<Change<K, V>, watcher::Error>),
    relist: &tokio::sync::Notify,
    strategy: impl Fn(Strategy),
) where
    R: Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned + Send + 'static,
    K: Eq + Hash + Clone,
{
    // Only this task touches it; a lock keeps the future `Send`.
    let (lists, mut relisted) = (std::sync::Mutex::new(Lists::default()), None);
    let lock = || lists.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    loop {
        let restart = tokio::sync::Notify::new();
        let (config, api) = {
            let mut lists = lock();
            lists.start();
            strategy(lists.strategy());
            (lists.config(), Api::<R>::all(lists.client(client)))
        };
        let keep = |event: &Result<watcher::Event<R>, watcher::Error>| match lock().saw(event) {
            lists::Next::Pass => true,
            lists::Next::Restart => {
                restart.notify_one();
                false
            }
            lists::Next::FallBack(why) => {
                let kind = R::plural(&());
                match why {
                    lists::NoStreaming::Refused(_) => tracing::info!(%kind, "{why}: listing in pages"),
                    lists::NoStreaming::NeverEnded => tracing::warn!(%kind, "{why}: listing in pages"),
                }
                restart.notify_one();
                false
            }
        };
        tokio::select! {
            () = follow_kept(api, config, cap, keep, &project, held, &mut hook) => return,
            () = relist_due(relist, relisted, RELIST_EVERY) => relisted = Some(tokio::time::Instant::now()),
            () = restart.notified() => {}
        }
    }
}

/// Whether a watch error says the API server does not serve the kind (its CRDs are not
/// installed).
pub(crate) fn is_api_absent(error: &watcher::Error) -> bool {
    match error {
        watcher::Error::InitialListFailed(kube::Error::Api(status))
        | watcher::Error::WatchStartFailed(kube::Error::Api(status)) => status.code == 404,
        _ => false,
    }
}

/// Exponential backoff from 800 ms, doubling up to a cap; reset by the watcher on success.
#[derive(Debug, Clone)]
pub(crate) struct CappedBackoff {
    next: std::time::Duration,
    cap: std::time::Duration,
}

impl CappedBackoff {
    const FIRST: std::time::Duration = std::time::Duration::from_millis(800);

    pub(crate) fn new(cap: std::time::Duration) -> Self {
        CappedBackoff { next: Self::FIRST.min(cap), cap }
    }
}

impl Iterator for CappedBackoff {
    type Item = std::time::Duration;

    fn next(&mut self) -> Option<std::time::Duration> {
        let now = self.next;
        self.next = (now * 2).min(self.cap);
        Some(now)
    }
}

impl kube::runtime::utils::Backoff for CappedBackoff {
    fn reset(&mut self) {
        self.next = Self::FIRST.min(self.cap);
    }
}

/// [`follow`] for any stream of watcher events.
pub(crate) async fn pump<R, K, V, P: Into<Projected<K, V>>>(
    events: impl Stream<Item = Result<watcher::Event<R>, watcher::Error>>,
    project: impl Fn(R) -> P,
    held: &impl Hold<K, V>,
    mut hook: impl FnMut(Result<Change<K, V>, watcher::Error>),
) where
    K: Eq + Hash + Clone,
{
    let mut events = std::pin::pin!(events);
    while let Some(event) = events.next().await {
        type Wrap<K, V> = fn((K, V)) -> watcher::Event<(K, V)>;
        let (obj, wrap, list): (R, Wrap<K, V>, bool) = match event {
            Ok(watcher::Event::Init) => {
                hook(Ok(held.update(|projection| projection.apply(watcher::Event::Init))));
                continue;
            }
            Ok(watcher::Event::InitDone) => {
                hook(Ok(held.update(|projection| projection.apply(watcher::Event::InitDone))));
                continue;
            }
            Ok(watcher::Event::InitApply(obj)) => (obj, watcher::Event::InitApply, true),
            Ok(watcher::Event::Apply(obj)) => (obj, watcher::Event::Apply, false),
            Ok(watcher::Event::Delete(obj)) => (obj, watcher::Event::Delete, false),
            Err(e) => {
                hook(Err(e));
                continue;
            }
        };
        let change = match project(obj).into() {
            Projected::Keep(key, value) => held.update(|projection| projection.apply(wrap((key, value)))),
            // Not kept: a list leaves it out (so a held one is dropped when the list ends); a
            // change or deletion removes what was held, and only that is news.
            Projected::Gone(key) if !list => match held.update(|projection| projection.remove(key)) {
                change @ Change::Deleted { old: Some(_), .. } => change,
                _ => continue,
            },
            Projected::Gone(_) | Projected::Skip => continue,
        };
        hook(Ok(change));
    }
}

#[cfg(test)]
mod tests {
    use std::sync::RwLock;

    use super::*;
    use watcher::Event::{Apply, Delete, Init, InitApply, InitDone};

    fn applied(key: &'static str, old: Option<u32>) -> Change<&'static str, u32> {
        Change::Applied { key, old }
    }

    fn sorted(p: &Projection<&'static str, u32>) -> Vec<(&'static str, u32)> {
        let mut all: Vec<_> = p.iter().map(|(k, v)| (*k, *v)).collect();
        all.sort_unstable();
        all
    }

    #[test]
    fn first_list_syncs() {
        let mut p = Projection::default();
        assert!(!p.synced() && p.view().is_none());
        assert_eq!(p.apply(Init), Change::Listing);
        assert_eq!(p.apply(InitApply(("a", 1))), Change::Listing);
        assert_eq!(p.apply(InitApply(("b", 2))), Change::Listing);
        assert!(p.view().is_none(), "a partial list is not shown");
        assert_eq!(p.get(&"a"), Some(&1), "but held as it arrives");
        assert_eq!(p.apply(InitDone), Change::Listed { first: true, dropped: vec![] });
        assert!(p.synced());
        assert_eq!(p.view().map(HashMap::len), Some(2));
        assert_eq!(sorted(&p), [("a", 1), ("b", 2)]);
    }

    #[test]
    fn empty_list_syncs_too() {
        let mut p: Projection<&str, u32> = Projection::default();
        p.apply(Init);
        assert_eq!(p.apply(InitDone), Change::Listed { first: true, dropped: vec![] });
        assert_eq!(p.view().map(HashMap::len), Some(0));
    }

    #[test]
    fn apply_and_delete_report_the_old_value() {
        let mut p = Projection::default();
        p.apply(Init);
        p.apply(InitApply(("a", 1)));
        p.apply(InitDone);
        assert_eq!(p.apply(Apply(("a", 1))), applied("a", Some(1)), "unchanged: the owner compares");
        assert_eq!(p.apply(Apply(("a", 5))), applied("a", Some(1)));
        assert_eq!(p.apply(Apply(("c", 3))), applied("c", None));
        assert_eq!(p.apply(Delete(("a", 0))), Change::Deleted { key: "a", old: Some(5) });
        assert_eq!(p.apply(Delete(("zz", 0))), Change::Deleted { key: "zz", old: None });
        assert_eq!(sorted(&p), [("c", 3)]);
    }

    #[test]
    fn relist_drops_what_it_did_not_return() {
        let mut p = Projection::default();
        p.apply(Init);
        for (k, v) in [("a", 1), ("b", 2), ("c", 3)] {
            p.apply(InitApply((k, v)));
        }
        p.apply(InitDone);
        // A watch restart: b was deleted and a changed while the watch was down.
        p.apply(Init);
        p.apply(InitApply(("a", 10)));
        assert_eq!(sorted(&p), [("a", 10), ("b", 2), ("c", 3)], "until the re-list ends, the rest stays");
        assert!(p.synced(), "a re-list does not unsync");
        p.apply(InitApply(("c", 3)));
        assert_eq!(p.apply(InitDone), Change::Listed { first: false, dropped: vec!["b"] }, "b is reported dropped");
        assert_eq!(sorted(&p), [("a", 10), ("c", 3)]);
    }

    #[test]
    fn restart_during_a_list_starts_it_over() {
        let mut p = Projection::default();
        p.apply(Init);
        p.apply(InitApply(("a", 1)));
        p.apply(Init);
        p.apply(InitApply(("b", 2)));
        p.apply(InitDone);
        assert_eq!(sorted(&p), [("b", 2)]);
    }

    #[test]
    fn own_writes_are_not_listed() {
        let mut p = Projection::default();
        p.apply(Init);
        p.apply(InitApply(("a", 1)));
        p.apply(InitDone);
        p.apply(Init);
        p.insert("a", 2);
        p.insert("b", 3);
        assert_eq!(p.get(&"a"), Some(&2));
        let Change::Listed { mut dropped, .. } = p.apply(InitDone) else { panic!("a list ends") };
        dropped.sort_unstable();
        assert_eq!(dropped, ["a", "b"]);
        assert_eq!(sorted(&p), [], "a re-list that returns nothing drops even what the owner wrote");
    }

    #[test]
    fn adopted_objects_keep_what_the_watch_delivered_and_count_as_listed() {
        let mut p = Projection::default();
        p.apply(Init);
        p.apply(InitApply(("a", 1)));
        p.apply(InitDone);
        assert_eq!(p.adopt("a", 9), None, "the watch's copy stays");
        // A re-list in progress, which left "n" out (not kept when it went by).
        p.apply(Init);
        p.apply(InitApply(("a", 1)));
        assert_eq!(p.adopt("n", 2), Some(applied("n", None)));
        assert_eq!(p.apply(InitDone), Change::Listed { first: false, dropped: vec![] }, "n is not dropped");
        assert_eq!(sorted(&p), [("a", 1), ("n", 2)]);
    }

    #[test]
    fn capped_backoff_doubles_to_its_cap_and_resets() {
        use kube::runtime::utils::Backoff as _;
        let mut b = CappedBackoff::new(std::time::Duration::from_secs(10));
        let secs: Vec<f64> = b.by_ref().take(7).map(|d| d.as_secs_f64()).collect();
        assert_eq!(secs, [0.8, 1.6, 3.2, 6.4, 10.0, 10.0, 10.0]);
        b.reset();
        assert_eq!(b.next(), Some(std::time::Duration::from_millis(800)));
    }

    #[tokio::test]
    async fn an_object_not_kept_is_left_out_of_a_list_and_removed_by_a_change() {
        // "k=…" is kept, "g=…" is the same key kept no more.
        let events = [
            Init,
            InitApply("a=k"),
            InitApply("b=k"),
            InitDone,
            Apply("a=g"),
            Apply("c=g"),
            Delete("c=g"),
            Init,
            InitApply("b=g"),
            InitDone,
        ];
        let held = RwLock::new(Projection::default());
        let mut changes = Vec::new();
        let project = |s: &'static str| match s.split_once('=') {
            Some((k, "k")) => Projected::Keep(k, 1),
            Some((k, _)) => Projected::Gone(k),
            None => Projected::Skip,
        };
        pump(futures::stream::iter(events.map(Ok)), project, &held, |c| changes.push(c.unwrap())).await;
        assert_eq!(
            changes,
            [
                Change::Listing,
                Change::Listing,
                Change::Listing,
                Change::Listed { first: true, dropped: vec![] },
                Change::Deleted { key: "a", old: Some(1) },
                Change::Listing,
                Change::Listed { first: false, dropped: vec!["b"] },
            ],
            "a change of one never held is no news"
        );
        assert_eq!(sorted(&held.into_inner().unwrap()), []);
    }

    #[tokio::test]
    async fn pump_projects_on_arrival_and_reports_each_change() {
        let events =
            [Init, InitApply("a=1"), InitApply("skip"), InitApply("b=2"), InitDone, Apply("a=3"), Delete("b=0")];
        let held = RwLock::new(Projection::default());
        let mut changes = Vec::new();
        let project = |s: &'static str| {
            let (k, v) = s.split_once('=')?;
            Some((k, v.parse::<u32>().ok()?))
        };
        pump(futures::stream::iter(events.map(Ok)), project, &held, |c| changes.push(c.unwrap())).await;
        assert_eq!(
            changes,
            [
                Change::Listing,
                Change::Listing,
                Change::Listing,
                Change::Listed { first: true, dropped: vec![] },
                applied("a", Some(1)),
                Change::Deleted { key: "b", old: Some(2) },
            ],
            "an object that does not project is skipped"
        );
        let held = held.into_inner().unwrap();
        assert_eq!(sorted(&held), [("a", 3)]);
    }
}
