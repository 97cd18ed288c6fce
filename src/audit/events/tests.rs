//! The reporter against real parts where it can: a kube client pointed at a listener that
//! accepts connections and never answers (a stalled API server), and the known-Ingress index
//! fed the watcher events a watch would give it.

use std::sync::Arc;

use kube::runtime::watcher::Event::{Init, InitApply, InitDone};

use super::*;
use crate::audit::tests::sample;
use crate::{kind::Kind, sources::known::KnownObjects};

/// A client whose every request hangs: the listener accepts and then never reads or answers.
/// The accepted sockets are kept by the returned task, so they stay open.
async fn stalled_client() -> (Client, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url: axum::http::Uri = format!("http://{}", listener.local_addr().unwrap()).parse().unwrap();
    let held = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            open.push(socket);
        }
    });
    let config = kube::Config::new(url);
    (Client::try_from(config).unwrap(), held)
}

/// A publisher with the Ingress index `known` and no Gateways known.
fn publisher(client: kube::Client, known: Arc<KnownObjects>) -> Option<Publisher> {
    let mut indexes = crate::sources::known::by_kind();
    indexes[Kind::Ingress.index()] = known;
    Some(Publisher { client, known: indexes })
}

fn index_of(ingresses: &[(&str, &str, &str)]) -> Arc<KnownObjects> {
    let index = KnownObjects::new();
    index.apply(Init);
    for (ns, name, uid) in ingresses {
        index.apply(InitApply((((*ns).to_owned(), (*name).to_owned()), (*uid).to_owned())));
    }
    index.apply(InitDone);
    index
}

/// The value of one sample line of `metrics` (`name{labels}`), 0 when absent.
fn sample_value(metrics: &Metrics, line: &str) -> f64 {
    metrics.encode().lines().find_map(|l| l.strip_prefix(line).and_then(|rest| rest.trim().parse().ok())).unwrap_or(0.0)
}

/// Waits (at most `tries` × 50 ms) until `metric` reaches `want`; returns what it was last.
async fn settle(metrics: &Metrics, metric: &str, want: f64, tries: usize) -> f64 {
    for _ in 0..tries {
        if sample_value(metrics, metric) >= want {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    sample_value(metrics, metric)
}

const FULL: &str = "ingress_status_guard_findings_logged_total{line=\"full\"}";
const REPEAT: &str = "ingress_status_guard_findings_logged_total{line=\"repeat\"}";

#[tokio::test]
async fn a_hung_event_publish_does_not_stop_later_findings() {
    let (client, _held) = stalled_client().await;
    let metrics = Arc::new(Metrics::new());
    let known = index_of(&[("ns", "web", "uid-web")]);
    // A publish that never times out within the test: the first Event hangs for good.
    let settings = Settings { publish_timeout: Duration::from_secs(3600), ..Settings::default() };
    let shutdown = CancellationToken::new();
    let (sink, task) = start(publisher(client, known), None, metrics.clone(), settings, shutdown.clone());
    let task = tokio::spawn(task);
    for i in 0..20 {
        sink.publish(sample(&format!("writer-{i}"), "ns", "web", "uid-web"));
    }
    // Repeats of one writer are counted, not logged, hung publisher or not.
    for _ in 0..5 {
        sink.publish(sample("writer-0", "ns", "web", "uid-web"));
    }
    assert_eq!(settle(&metrics, FULL, 20.0, 200).await, 20.0, "{}", metrics.encode());
    assert_eq!(settle(&metrics, REPEAT, 5.0, 200).await, 5.0, "{}", metrics.encode());
    let published = sample_value(&metrics, "ingress_status_guard_kubernetes_events_total{result=\"published\"}");
    assert_eq!(published, 0.0, "nothing can be written to a stalled API server");
    shutdown.cancel();
    drop(sink);
    // The hung publish is the task's own: it runs on until its owner's grace ends.
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!task.is_finished(), "the publisher is still flushing");
    task.abort();
}

/// The publisher is part of the reporter's task: the task ends only once the Events queued
/// before shutdown have been tried (here, each timed out against a stalled API server).
#[tokio::test]
async fn the_task_ends_after_the_queued_events_are_tried() {
    let (client, _held) = stalled_client().await;
    let metrics = Arc::new(Metrics::new());
    let known = index_of(&[("ns", "web", "uid-web")]);
    let settings = Settings { publish_timeout: Duration::from_millis(100), ..Settings::default() };
    let shutdown = CancellationToken::new();
    let (sink, task) = start(publisher(client, known), None, metrics.clone(), settings, shutdown.clone());
    let task = tokio::spawn(task);
    sink.publish(sample("a", "ns", "web", "uid-web"));
    sink.publish(sample("b", "ns", "web", "uid-web"));
    // Logged, so offered to the publisher.
    assert_eq!(settle(&metrics, FULL, 2.0, 200).await, 2.0, "{}", metrics.encode());
    shutdown.cancel();
    drop(sink);
    task.await.unwrap();
    let timed_out = "ingress_status_guard_kubernetes_events_total{result=\"timed_out\"}";
    assert_eq!(sample_value(&metrics, timed_out), 2.0, "{}", metrics.encode());
}

#[tokio::test]
async fn a_stalled_publish_times_out_and_the_next_is_tried() {
    let (client, _held) = stalled_client().await;
    let metrics = Arc::new(Metrics::new());
    let known = index_of(&[("ns", "web", "uid-web")]);
    let settings = Settings { publish_timeout: Duration::from_millis(100), ..Settings::default() };
    let shutdown = CancellationToken::new();
    let (sink, task) = start(publisher(client, known), None, metrics.clone(), settings, shutdown.clone());
    let task = tokio::spawn(task);
    sink.publish(sample("a", "ns", "web", "uid-web"));
    sink.publish(sample("b", "ns", "web", "uid-web"));
    let timed_out = "ingress_status_guard_kubernetes_events_total{result=\"timed_out\"}";
    assert_eq!(settle(&metrics, timed_out, 2.0, 400).await, 2.0, "{}", metrics.encode());
    shutdown.cancel();
    drop(sink);
    task.await.unwrap();
}

#[tokio::test]
async fn forged_targets_get_no_event() {
    let (client, _held) = stalled_client().await;
    let metrics = Arc::new(Metrics::new());
    let known = index_of(&[("ns", "web", "uid-web")]);
    let shutdown = CancellationToken::new();
    let (sink, task) =
        start(publisher(client, known.clone()), None, metrics.clone(), Settings::default(), shutdown.clone());
    let task = tokio::spawn(task);
    sink.publish(sample("forger", "ns", "ghost-0", "uid-web"));
    sink.publish(sample("forger", "no-such-namespace", "web", "uid-web"));
    sink.publish(sample("forger", "ns", "web", "not-the-uid"));
    // An Ingress created a moment ago, whose first status write beat its watch event.
    sink.publish(sample("controller", "ns", "new", "uid-new"));
    tokio::time::sleep(Duration::from_millis(100)).await;
    known.apply(kube::runtime::watcher::Event::Apply((("ns".into(), "new".into()), "uid-new".into())));
    // The forged three wait for the index as long as a new Ingress may, then are skipped.
    let skipped = "ingress_status_guard_events_skipped_total{reason=\"unknown_object\"}";
    assert_eq!(settle(&metrics, skipped, 3.0, 400).await, 3.0, "{}", metrics.encode());
    // The new Ingress's finding reached the publisher (which hangs on the stalled listener).
    let limited = "ingress_status_guard_kubernetes_events_total{result=\"rate_limited\"}";
    assert_eq!(sample_value(&metrics, limited), 0.0);
    assert_eq!(sample_value(&metrics, FULL), 4.0, "every finding is still logged");
    shutdown.cancel();
    drop(sink);
    task.await.unwrap();
}

#[tokio::test]
async fn no_event_before_the_index_has_listed() {
    let (client, _held) = stalled_client().await;
    let metrics = Arc::new(Metrics::new());
    let shutdown = CancellationToken::new();
    let (sink, task) =
        start(publisher(client, KnownObjects::new()), None, metrics.clone(), Settings::default(), shutdown.clone());
    let task = tokio::spawn(task);
    sink.publish(sample("controller", "ns", "web", "uid-web"));
    let not_synced = "ingress_status_guard_events_skipped_total{reason=\"not_synced\"}";
    assert_eq!(settle(&metrics, not_synced, 1.0, 200).await, 1.0, "{}", metrics.encode());
    assert_eq!(sample_value(&metrics, FULL), 1.0, "logged all the same");
    shutdown.cancel();
    drop(sink);
    task.await.unwrap();
}

#[tokio::test]
async fn a_finding_just_before_the_first_list_waits_for_it() {
    let (client, _held) = stalled_client().await;
    let metrics = Arc::new(Metrics::new());
    let known = KnownObjects::new();
    let shutdown = CancellationToken::new();
    let publisher = publisher(client, known.clone()).unwrap();
    let (sink, task) = start(Some(publisher), None, metrics.clone(), Settings::default(), shutdown.clone());
    let task = tokio::spawn(task);
    sink.publish(sample("controller", "ns", "web", "uid-web"));
    assert_eq!(settle(&metrics, FULL, 1.0, 200).await, 1.0);
    known.apply(Init);
    known.apply(InitApply((("ns".into(), "web".into()), "uid-web".into())));
    known.apply(InitDone);
    // Offered to the publisher (which hangs on the stalled listener), neither skipped nor limited.
    tokio::time::sleep(AWAIT_INDEX + Duration::from_millis(500)).await;
    let text = metrics.encode();
    assert!(!text.contains("events_skipped_total{"), "{text}");
    assert!(!text.contains("result=\"rate_limited\"} 1"), "{text}");
    shutdown.cancel();
    drop(sink);
    task.await.unwrap();
}

#[tokio::test]
async fn the_queue_is_bounded_in_bytes() {
    let metrics = Arc::new(Metrics::new());
    let shutdown = CancellationToken::new();
    // The task is never run: everything stays queued.
    let (sink, _task) = start(None, None, metrics.clone(), Settings::default(), shutdown);
    let mut fat = sample(&"w".repeat(512), "ns", "web", "uid-web");
    fat.writer.groups = vec!["g".repeat(256); 16];
    let weight = fat.weight();
    let fits = QUEUE_BYTES / weight;
    assert!(fits < QUEUE, "the byte bound is the one that bites: {fits} findings of {weight} bytes");
    for _ in 0..QUEUE {
        sink.publish(fat.clone());
    }
    let dropped = sample_value(&metrics, "ingress_status_guard_findings_dropped_total");
    assert_eq!(dropped, (QUEUE - fits) as f64, "{weight} bytes each");
    assert!(sink.bytes.load(Ordering::Relaxed) <= QUEUE_BYTES);
}

#[test]
fn a_burst_the_budget_allows_fits_the_publisher_queue() {
    assert!(PUBLISH_QUEUE as f64 > ratelimit::OVERALL.burst);
}

#[test]
fn a_full_queue_is_logged_at_once_then_at_most_every_ten_seconds() {
    assert!(log_due(NEVER, 0, 10_000), "the first drop gets a line, even at start-up");
    assert!(!log_due(5, 9_000, 10_000));
    assert!(log_due(5, 10_005, 10_000));
}
