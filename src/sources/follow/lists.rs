//! How the watch of every object of a governed kind gets the state it starts from, as pure
//! decisions over the watcher's events: a streaming list (WatchList) where the API server serves
//! one, else list pages bounded in objects and bytes ([`super::pages`]), grown back after lists
//! that ended.
//!
//! A streaming list holds one object at a time, where a page holds up to
//! [`LIST_PAGE_BYTES`](super::pages::LIST_PAGE_BYTES). Kubernetes 1.23 to 1.26 refuse it, later
//! versions while their WatchList gate is off (up to 1.31 at least): each answers 422 Invalid,
//! naming the parameter, and the watch then lists in pages until the process restarts.

use kube::runtime::watcher;

use super::pages::{PageSize, shrunk};

/// Objects a list page asks for, as client-go's informers do.
pub(crate) const LIST_PAGE: u32 = 500;
/// Streaming lists in a row that may end without their bookmark before the watch lists in
/// pages: an API server that ignored `sendInitialEvents` would never send it, so the watch would
/// never sync. Each attempt ends with the watch's timeout ([`super::WATCH_TIMEOUT_SECS`]).
pub(crate) const UNENDED_STREAMS: u32 = 2;
/// The query parameters only a server with streaming lists accepts on a watch.
const STREAMING_PARAMS: [&str; 2] = ["sendInitialEvents", "resourceVersionMatch"];
/// The most of an API server's refusal kept for the log line.
const REFUSAL_CHARS: usize = 200;

/// How a watch gets the state it starts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Strategy {
    /// A streaming list: `sendInitialEvents=true`, ended by the `k8s.io/initial-events-end`
    /// bookmark.
    Streaming,
    /// List pages of at most [`LIST_PAGE`] objects and [`LIST_PAGE_BYTES`](super::pages::LIST_PAGE_BYTES) bytes, then a watch.
    Pages,
}

/// Why a watch gave streaming lists up for pages.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum NoStreaming {
    #[error(
        "the API server refused the streaming list ({0}): it does not serve WatchList (Kubernetes before 1.27, or the WatchList feature gate off)"
    )]
    Refused(String),
    #[error(
        "{UNENDED_STREAMS} streaming lists in a row ended without their initial-events-end bookmark: the API server (or a proxy before it) ignores sendInitialEvents"
    )]
    NeverEnded,
}

/// After `error` of a streaming watch, whether it says that the API server does not serve
/// streaming lists: a 422 Invalid of the watch's start that names one of their parameters.
/// Anything else (unreachable, forbidden, a 410 Gone) is retried as any watch failure is.
pub(crate) fn refuses_streaming(error: &watcher::Error) -> Option<NoStreaming> {
    let watcher::Error::WatchStartFailed(kube::Error::Api(status)) = error else { return None };
    let names = |text: &str| STREAMING_PARAMS.iter().any(|p| text.contains(p));
    let named = names(&status.message) || status.details.iter().flat_map(|d| &d.causes).any(|c| names(&c.field));
    (status.code == 422 && named).then(|| NoStreaming::Refused(status.message.chars().take(REFUSAL_CHARS).collect()))
}

/// The page size after one that ended a list: one step back up the ladder [`shrunk`] goes
/// down (1, 7, 31, 125, 500), so objects that were too big for a larger page cost at most one
/// cut-off page a re-list, and a cluster rid of them is back at [`LIST_PAGE`] in four.
pub(crate) fn grown(page: u32) -> u32 {
    if page >= LIST_PAGE {
        return page;
    }
    let mut step = LIST_PAGE;
    while shrunk(step) > page {
        step = shrunk(step);
    }
    step
}

/// What the watch is to do with one event of the watcher.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Next {
    /// Hand it on.
    Pass,
    /// Drop it, and start the watch over: a re-list begins, and pages are to be larger.
    Restart,
    /// Drop it, and start the watch over in pages for good, for this reason.
    FallBack(NoStreaming),
}

/// The state of the watch's lists across its restarts: which strategy, and the page size.
#[derive(Debug)]
pub(crate) struct Lists {
    streaming: bool,
    /// Streaming lists begun since the last one ended.
    unended: u32,
    /// Shared with the client that shrinks it ([`super::pages::paging`]).
    page: PageSize,
    /// The page size the last list ended at, since the watch (re)started.
    listed: Option<u32>,
}

impl Default for Lists {
    fn default() -> Self {
        Lists { streaming: true, unended: 0, page: PageSize::new(LIST_PAGE), listed: None }
    }
}

impl Lists {
    /// In pages from the start.
    #[cfg(test)]
    fn paged() -> Self {
        Lists { streaming: false, ..Lists::default() }
    }

    pub(crate) fn strategy(&self) -> Strategy {
        if self.streaming { Strategy::Streaming } else { Strategy::Pages }
    }

    /// Objects a page asks for now.
    #[cfg(test)]
    fn page(&self) -> u32 {
        self.page.get()
    }

    /// The watch (re)starts: pages grow back a step if a list ended at the size of now (not if
    /// one has shrunk them since).
    pub(crate) fn start(&mut self) {
        let page = self.page.get();
        if self.listed == Some(page) {
            self.page.set(grown(page));
        }
        self.listed = None;
        self.unended = 0;
    }

    /// The watch's configuration now. A list at resourceVersion "0" (any) is served whole from
    /// the watch cache, ignoring the page size, so pages ask for the most recent state.
    pub(crate) fn config(&self) -> watcher::Config {
        match self.streaming {
            true => watcher::Config::default().streaming_lists(),
            false => {
                watcher::Config::default().page_size(self.page.get()).list_semantic(watcher::ListSemantic::MostRecent)
            }
        }
    }

    /// The client to watch with: list pages of at most the page size and [`LIST_PAGE_BYTES`](super::pages::LIST_PAGE_BYTES),
    /// continued in smaller pages past them ([`super::pages::paging`]); a streaming list reads
    /// one object an event.
    pub(crate) fn client(&self, client: &kube::Client) -> kube::Client {
        match self.streaming {
            true => client.clone(),
            false => super::pages::paging(client, &self.page),
        }
    }

    /// What to do with `event` of the watcher.
    pub(crate) fn saw<R>(&mut self, event: &Result<watcher::Event<R>, watcher::Error>) -> Next {
        use watcher::Event::{Init, InitDone};
        match (self.streaming, event) {
            (true, Err(e)) => refuses_streaming(e).map_or(Next::Pass, |why| self.fall_back(why)),
            (true, Ok(Init)) => {
                self.unended += 1;
                match self.unended > UNENDED_STREAMS {
                    true => self.fall_back(NoStreaming::NeverEnded),
                    false => Next::Pass,
                }
            }
            (true, Ok(InitDone)) => {
                self.unended = 0;
                Next::Pass
            }
            (false, Ok(InitDone)) => {
                self.listed = Some(self.page.get());
                Next::Pass
            }
            (false, Ok(Init)) if self.listed.is_some_and(|page| grown(page) != page) => Next::Restart,
            _ => Next::Pass,
        }
    }

    fn fall_back(&mut self, why: NoStreaming) -> Next {
        self.streaming = false;
        Next::FallBack(why)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use watcher::Event::{Init, InitApply, InitDone};

    type Seen = Result<watcher::Event<()>, watcher::Error>;

    fn init() -> Seen {
        Ok(Init)
    }
    fn item() -> Seen {
        Ok(InitApply(()))
    }
    fn done() -> Seen {
        Ok(InitDone)
    }

    /// A refusal as the API server answers it (the messages of Kubernetes 1.23, and of 1.31
    /// or 1.37 with the WatchList gate off, as each answered).
    fn refusal(code: u16, message: &str, field: &str) -> Seen {
        let status = serde_json::json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": "Invalid", "code": code,
            "details": {"group": "meta.k8s.io", "kind": "ListOptions", "causes": [
                {"reason": "FieldValueForbidden", "message": "Forbidden", "field": field}
            ]},
        });
        let status: kube::core::Status = serde_json::from_value(status).expect("a Status");
        Err(watcher::Error::WatchStartFailed(kube::Error::Api(status.boxed())))
    }

    const V1_23: &str = "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch";
    const V1_31: &str = "ListOptions.meta.k8s.io \"\" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled";

    #[test]
    fn only_a_422_naming_a_streaming_parameter_means_unsupported() {
        for (message, field) in
            [(V1_23, "resourceVersionMatch"), (V1_31, "sendInitialEvents"), ("invalid", "sendInitialEvents")]
        {
            let Err(e) = refusal(422, message, field) else { unreachable!() };
            assert!(matches!(refuses_streaming(&e), Some(NoStreaming::Refused(_))), "{message}");
        }
        let Err(other_422) = refusal(422, "labelSelector: Invalid value", "labelSelector") else { unreachable!() };
        let Err(forbidden) = refusal(403, "ingresses is forbidden: sendInitialEvents", "") else { unreachable!() };
        let Err(gone) = refusal(410, "too old resource version", "") else { unreachable!() };
        let unreachable = watcher::Error::WatchStartFailed(kube::Error::Service("connection refused".into()));
        let listed = watcher::Error::InitialListFailed(kube::Error::Service("sendInitialEvents 422".into()));
        for e in [other_422, forbidden, gone, unreachable, listed] {
            assert_eq!(refuses_streaming(&e), None, "retried as any failure: {e}");
        }
        let Err(long) = refusal(422, &format!("{V1_31}{}", "x".repeat(10_000)), "") else { unreachable!() };
        let Some(NoStreaming::Refused(kept)) = refuses_streaming(&long) else { panic!("refused") };
        assert_eq!(kept.chars().count(), REFUSAL_CHARS, "an API server's message is bounded");
    }

    #[test]
    fn a_refused_streaming_list_falls_back_to_pages_for_good() {
        let mut lists = Lists::default();
        assert_eq!(lists.strategy(), Strategy::Streaming);
        assert!(lists.config().initial_list_strategy == watcher::InitialListStrategy::StreamingList);
        let unreachable: Seen = Err(watcher::Error::WatchStartFailed(kube::Error::Service("refused".into())));
        assert_eq!(lists.saw(&unreachable), Next::Pass, "retried with backoff, still streaming");
        assert_eq!(lists.strategy(), Strategy::Streaming);
        assert!(matches!(
            lists.saw(&refusal(422, V1_23, "resourceVersionMatch")),
            Next::FallBack(NoStreaming::Refused(_))
        ));
        lists.start();
        assert_eq!(lists.strategy(), Strategy::Pages);
        let config = lists.config();
        assert_eq!(
            (config.page_size, config.initial_list_strategy),
            (Some(LIST_PAGE), watcher::InitialListStrategy::ListWatch)
        );
        assert_eq!(lists.saw(&refusal(422, V1_31, "sendInitialEvents")), Next::Pass, "pages never go back");
        assert_eq!(lists.strategy(), Strategy::Pages);
    }

    #[test]
    fn streaming_lists_that_never_end_fall_back_to_pages() {
        let mut lists = Lists::default();
        lists.start();
        // One that ends resets the count, however many attempts it took.
        for _ in 0..UNENDED_STREAMS {
            assert_eq!(lists.saw(&init()), Next::Pass);
            assert_eq!(lists.saw(&item()), Next::Pass);
        }
        assert_eq!(lists.saw(&done()), Next::Pass);
        // A re-list (a 410 Gone later) that never ends.
        for _ in 0..UNENDED_STREAMS {
            assert_eq!(lists.saw(&init()), Next::Pass);
            assert_eq!(lists.saw(&item()), Next::Pass);
        }
        assert_eq!(lists.saw(&init()), Next::FallBack(NoStreaming::NeverEnded), "the third begins in pages");
        assert_eq!(lists.strategy(), Strategy::Pages);
    }

    #[test]
    fn pages_share_their_size_with_the_client_that_shrinks_them() {
        let mut lists = Lists::paged();
        lists.start();
        assert_eq!(lists.page(), LIST_PAGE);
        assert_eq!(lists.saw(&init()), Next::Pass);
        // A page over its bytes, as the client continues the list ([`super::super::pages`]).
        assert_eq!(lists.page.shrink(), 125);
        assert_eq!(lists.saw(&item()), Next::Pass, "the list goes on: no restart");
        assert_eq!(lists.saw(&done()), Next::Pass);
        assert_eq!(lists.page(), 125, "and ended at the smaller size");
        lists.start();
        assert_eq!(lists.config().page_size, Some(LIST_PAGE), "a step larger at the next start");
        assert_eq!(lists.page.get(), LIST_PAGE, "for the client too");
    }

    #[test]
    fn the_ladder_down_is_the_ladder_up() {
        assert_eq!([500, 125, 31, 7, 1].map(grown), [500, 500, 125, 31, 7]);
        assert_eq!([500, 125, 31, 7, 1].map(shrunk), [125, 31, 7, 1, 1]);
        assert_eq!([2, 6, 8, 30, 100, 499, 1000].map(grown), [7, 7, 31, 31, 125, 500, 1000]);
    }

    #[test]
    fn pages_grow_back_a_step_at_the_re_list_after_one_that_ended() {
        let mut lists = Lists::paged();
        lists.start();
        lists.saw(&init());
        lists.page.shrink();
        lists.page.shrink();
        lists.start();
        assert_eq!(lists.page(), 31, "no growth after a list that did not end");
        assert_eq!(lists.saw(&init()), Next::Pass, "the list at 31 begins");
        assert_eq!(lists.saw(&done()), Next::Pass, "and ends: no restart while watching");
        assert_eq!(lists.page(), 31);
        assert_eq!(lists.saw(&init()), Next::Restart, "a re-list starts over a step larger");
        lists.start();
        assert_eq!(lists.page(), 125);
        assert_eq!(lists.saw(&init()), Next::Pass, "the list at 125 is not restarted");
        lists.page.shrink();
        assert_eq!(lists.saw(&done()), Next::Pass, "still too big: it ended a step down again");
        assert_eq!(lists.page(), 31);
        assert_eq!(lists.saw(&init()), Next::Restart);
        lists.start();
        assert_eq!(lists.page(), 125);
        lists.saw(&init());
        lists.saw(&done());
        lists.saw(&init());
        lists.page.shrink();
        lists.start();
        assert_eq!(lists.page(), 31, "no growth when shrunk since the last list ended");
        lists.saw(&init());
        lists.saw(&done());
        lists.start();
        assert_eq!(lists.page(), 125, "a restart for another reason (the filter widened) grows too");
        lists.saw(&init());
        lists.saw(&done());
        assert_eq!(lists.saw(&init()), Next::Restart);
        lists.start();
        assert_eq!(lists.page(), LIST_PAGE);
        lists.saw(&init());
        lists.saw(&done());
        assert_eq!(lists.saw(&init()), Next::Pass, "at 500 a re-list runs as it is");
    }
}
