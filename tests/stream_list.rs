//! The watch of every governed object against a real kube-apiserver (issue 34): it gets its
//! state by a streaming list (WatchList) where the API server serves one, and in list pages
//! where it does not (Kubernetes 1.23 to 1.26, and later ones with the WatchList gate off, as up
//! to 1.31 by default), or where the streaming list never ends (an API server or a proxy that
//! ignores `sendInitialEvents`). Which one is asserted from the API server's own request counts
//! (`apiserver_request_total`: a streaming list makes no LIST call), and the bytes held at most
//! during each are counted by a global allocator and printed. A binary of its own, as the
//! allocator counts the whole process; its tests take turns, as they count one process and
//! one API server's requests.

#[allow(dead_code)]
mod support;

mod counting;

use std::{
    sync::atomic::Ordering,
    time::{Duration, Instant},
};

use futures::{StreamExt, stream};
use ingress_status_guard::{IngressCache, Policies, parse_file};
use k8s_openapi::api::networking::v1::Ingress;
use kube::api::PostParams;
use serde_json::json;

use counting::{Counting, HELD, PEAK};
use support::TestEnv;

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Ingresses listed: seven pages of 500 (as the watch of pages asks), each with an annotation of
/// [`ANNOTATION`] bytes (a page of them is about 1.5 MiB on the wire).
const INGRESSES: usize = 3_000;
const ANNOTATION: usize = 2_048;

static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
static CREATED: tokio::sync::OnceCell<(String, u32)> = tokio::sync::OnceCell::const_new();

/// The class of the Ingresses, created once for the binary, and the API server's minor version.
async fn created(t: &TestEnv) -> &'static (String, u32) {
    CREATED
        .get_or_init(|| async {
            let api = &t.ingresses;
            let creates = (0..INGRESSES).map(|i| async move {
                let ingress: Ingress = serde_json::from_value(json!({
                    "metadata": {"name": format!("app-{i}"), "annotations": {"example.test/notes": "n".repeat(ANNOTATION)}},
                    "spec": {"ingressClassName": t.ns, "rules": [{"host": format!("app-{i}.example.test"), "http": {"paths": [{
                        "path": "/", "pathType": "Prefix",
                        "backend": {"service": {"name": "backend", "port": {"number": 80}}}
                    }]}}]}
                }))
                .expect("an Ingress");
                api.create(&PostParams::default(), &ingress).await.unwrap_or_else(|e| panic!("create app-{i}: {e}"));
            });
            stream::iter(creates).buffer_unordered(32).for_each(|()| async {}).await;
            let version = t.admin.apiserver_version().await.expect("the API server's version");
            let minor = version.minor.trim_end_matches('+').parse().expect("a minor version");
            (t.ns.clone(), minor)
        })
        .await
}

fn policies(class: &str) -> Policies {
    let yaml = format!("policies: [{{name: p, ingressClasses: [{class}], publishStatusAddress: 192.0.2.1}}]");
    parse_file("p.yaml", &yaml).expect("a policy")
}

/// The API server's count of finished cluster-wide requests of `verb` on Ingresses.
async fn requests(admin: &kube::Client, verb: &str) -> u64 {
    let request = hyper::Request::get("/metrics").body(Vec::new()).expect("a request");
    let text = admin.request_text(request).await.expect("the API server's metrics");
    let wanted = [r#"resource="ingresses""#, r#"scope="cluster""#, r#"subresource="""#, &format!(r#"verb="{verb}""#)];
    text.lines()
        .filter(|l| l.starts_with("apiserver_request_total{") && wanted.iter().all(|w| l.contains(w)))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum::<f64>() as u64
}

/// What one list through the reconciler's watch did: the cache, the most bytes held at once
/// during it and the bytes held after it, beyond what was held before.
async fn listed(client: kube::Client, policies: &Policies) -> (IngressCache, usize, usize) {
    let before = HELD.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    let cache =
        tokio::time::timeout(Duration::from_secs(180), IngressCache::listed(client, policies)).await.expect("listed");
    let peak = PEAK.load(Ordering::Relaxed).saturating_sub(before);
    // The client's connections end on tasks of their own once it is dropped.
    tokio::time::sleep(Duration::from_secs(1)).await;
    (cache, peak, HELD.load(Ordering::Relaxed).saturating_sub(before))
}

/// How [`rewritten`] changes the watch requests that ask for a streaming list.
#[derive(Clone, Copy)]
enum Rewrite {
    /// Answers them 422 Invalid, as Kubernetes 1.31 does (the WatchList gate off).
    Refuse,
    /// Drops their streaming parameters and bookmarks (1.37 sends the initial-events-end
    /// bookmark to a watch from resourceVersion 0 with bookmarks even without
    /// `sendInitialEvents`) and asks the API server to end them after a second: as a server
    /// that ignores `sendInitialEvents` answers, the objects and never the bookmark.
    Ignore,
}

/// A client like `admin` whose streaming-list requests are rewritten as `how` says.
fn rewritten(admin: &kube::Client, how: Rewrite) -> kube::Client {
    let admin = admin.clone();
    let service = tower::service_fn(move |mut request: hyper::Request<kube::client::Body>| {
        let admin = admin.clone();
        async move {
            let query = request.uri().query().unwrap_or_default().to_owned();
            if !query.split('&').any(|p| p == "sendInitialEvents=true") {
                return admin.send(request).await;
            }
            match how {
                Rewrite::Refuse => {
                    let status = json!({
                        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "reason": "Invalid", "code": 422,
                        "message": "ListOptions.meta.k8s.io \"\" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled",
                        "details": {"group": "meta.k8s.io", "kind": "ListOptions", "causes": [{"reason": "FieldValueForbidden", "message": "Forbidden: sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled", "field": "sendInitialEvents"}]},
                    });
                    let body = kube::client::Body::from(serde_json::to_vec(&status).expect("JSON"));
                    Ok(hyper::Response::builder()
                        .status(422)
                        .header("content-type", "application/json")
                        .body(body)
                        .expect("a response"))
                }
                Rewrite::Ignore => {
                    let kept: Vec<String> = query
                        .split('&')
                        .filter(|p| {
                            !["sendInitialEvents=", "resourceVersionMatch=", "allowWatchBookmarks="]
                                .iter()
                                .any(|dropped| p.starts_with(dropped))
                        })
                        .map(|p| {
                            if p.starts_with("timeoutSeconds=") { "timeoutSeconds=1".to_owned() } else { p.to_owned() }
                        })
                        .collect();
                    let uri = format!("{}?{}", request.uri().path(), kept.join("&"));
                    *request.uri_mut() = uri.parse().expect("a URI");
                    admin.send(request).await
                }
            }
        }
    });
    kube::Client::new(service, "default")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watch_of_every_ingress_streams_its_list_where_served_and_pages_it_where_refused() {
    let _turn = TURN.lock().await;
    let t = TestEnv::new("stream-list").await;
    let (class, minor) = created(&t).await;
    let policies = policies(class);
    let (lists, watches) = (requests(&t.admin, "LIST").await, requests(&t.admin, "WATCH").await);

    let (cache, peak, steady) = listed(t.cluster.admin().await, &policies).await;
    assert_eq!(cache.held(), INGRESSES, "every Ingress of the class");
    // A watch is counted when it ends: the client ended it when it was dropped.
    let deadline = Instant::now() + Duration::from_secs(30);
    while requests(&t.admin, "WATCH").await == watches {
        assert!(Instant::now() < deadline, "the API server counted no watch of Ingresses");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let listed_pages = requests(&t.admin, "LIST").await - lists;
    let strategy = if cache.streamed() { "a streaming list" } else { "pages" };
    eprintln!("v1.{minor}: {strategy}, {listed_pages} LIST calls, peak {peak} bytes for {INGRESSES} Ingresses");
    match cache.streamed() {
        true => assert_eq!(listed_pages, 0, "a streaming list makes no LIST call"),
        false => assert!(listed_pages >= INGRESSES.div_ceil(500) as u64, "pages of 500: {listed_pages} LIST calls"),
    }
    // What each version answered (docs/scaling.md): 1.23 refuses resourceVersionMatch on a
    // watch, 1.31 has the WatchList gate off, 1.37 serves streaming lists.
    match minor {
        ..=31 => assert!(!cache.streamed(), "Kubernetes 1.{minor} does not serve streaming lists by default"),
        37.. => assert!(cache.streamed(), "Kubernetes 1.{minor} serves streaming lists"),
        _ => {}
    }
    drop(cache);
    if *minor < 37 {
        return;
    }
    // The same Ingresses in pages, as an API server that refuses streaming lists serves them.
    let lists = requests(&t.admin, "LIST").await;
    let (paged, paged_peak, _) = listed(rewritten(&t.admin, Rewrite::Refuse), &policies).await;
    assert!(!paged.streamed(), "a 422 naming sendInitialEvents falls back to pages");
    assert_eq!(paged.held(), INGRESSES);
    assert!(requests(&t.admin, "LIST").await - lists >= INGRESSES.div_ceil(500) as u64, "in pages");
    eprintln!(
        "held after the list: {steady} bytes; peak during it: streaming {peak} bytes, pages {paged_peak} bytes ({INGRESSES} Ingresses, {ANNOTATION}-byte annotations)"
    );
    assert!(peak < paged_peak, "a streaming list holds one object at a time, a page 500: {peak} vs {paged_peak}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streaming_list_that_never_ends_falls_back_to_pages() {
    let _turn = TURN.lock().await;
    let t = TestEnv::new("stream-never").await;
    let (class, _) = created(&t).await;
    let lists = requests(&t.admin, "LIST").await;
    let (cache, _, _) = listed(rewritten(&t.admin, Rewrite::Ignore), &policies(class)).await;
    assert!(!cache.streamed(), "streaming lists without their bookmark are given up for pages");
    assert_eq!(cache.held(), INGRESSES, "and the pages list every Ingress");
    assert!(requests(&t.admin, "LIST").await > lists, "in LIST calls");
}
