//! The migration with the real successor (issue 50): Traefik v3.7.12 (`tests/traefik/build.sh`),
//! its Kubernetes ingress-nginx provider run outside the cluster against the suite's API
//! server, as the second controller of 20 Ingresses of class `nginx`, beside a legacy writer
//! standing in for ingress-nginx (which does not build from the Go module proxy). The steps of
//! docs/migration.md's "ingress-nginx and Traefik side by side" are these tests': the
//! coexistence with the guard's policy pinning ingress-nginx's address (and, as a control, the
//! same two controllers without the guard), `check` during the overlap, `cutover` to Traefik's
//! publish Service and `cutover --rollback`, and the coexistence enforced by the API server
//! alone in `--admission=policy` with the guard SIGKILLed.
//!
//! Traefik writes a status with `UpdateStatus` when the status in its cache is not its own
//! address, for every Ingress, each time a watch event makes it rebuild its configuration. A
//! write the guard rewrites to the stored value stores nothing new, so it makes no event:
//! Traefik writes again only when something else changes. The tests count its writes (the API
//! server's audit log) against the watch events it received (watches of the same kinds), never
//! against time. The test with `trustedWriters: [Traefik's ServiceAccount]` waits for that
//! source (issue 48).

use crate::support;

mod controllers;

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::networking::v1::Ingress;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};

use crate::cutover::harness::{BINARY, Kubelet, lb_service, run, start_guard_with};
use controllers::{
    EventCount, INGRESSES, LEGACY_IP, LEGACY_SERVICE, LEGACY_USER, LegacyWriter, StatusWatch, TRAEFIK_IP,
    TRAEFIK_SERVICE, Traefik, class_of, create_ingresses, ensure_nginx_class, names, patched_by_webhook, status_writes,
    webhook_verdict, written,
};
use support::{FailurePolicy, TestEnv, Webhook, addresses, eventually};

/// How long a step that settles by itself may take on a loaded 2-core machine (a failure
/// message, never a measured bound).
const SETTLE: Duration = Duration::from_secs(180);
/// ingress-nginx's status sync runs every 60 s; the stand-in's, every 2 s.
const LEGACY_PERIOD: Duration = Duration::from_secs(2);
/// Annotation changes made while both controllers run (a deploy touching an Ingress): each is
/// an event Traefik watches.
const TOUCHES: usize = 3;
/// The legacy writer's sweeps in the quiet phase, where nothing Traefik watches changes.
const QUIET_SWEEPS: u64 = 5;

/// The policy of docs/migration.md's recipe: class `nginx`, pinned to ingress-nginx's publish
/// Service; limited to the test's namespace, since other tests' Ingresses of class `nginx`
/// share the API server.
fn policy(t: &TestEnv, name: &str) -> String {
    format!(
        "policies:\n  - name: {name}\n    ingressClasses: [nginx]\n    publishService: {ns}/{LEGACY_SERVICE}\n    namespaceSelector: \"{label}={ns}\"\n",
        ns = t.ns,
        label = support::cluster::NAMESPACE_LABEL,
    )
}

/// Both publish Services (ingress-nginx's at `LEGACY_IP`, Traefik's at `TRAEFIK_IP`) and the
/// IngressClass `nginx`.
async fn publish_services(t: &TestEnv) {
    let services: Api<Service> = Api::namespaced(t.admin.clone(), &t.ns);
    lb_service(&services, LEGACY_SERVICE, LEGACY_IP).await;
    lb_service(&services, TRAEFIK_SERVICE, TRAEFIK_IP).await;
    ensure_nginx_class(&t.admin).await;
}

/// Waits until every Ingress of `names` stores `want`.
async fn await_all(t: &TestEnv, names: &[String], want: &str, what: &str) {
    eventually(&format!("{} Ingresses store {want} ({what})", names.len()), SETTLE, || async {
        let list = t.ingresses.list(&Default::default()).await.map_err(|e| e.to_string())?;
        let off: Vec<String> = list
            .items
            .iter()
            .filter(|i| names.contains(i.metadata.name.as_ref().unwrap()) && addresses(i) != [want])
            .map(|i| format!("{}: {:?}", i.metadata.name.clone().unwrap_or_default(), addresses(i)))
            .collect();
        if off.is_empty() { Ok(()) } else { Err(format!("{} off, e.g. {:?}", off.len(), off.first())) }
    })
    .await;
}

/// The guard of the webhook tests, as docs/migration.md installs it: the policy in a ConfigMap
/// (the test plays the kubelet), the reconciler on, the webhook registered for the namespace;
/// then the 20 Ingresses, all storing ingress-nginx's address.
async fn guarded(t: &TestEnv) -> (Webhook, Kubelet) {
    publish_services(t).await;
    let (guard, kubelet) = start_guard_with(t, &policy(t, "ingress-nginx"), None).await;
    guard.register(&t.admin, &t.ns, FailurePolicy::Fail).await;
    t.await_governed(&guard, &names()[0], class_of(0), &[LEGACY_IP]).await;
    create_ingresses(t, true).await;
    await_all(t, &names(), LEGACY_IP, "the reconciler").await;
    (guard, kubelet)
}

/// Traefik's write count once it stays the same over two sweeps of the legacy writer (a round
/// of its writes is spaced by its client's rate limit, 5 a second), or after 12 sweeps (without
/// the guard it never does: every sweep makes it write again).
async fn settled(t: &TestEnv, traefik: &Traefik, legacy: &LegacyWriter) -> usize {
    let mut last = status_writes(t, &traefik.user).len();
    let mut stable = 0;
    for _ in 0..12 {
        legacy.await_sweeps(1).await;
        let now = status_writes(t, &traefik.user).len();
        stable = if now == last { stable + 1 } else { 0 };
        last = now;
        if stable == 2 {
            break;
        }
    }
    last
}

/// What one coexistence run counted.
struct Coexistence {
    /// Traefik's status writes (audit events), all of them.
    writes: Vec<Value>,
    /// Watch events Traefik received (counted by watches of the same kinds).
    events: u64,
    /// Of Traefik's writes, those made in the quiet phase, and the events of that phase.
    quiet_writes: usize,
    quiet_events: u64,
    /// Changes of a stored status seen by the watch, for the whole run.
    changes: Vec<(String, Vec<String>)>,
    /// The legacy writer's writes.
    legacy_writes: u64,
    /// Ingress events that changed neither spec, metadata nor status: only `managedFields`
    /// (the API server records a manager's first write of a field even when the write stores
    /// the value already there).
    bookkeeping: u64,
}

/// Both controllers on the 20 Ingresses, with whatever enforces (or not) already in place:
/// the watches start, then the legacy writer, then Traefik. Traefik's first round of writes,
/// `TOUCHES` annotation changes (each waited for until Traefik has written again), then
/// `QUIET_SWEEPS` sweeps of the legacy writer in which nothing changes unless a write lands.
async fn coexist(t: &TestEnv) -> Coexistence {
    let watch = StatusWatch::start(t);
    let counted = EventCount::start(t);
    eventually("the watches listed the Ingresses", SETTLE, || async {
        if watch.synced() && counted.synced() { Ok(()) } else { Err("not yet".to_owned()) }
    })
    .await;
    let legacy = LegacyWriter::start(t, LEGACY_PERIOD).await;
    let mut traefik = Traefik::start(t).await;
    eventually(
        &format!("Traefik writes the status of every Ingress (its log: {})", traefik.log_path().display()),
        SETTLE,
        || async {
            let mut seen: Vec<String> = status_writes(t, &traefik.user)
                .iter()
                .filter_map(|e| e["objectRef"]["name"].as_str().map(str::to_owned))
                .collect();
            seen.sort();
            seen.dedup();
            if seen.len() >= INGRESSES { Ok(()) } else { Err(format!("{} written", seen.len())) }
        },
    )
    .await;
    let ingresses: Api<Ingress> = Api::namespaced(t.admin.clone(), &t.ns);
    for touch in 0..TOUCHES {
        let before = settled(t, &traefik, &legacy).await;
        let patch = json!({"metadata": {"annotations": {"example.test/deployed": touch.to_string()}}});
        ingresses.patch(&names()[1], &PatchParams::default(), &Patch::Merge(&patch)).await.expect("annotate");
        eventually(&format!("Traefik writes again after change {touch}"), SETTLE, || async {
            let now = status_writes(t, &traefik.user).len();
            if now > before { Ok(()) } else { Err(format!("{now} writes")) }
        })
        .await;
    }
    let quiet_from = settled(t, &traefik, &legacy).await;
    let events_from = counted.events();
    legacy.await_sweeps(QUIET_SWEEPS).await;
    traefik.assert_running();
    traefik.stop();
    let writes = status_writes(t, &traefik.user);
    let quiet_events = counted.events() - events_from;
    Coexistence {
        quiet_writes: writes.len() - quiet_from,
        quiet_events,
        events: counted.events(),
        writes,
        changes: watch.changes(),
        legacy_writes: legacy.writes.load(std::sync::atomic::Ordering::Relaxed),
        bookkeeping: counted.bookkeeping.load(std::sync::atomic::Ordering::Relaxed),
    }
}

/// The bound that says Traefik does not loop: it writes at most every Ingress once per watch
/// event it received, over the run and over the quiet phase alone (where there are next to no
/// events, and a loop would write anyway).
fn assert_no_loop(run: &Coexistence) {
    let bound = |events: u64| INGRESSES * usize::try_from(events).unwrap();
    assert!(
        run.writes.len() <= bound(run.events),
        "Traefik wrote {} times for {} watch events",
        run.writes.len(),
        run.events
    );
    assert!(
        run.quiet_writes <= bound(run.quiet_events),
        "Traefik wrote {} times in the quiet phase, with {} watch events",
        run.quiet_writes,
        run.quiet_events
    );
}

fn report(what: &str, run: &Coexistence) {
    eprintln!(
        "{what}: Traefik wrote {} statuses ({} in the quiet phase of {QUIET_SWEEPS} legacy sweeps) for {} watch events \
         ({} in the quiet phase; {} Ingress events changed only managedFields); the legacy writer wrote {}; \
         stored statuses changed {} times",
        run.writes.len(),
        run.quiet_writes,
        run.events,
        run.quiet_events,
        run.bookkeeping,
        run.legacy_writes,
        run.changes.len()
    );
}

/// The coexistence of docs/migration.md's recipe: the policy pins ingress-nginx's address;
/// Traefik publishes its own. Every stored status stays ingress-nginx's for the whole run
/// (watched); each of Traefik's writes is rewritten and attributed to its ServiceAccount
/// (audit annotation, metric, Event); Traefik writes only when it received a watch event, and
/// `check` reports no drift.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn coexistence_every_status_stays_ingress_nginxs_and_traefik_does_not_loop() {
    let t = TestEnv::new("traefik-co").await;
    let (guard, _kubelet) = guarded(&t).await;
    let run = coexist(&t).await;
    report("with the guard", &run);

    assert_eq!(run.changes, Vec::<(String, Vec<String>)>::new(), "no stored status changed");
    assert_eq!(run.legacy_writes, 0, "the legacy writer found its address everywhere");
    assert_no_loop(&run);
    // Each touch made Traefik rebuild and write every Ingress again (its cache never holds its
    // own address): a first round and one per touch.
    assert!(run.writes.len() >= INGRESSES * (1 + TOUCHES), "{} writes", run.writes.len());
    for write in &run.writes {
        assert_eq!(write["verb"], "update", "UpdateStatus: {write}");
        assert_eq!(write["responseStatus"]["code"], 200, "allowed, rewritten: {write}");
        assert_eq!(written(write), [TRAEFIK_IP], "Traefik asked for its own address: {write}");
        assert!(patched_by_webhook(write), "the webhook rewrote it: {write}");
        // The guard's own audit annotations, which the API server prefixes with its name.
        assert_eq!(guard_annotation(write, "action").as_deref(), Some("patched"), "{write}");
        assert_eq!(guard_annotation(write, "attempted").as_deref(), Some(TRAEFIK_IP), "{write}");
        assert_eq!(guard_annotation(write, "canonical").as_deref(), Some(LEGACY_IP), "{write}");
    }
    await_all(&t, &names(), LEGACY_IP, "after the run").await;

    // Attributed to Traefik's ServiceAccount: the metric, and an Event on an Ingress.
    let metric = format!(
        "ingress_status_guard_rogue_writes_total{{policy=\"ingress-nginx\",writer=\"{}\",action=\"patched\"}}",
        run.writes.first().map(|w| w["user"]["username"].as_str().unwrap_or_default()).unwrap_or_default()
    );
    let counted = guard.metric(&metric);
    eprintln!("{metric} {counted}");
    assert!(counted >= run.writes.len() as f64, "{metric}: {counted} for {} writes", run.writes.len());
    let wrote = format!(
        "system:serviceaccount:{}:traefik wrote status.loadBalancer.ingress [{TRAEFIK_IP}]; policy ingress-nginx requires [{LEGACY_IP}]; rewritten",
        t.ns
    );
    let note = eventually("an Event names Traefik's ServiceAccount", SETTLE, || async {
        let events = Api::<k8s_openapi::api::events::v1::Event>::namespaced(t.admin.clone(), &t.ns)
            .list(&Default::default())
            .await
            .map_err(|e| e.to_string())?;
        let notes: Vec<String> = events.items.into_iter().filter_map(|e| e.note).collect();
        notes.iter().find(|n| n.contains("traefik")).cloned().ok_or_else(|| format!("{notes:?}"))
    })
    .await;
    assert_eq!(note, wrote);

    // `check` during the overlap: every Ingress OK.
    let config = t.cluster.scratch_dir("traefik-check").join("config.yaml");
    std::fs::write(&config, policy(&t, "ingress-nginx")).unwrap();
    let check = check(&t, &config).await;
    assert_eq!(check.code, Some(0), "{}{}", check.stdout, check.stderr);
    assert!(
        check.stdout.contains(&format!("governed Ingresses: {INGRESSES} ({INGRESSES} OK, 0 DRIFT, 0 UNRESOLVED)")),
        "{}",
        check.stdout
    );
}

/// `check --config FILE -n NS` as the administrator.
async fn check(t: &TestEnv, config: &Path) -> crate::cutover::harness::Run {
    let args = [
        "check".to_owned(),
        format!("--kubeconfig={}", t.cluster.admin_kubeconfig().display()),
        format!("--config={}", config.display()),
        format!("--namespace={}", t.ns),
    ];
    run(BINARY, &args, None).await
}

/// The control: the same two controllers and Ingresses without the guard. Every sweep of the
/// legacy writer puts its address back, and each time Traefik rebuilds and writes its own: the
/// statuses flip. The numbers are the "without the guard" of the closing note.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_guard_the_two_controllers_flip_every_status() {
    let t = TestEnv::new("traefik-no-guard").await;
    publish_services(&t).await;
    create_ingresses(&t, false).await;
    let run = coexist(&t).await;
    report("without the guard", &run);
    // The fight: the legacy writer wrote in the quiet phase, and Traefik wrote back.
    assert!(run.legacy_writes > INGRESSES as u64, "the legacy writer rewrote statuses: {}", run.legacy_writes);
    assert!(run.quiet_writes > 0, "Traefik wrote back in the quiet phase");
    assert!(run.changes.len() > 2 * INGRESSES, "the statuses flipped: {} changes", run.changes.len());
    assert_no_loop(&run);
}

/// The guard's audit annotation `key` on an audit event (`<webhook name>/<key>`).
fn guard_annotation(event: &Value, key: &str) -> Option<String> {
    let suffix = format!(".e2e.ingress-status-guard.test/{key}");
    let (_, value) = event["annotations"].as_object()?.iter().find(|(k, _)| k.ends_with(&suffix))?;
    value.as_str().map(str::to_owned)
}

/// An audit event's timestamp.
fn timestamp(value: &Value) -> k8s_openapi::jiff::Timestamp {
    value.as_str().and_then(|t| t.parse().ok()).unwrap_or_else(|| panic!("not a timestamp: {value}"))
}

/// The audit events of `user`'s status writes made after the first `from`.
fn since(t: &TestEnv, user: &str, from: usize) -> Vec<Value> {
    status_writes(t, user).into_iter().skip(from).collect()
}

/// `cutover` of policy `ingress-nginx` in the test's ConfigMap with `args`.
async fn cutover(t: &TestEnv, args: &[&str]) -> crate::cutover::harness::Run {
    let mut all = vec![
        "cutover".to_owned(),
        format!("--kubeconfig={}", t.cluster.admin_kubeconfig().display()),
        format!("--config-map={}/{}", t.ns, crate::cutover::harness::CONFIG_MAP),
        "--policy=ingress-nginx".to_owned(),
    ];
    all.extend(args.iter().map(|a| (*a).to_owned()));
    run(BINARY, &all, None).await
}

/// The move of docs/migration.md's recipe, with both controllers running: `cutover` points the
/// policy at Traefik's publish Service and every Ingress follows; Traefik's writes then stand
/// as written, and the legacy writer's are rewritten; `cutover --rollback` moves every
/// Ingress back, and Traefik's writes are rewritten again. No stored status is ever anything
/// but one of the two addresses.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cutover_moves_every_ingress_to_traefik_and_rollback_moves_them_back() {
    let t = TestEnv::new("traefik-move").await;
    let (guard, _kubelet) = guarded(&t).await;
    let watch = StatusWatch::start(&t);
    eventually("the watch listed the Ingresses", SETTLE, || async {
        if watch.synced() { Ok(()) } else { Err("not yet".to_owned()) }
    })
    .await;
    let legacy = LegacyWriter::start(&t, LEGACY_PERIOD).await;
    let mut traefik = Traefik::start(&t).await;
    let user = traefik.user.clone();
    eventually("Traefik writes every Ingress, rewritten", SETTLE, || async {
        let n = status_writes(&t, &user).len();
        if n >= INGRESSES { Ok(()) } else { Err(format!("{n} writes")) }
    })
    .await;
    assert!(status_writes(&t, &user).iter().all(patched_by_webhook), "every write of Traefik's rewritten");

    // The move. The cutover's ConfigMap change is itself an event Traefik watches: its writes
    // until the guard has reloaded are still rewritten; once the guard moves the Ingresses (its
    // first patch to Traefik's address), Traefik's writes stand as written. The guard's
    // patches are events too, so Traefik writes the Ingresses not moved yet; a write from a
    // cache that has not seen the guard's patch is refused for its stale resourceVersion
    // (409) after the webhook's verdict.
    let (traefik_from, legacy_from) = (status_writes(&t, &user).len(), status_writes(&t, LEGACY_USER).len());
    let to = format!("--to-publish-service={}/{TRAEFIK_SERVICE}", t.ns);
    let moved = cutover(&t, &[&to]).await;
    assert_eq!(moved.code, Some(0), "{}{}", moved.stdout, moved.stderr);
    assert!(moved.stdout.contains(&format!("done: {INGRESSES}/{INGRESSES} moved")), "{}", moved.stdout);
    await_all(&t, &names(), TRAEFIK_IP, "after cutover").await;
    settled(&t, &traefik, &legacy).await;
    let first_move = t
        .cluster
        .audit_events()
        .into_iter()
        .filter(|e| {
            e["objectRef"]["namespace"] == t.ns.as_str()
                && e["verb"] == "patch"
                && e["requestURI"].as_str().unwrap_or_default().contains("fieldManager=ingress-status-guard")
                && written(e) == [TRAEFIK_IP]
        })
        .map(|e| timestamp(&e["stageTimestamp"]))
        .min()
        .expect("the guard's patches of the move");
    let during = since(&t, &user, traefik_from);
    let stood: Vec<&Value> = during.iter().filter(|w| timestamp(&w["requestReceivedTimestamp"]) > first_move).collect();
    let codes: Vec<i64> = stood.iter().map(|w| w["responseStatus"]["code"].as_i64().unwrap_or_default()).collect();
    eprintln!(
        "the move: Traefik wrote {} statuses, {} of them after the guard's first patch (codes {codes:?})",
        during.len(),
        stood.len()
    );
    assert!(!stood.is_empty(), "Traefik wrote after the guard's first patch of the move: {during:?}");
    for write in &stood {
        assert_eq!(written(write), [TRAEFIK_IP], "{write}");
        assert_eq!(webhook_verdict(write), Some(false), "Traefik's write stands as written: {write}");
    }
    // The legacy writer's are rewritten: it finds its address nowhere and writes every sweep.
    legacy.await_sweeps(2).await;
    let legacy_writes = since(&t, LEGACY_USER, legacy_from);
    assert!(legacy_writes.len() >= INGRESSES, "{} writes of the legacy writer", legacy_writes.len());
    for write in legacy_writes.iter().filter(|w| timestamp(&w["requestReceivedTimestamp"]) > first_move) {
        assert_eq!(written(write), [LEGACY_IP], "{write}");
        assert!(patched_by_webhook(write), "the legacy writer's write rewritten: {write}");
    }
    let all = names();
    await_all(&t, &all, TRAEFIK_IP, "while the legacy writer writes").await;

    // The rollback: every Ingress back to ingress-nginx's address; Traefik's writes (each
    // move is an event it watches) rewritten again.
    let traefik_from = status_writes(&t, &user).len();
    let back = cutover(&t, &["--rollback"]).await;
    assert_eq!(back.code, Some(0), "{}{}", back.stdout, back.stderr);
    let n = INGRESSES;
    assert!(back.stdout.contains(&format!("done: {n}/{n} moved")), "{}", back.stdout);
    await_all(&t, &all, LEGACY_IP, "after the rollback").await;
    eventually("Traefik writes again after the rollback", SETTLE, || async {
        let n = since(&t, &user, traefik_from).len();
        if n > 0 { Ok(()) } else { Err("none yet".to_owned()) }
    })
    .await;
    settled(&t, &traefik, &legacy).await;
    let after = since(&t, &user, traefik_from);
    assert!(after.iter().all(patched_by_webhook), "Traefik's writes after the rollback rewritten: {after:?}");
    await_all(&t, &all, LEGACY_IP, "after the rollback, both controllers writing").await;

    // For good: cut over again, then remove ingress-nginx (its writer and its Service). The
    // policy stays, pinning Traefik's address; `check` finds nothing off.
    let again = cutover(&t, &[&to]).await;
    assert_eq!(again.code, Some(0), "{}{}", again.stdout, again.stderr);
    drop(legacy);
    Api::<Service>::namespaced(t.admin.clone(), &t.ns)
        .delete(LEGACY_SERVICE, &Default::default())
        .await
        .expect("delete ingress-nginx's Service");
    await_all(&t, &all, TRAEFIK_IP, "with ingress-nginx removed").await;
    let configmap = Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(t.admin.clone(), &t.ns)
        .get(crate::cutover::harness::CONFIG_MAP)
        .await
        .expect("the policy ConfigMap");
    let text = configmap.data.and_then(|mut d| d.remove("config.yaml")).expect("config.yaml");
    assert!(text.contains(&format!("publishService: {}/{TRAEFIK_SERVICE}", t.ns)), "{text}");
    let config = t.cluster.scratch_dir("traefik-move-check").join("config.yaml");
    std::fs::write(&config, &text).unwrap();
    let check = check(&t, &config).await;
    assert_eq!(check.code, Some(0), "{}{}", check.stdout, check.stderr);
    assert!(
        check.stdout.contains(&format!("governed Ingresses: {n} ({n} OK, 0 DRIFT, 0 UNRESOLVED)")),
        "{}",
        check.stdout
    );
    traefik.assert_running();
    traefik.stop();
    let off: Vec<_> =
        watch.changes().into_iter().filter(|(_, now)| now != &[LEGACY_IP] && now != &[TRAEFIK_IP]).collect();
    assert!(off.is_empty(), "a stored status other than the two addresses: {off:?}");
    eprintln!(
        "cutover and rollback: {} status changes seen; Traefik wrote {} statuses in all, the legacy writer {}; guard log {}",
        watch.changes().len(),
        status_writes(&t, &user).len(),
        status_writes(&t, LEGACY_USER).len(),
        guard.log_path().display()
    );
}

/// The coexistence in `--admission=policy` (the MutatingAdmissionPolicy GA on v1.37, the
/// suite's default): the leader renders the policy, then it is SIGKILLed, and the API server
/// alone keeps every stored status ingress-nginx's while both controllers write; Traefik does
/// not loop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_policy_mode_with_the_guard_killed_every_status_stays_ingress_nginxs() {
    let t = TestEnv::new("traefik-map").await;
    publish_services(&t).await;
    let dir = t.cluster.scratch_dir(&format!("traefik-map-{}", t.ns));
    let config = dir.join("config.yaml");
    // Admission policies are cluster-scoped and named after the guard's Lease
    // (`<lease>-ingress-0`): a Lease named after the namespace.
    std::fs::write(&config, policy(&t, &t.ns)).unwrap();
    let (config, lease_ns, lease) = (
        format!("--config={}", config.display()),
        format!("--leader-election-namespace={}", t.ns),
        format!("--leader-election-lease-name=isg-{}", t.ns),
    );
    let mut args = vec!["--admission=policy", "--reconcile", &config, &lease_ns, &lease];
    args.extend(support::guard::LEASE_FLAGS);
    let mut guard = t.start_webhook(&args).await;
    t.await_governed(&guard, &names()[0], class_of(0), &[LEGACY_IP]).await;
    create_ingresses(&t, true).await;
    await_all(&t, &names(), LEGACY_IP, "the reconciler").await;
    guard.stop();

    let run = coexist(&t).await;
    report("policy mode, the guard SIGKILLed", &run);
    assert_eq!(run.changes, Vec::<(String, Vec<String>)>::new(), "no stored status changed");
    assert_eq!(run.legacy_writes, 0, "the legacy writer found its address everywhere");
    assert_no_loop(&run);
    assert!(run.writes.len() >= INGRESSES * (1 + TOUCHES), "{} writes", run.writes.len());
    for write in &run.writes {
        assert_eq!(write["responseStatus"]["code"], 200, "allowed, rewritten by the API server: {write}");
        assert_eq!(written(write), [TRAEFIK_IP], "{write}");
    }
    await_all(&t, &names(), LEGACY_IP, "after the run").await;
}
