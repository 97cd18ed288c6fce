//! Leader election and fencing against the real kube-apiserver + etcd of `support` (issue 33,
//! items 6 and 10): a Lease that another controller keeps annotating after its leader died
//! is taken over by the holder's own lease duration, and a leader stalled in the middle of a
//! pass writes nothing once it has lost the Lease: no status patch, and in `--admission=policy`
//! no admission policy either. Each test governs only its own classes (named after its
//! namespace) and holds its own Lease.

use crate::support;

use std::{
    path::Path,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU32, Ordering},
    },
    time::Duration,
};

use k8s_openapi::{api::coordination::v1::Lease, jiff::Timestamp};
use kube::{
    Api,
    api::{Patch, PatchParams},
};
use serde_json::json;

use support::{Class, TestEnv, Webhook, create_ingress, eventually, stored, write_status};

const HEAL: Duration = Duration::from_secs(20);
const LEASE: &str = "ingress-status-guard";

/// `--reconcile=true` with a static address for this test's class, the Lease in its namespace,
/// the three lease durations and `extra`.
fn args(t: &TestEnv, lease: [&str; 3], extra: &[&str]) -> Vec<String> {
    let mut args = vec![
        "--reconcile=true".to_owned(),
        format!("--leader-election-namespace={}", t.ns),
        "--publish-status-address=192.0.2.10".to_owned(),
        format!("--ingress-class={}", t.ns),
        format!("--leader-election-lease-duration={}", lease[0]),
        format!("--leader-election-renew-deadline={}", lease[1]),
        format!("--leader-election-retry-period={}", lease[2]),
    ];
    args.extend(extra.iter().map(ToString::to_string));
    args
}

/// A replica authenticated as `user` (also its identity, `POD_NAME`).
async fn replica(t: &TestEnv, kubeconfig: &Path, user: &str, args: &[String]) -> Webhook {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    Webhook::start_with_env(t.cluster, &t.ns, kubeconfig, &args, &[("POD_NAME", user)]).await
}

async fn await_leading(webhook: &Webhook, timeout: Duration) {
    eventually(&format!("leads with a synced cache ({})", webhook.log_path().display()), timeout, || async {
        let leading = webhook.metric("ingress_status_guard_leader") == 1.0;
        if leading && webhook.log().contains("Ingress cache synced") { Ok(()) } else { Err("not yet".into()) }
    })
    .await;
}

async fn await_synced(webhook: &Webhook) {
    eventually("follows with a synced cache", HEAL, || async {
        if webhook.log().contains("Ingress cache synced") { Ok(()) } else { Err("not yet".into()) }
    })
    .await;
}

/// A kubeconfig for `user` (an administrator) that reaches the API server through a TCP proxy,
/// and the switch that stalls the proxy (holds every connection, forwarding nothing).
async fn behind_stalling_proxy(t: &TestEnv, user: &str) -> (std::path::PathBuf, Arc<AtomicBool>) {
    let stall = Arc::new(AtomicBool::new(false));
    let server = t.cluster.server.clone();
    let port = support::proxy::stalling_proxy(server.trim_start_matches("https://").to_owned(), stall.clone()).await;
    let direct = t.cluster.kubeconfig_for(user, Some("system:masters"));
    let proxied = direct.with_extension("proxied.yaml");
    let text = std::fs::read_to_string(&direct).unwrap().replace(&server, &format!("https://127.0.0.1:{port}"));
    std::fs::write(&proxied, text).unwrap();
    (proxied, stall)
}

async fn stale(t: &TestEnv, name: &str) {
    create_ingress(&t.ingresses, name, Class::Field(&t.ns)).await;
    write_status(&t.rogue, name, &["198.51.100.7"], false).await.expect("rogue write");
}

/// Issue 33, item 10: a non-leader judged expiry by the Lease's resourceVersion and by its own
/// `--leader-election-lease-duration`. Another controller annotating the Lease every 10 s
/// (here every second, under a 4 s lease) kept every replica waiting after the leader's
/// SIGKILL, and a replica with a longer lease setting than the holder's waited that long.
/// Now the holder's record and its `leaseDurationSeconds` decide: b, whose own setting is
/// 60 s, takes over while the annotations go on, and heals.
#[tokio::test]
async fn a_lease_annotated_after_the_leaders_sigkill_is_taken_over_by_the_holders_duration() {
    let t = TestEnv::new("leader-annotated").await;
    let users = ["isg-lease-a", "isg-lease-b"];
    let a_config = t.cluster.kubeconfig_for(users[0], Some("system:masters"));
    let mut a = replica(&t, &a_config, users[0], &args(&t, ["4s", "3s", "1s"], &[])).await;
    await_leading(&a, HEAL).await;
    let b_config = t.cluster.kubeconfig_for(users[1], Some("system:masters"));
    let b = replica(&t, &b_config, users[1], &args(&t, ["60s", "3s", "1s"], &[])).await;
    await_synced(&b).await;
    assert_eq!(b.metric("ingress_status_guard_leader"), 0.0, "a holds the Lease");

    let leases: Api<Lease> = Api::namespaced(t.admin.clone(), &t.ns);
    let touches = Arc::new(AtomicU32::new(0));
    let annotator = {
        let (leases, touches) = (leases.clone(), touches.clone());
        tokio::spawn(async move {
            loop {
                let n = touches.fetch_add(1, Ordering::SeqCst);
                let patch = json!({"metadata": {"annotations": {"example.test/touched": n.to_string()}}});
                leases.patch(LEASE, &PatchParams::default(), &Patch::Merge(&patch)).await.expect("annotate the Lease");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        })
    };
    let before = leases.get(LEASE).await.unwrap();
    a.stop();
    eventually("b leads though the Lease keeps changing", Duration::from_secs(30), || async {
        let leading = b.metric("ingress_status_guard_leader");
        if leading == 1.0 { Ok(()) } else { Err(format!("b leader {leading}")) }
    })
    .await;
    annotator.abort();
    let after = leases.get(LEASE).await.unwrap();
    assert!(touches.load(Ordering::SeqCst) >= 4, "the annotations went on while b waited");
    assert_ne!(before.metadata.resource_version, after.metadata.resource_version);
    let holder = after.spec.as_ref().and_then(|s| s.holder_identity.as_deref());
    assert_eq!(holder, Some(users[1]), "b holds the Lease");
    stale(&t, "after").await;
    eventually("the new leader heals", HEAL, || async {
        let got = stored(&t.ingresses, "after").await;
        if got == ["192.0.2.10"] { Ok(()) } else { Err(format!("{got:?}")) }
    })
    .await;
}

/// The reconciler's patches of Ingress `name`, as (user, when the API server received it).
fn patches(t: &TestEnv, name: &str) -> Vec<(String, Timestamp)> {
    t.cluster
        .ingress_status_audit(&t.ns, name)
        .into_iter()
        .filter(|e| {
            e["verb"] == "patch" && e["requestURI"].as_str().unwrap_or("").contains("fieldManager=ingress-status-guard")
        })
        .map(|e| {
            let at = e["requestReceivedTimestamp"].as_str().unwrap_or_default();
            (e["user"]["username"].as_str().unwrap_or_default().to_owned(), at.parse().expect("an audit timestamp"))
        })
        .collect()
}

/// Issue 33, item 6: a deposed leader must not finish its pass. Leader a works through a
/// backlog of stale Ingresses at 2 patches a second behind a TCP proxy; the proxy stalls in
/// the middle of it, b takes over, and the proxy passes again (so anything a still sent would
/// arrive). Every patch of a reached the API server before b acquired the Lease, and b heals
/// the rest.
#[tokio::test]
async fn a_leader_stalled_during_a_pass_writes_nothing_after_losing_the_lease() {
    let t = TestEnv::new("leader-fenced").await;
    let users = ["isg-fence-a", "isg-fence-b"];
    let names: Vec<String> = (0..40).map(|i| format!("web-{i}")).collect();
    for name in &names {
        stale(&t, name).await;
    }
    let (proxied, stall) = behind_stalling_proxy(&t, users[0]).await;
    let replica_args = args(&t, ["4s", "3s", "1s"], &["--reconcile-qps=2"]);
    let a = replica(&t, &proxied, users[0], &replica_args).await;
    await_leading(&a, HEAL).await;
    let b_config = t.cluster.kubeconfig_for(users[1], Some("system:masters"));
    let b = replica(&t, &b_config, users[1], &replica_args).await;
    await_synced(&b).await;

    let healed = || async {
        let mut n = 0;
        for name in &names {
            n += usize::from(stored(&t.ingresses, name).await == ["192.0.2.10"]);
        }
        n
    };
    eventually("a is in the middle of its pass", HEAL, || async {
        let n = healed().await;
        if n >= 3 { Ok(()) } else { Err(format!("{n} healed")) }
    })
    .await;
    stall.store(true, Ordering::SeqCst);
    let at_stall = healed().await;
    assert!(at_stall < names.len(), "the stall came mid-pass ({at_stall} of {} healed)", names.len());
    eventually("b takes over", Duration::from_secs(30), || async {
        let leading = b.metric("ingress_status_guard_leader");
        if leading == 1.0 { Ok(()) } else { Err(format!("b leader {leading}")) }
    })
    .await;
    let lease = Api::<Lease>::namespaced(t.admin.clone(), &t.ns).get(LEASE).await.unwrap();
    let spec = lease.spec.expect("the Lease's spec");
    assert_eq!(spec.holder_identity.as_deref(), Some(users[1]));
    let acquired = spec.acquire_time.expect("b's acquireTime").0;
    // a can reach the API server again: a write it still meant to send would now land.
    stall.store(false, Ordering::SeqCst);
    eventually("b heals the rest", Duration::from_secs(60), || async {
        let n = healed().await;
        if n == names.len() { Ok(()) } else { Err(format!("{n} healed")) }
    })
    .await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let (mut by_a, mut by_b) = (0, 0);
    for name in &names {
        for (user, at) in patches(&t, name) {
            if user == users[0] {
                by_a += 1;
                assert!(at < acquired, "{name}: a patched at {at}, after b acquired the Lease at {acquired}");
            } else {
                by_b += 1;
            }
        }
    }
    assert!(by_a >= 1 && by_b >= 1, "both led a part of the pass: a {by_a}, b {by_b}");
    assert_eq!(a.metric("ingress_status_guard_leader"), 0.0, "a stays deposed");
    assert!(a.log().contains("stepping down"), "a says why:\n{}", a.log_tail());
}

/// The admission policies and bindings of the Ingress slots of Lease `lease`
/// (`<lease>-ingress-<n>`): (kind, name, JSON).
fn admission_objects(t: &TestEnv, lease: &str) -> Vec<(String, String, serde_json::Value)> {
    let kinds = "mutatingadmissionpolicies,mutatingadmissionpolicybindings";
    let out = t.cluster.kubectl(t.cluster.admin_kubeconfig(), &["get", kinds, "-o", "json"]);
    assert!(out.success, "{}", out.stderr);
    let list: serde_json::Value = serde_json::from_str(&out.stdout).expect("kubectl JSON");
    let items = list["items"].as_array().cloned().unwrap_or_default();
    items
        .into_iter()
        .filter_map(|o| {
            let name = o["metadata"]["name"].as_str()?.to_owned();
            let kind = o["kind"].as_str()?.to_owned();
            name.starts_with(&format!("{lease}-ingress-")).then_some((kind, name, o))
        })
        .collect()
}

/// The address each MutatingAdmissionPolicy of Lease `lease` enforces is `ip`, and every binding is there.
fn admission_objects_carry(t: &TestEnv, lease: &str, count: usize, ip: &str) -> Result<(), String> {
    let objects = admission_objects(t, lease);
    let maps: Vec<_> = objects.iter().filter(|(kind, ..)| kind == "MutatingAdmissionPolicy").collect();
    let off: Vec<&String> = maps
        .iter()
        .filter(|(.., o)| !o["spec"]["mutations"][0]["jsonPatch"]["expression"].to_string().contains(ip))
        .map(|(_, name, _)| name)
        .collect();
    if maps.len() == count && objects.len() == 2 * count && off.is_empty() {
        Ok(())
    } else {
        Err(format!("{} objects, {} MAPs, not enforcing {ip}: {off:?}", objects.len(), maps.len()))
    }
}

/// Issue 33, item 6, in `--admission=policy`: the keeper's writes are fenced as the
/// reconciler's are. Leader a, behind a TCP proxy, is filling 20 Ingresses at 2 patches a
/// second when the proxy stalls; a reload of a's policy file (local, so a sees it while its
/// requests hang) starts a keeper pass that rewrites all 20 admission objects. b (direct, with
/// a value of its own) takes the Lease and writes its value; the proxy passes again, and more
/// than a's call deadline (10 s) later the API server's audit log holds no write of a's, to
/// Ingress status or to an admission object, received after b's `acquireTime`, and every
/// object enforces b's value. Without the fence a's keeper goes on with its pass once its hung
/// call times out, and overwrites b's objects with its reloaded value.
#[tokio::test]
async fn a_leader_stalled_behind_a_proxy_writes_no_admission_object_or_status_after_losing_the_lease() {
    let t = TestEnv::new("leader-keeper").await;
    let admin = t.cluster.admin_kubeconfig();
    let resources = t.cluster.kubectl(admin, &["api-resources", "--api-group=admissionregistration.k8s.io"]);
    if !resources.stdout.contains("mutatingadmissionpolicies") {
        eprintln!("the API server serves no MutatingAdmissionPolicy: policy mode cannot run here");
        return;
    }
    const POLICIES: usize = 10;
    let users = ["isg-keeper-a", "isg-keeper-b"];
    // A Lease of the test's own: the objects are named `<lease>-ingress-<n>`, and the shared
    // API server holds other tests' objects.
    let lease_name = format!("isg-{}", t.ns);
    let policies = |ip: &str| {
        let mut text = String::from("policies:\n");
        for i in 0..POLICIES {
            let ns = &t.ns;
            text.push_str(&format!(
                "  - name: {ns}-{i}\n    ingressClasses: [{ns}-{i}]\n    publishStatusAddress: {ip}\n"
            ));
        }
        text
    };
    let names: Vec<(String, String)> =
        (0..2 * POLICIES).map(|i| (format!("web-{i}"), format!("{}-{}", t.ns, i % POLICIES))).collect();
    for (name, class) in &names {
        create_ingress(&t.ingresses, name, Class::Field(class)).await;
    }
    let (dir_a, dir_b) = (t.cluster.scratch_dir("keeper-a"), t.cluster.scratch_dir("keeper-b"));
    let write = |dir: &Path, text: String| {
        // Written whole and renamed, so the reload never reads half a file.
        let (tmp, file) = (dir.join("policies.yaml.tmp"), dir.join("policies.yaml"));
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, &file).unwrap();
        format!("--config={}", file.display())
    };
    let (config_a, config_b) = (write(&dir_a, policies("192.0.2.31")), write(&dir_b, policies("192.0.2.39")));
    let (proxied, stall) = behind_stalling_proxy(&t, users[0]).await;
    let guard_args = |config: &str| {
        let mut args = vec![
            "--admission=policy".to_owned(),
            "--reconcile=true".to_owned(),
            "--reconcile-qps=2".to_owned(),
            config.to_owned(),
            format!("--leader-election-namespace={}", t.ns),
            format!("--leader-election-lease-name={lease_name}"),
        ];
        let lease = ["--leader-election-lease-duration=4s", "--leader-election-renew-deadline=3s"];
        args.extend(lease.into_iter().chain(["--leader-election-retry-period=1s"]).map(str::to_owned));
        args
    };
    let a = replica(&t, &proxied, users[0], &guard_args(&config_a)).await;
    await_leading(&a, HEAL).await;
    let b_config = t.cluster.kubeconfig_for(users[1], Some("system:masters"));
    let b = replica(&t, &b_config, users[1], &guard_args(&config_b)).await;
    await_synced(&b).await;
    eventually("a's admission objects", HEAL, || async {
        admission_objects_carry(&t, &lease_name, POLICIES, "192.0.2.31")
    })
    .await;
    let filled = || async {
        let mut n = 0;
        for (name, _) in &names {
            n += usize::from(!stored(&t.ingresses, name).await.is_empty());
        }
        n
    };
    eventually("a is in the middle of its pass", HEAL, || async {
        let n = filled().await;
        if n >= 3 { Ok(()) } else { Err(format!("{n} filled")) }
    })
    .await;

    // The stall, and a reload a sees at once: its keeper begins a pass whose requests hang.
    stall.store(true, Ordering::SeqCst);
    write(&dir_a, policies("192.0.2.32"));
    let at_stall = filled().await;
    assert!(at_stall < names.len(), "the stall came mid-pass ({at_stall} of {} filled)", names.len());
    eventually("a reloads", Duration::from_secs(10), || async {
        if a.log().contains("policy file reloaded") { Ok(()) } else { Err(a.log_tail()) }
    })
    .await;
    eventually("b takes over", Duration::from_secs(30), || async {
        let leading = b.metric("ingress_status_guard_leader");
        if leading == 1.0 { Ok(()) } else { Err(format!("b leader {leading}")) }
    })
    .await;
    // The case under test: a reloaded (so its keeper began a pass) while it still led.
    let at = |message: &str| {
        let log = a.log();
        let line = log.lines().find(|l| l.contains(message)).map(str::to_owned);
        let line = line.unwrap_or_else(|| panic!("a's log has no {message:?}:\n{}", a.log_tail()));
        let event: serde_json::Value = serde_json::from_str(&line).expect("a JSON log line");
        event["timestamp"].as_str().unwrap_or_default().parse::<Timestamp>().expect("a timestamp")
    };
    let (reloaded, stepped_down) = (at("policy file reloaded"), at("stepping down"));
    assert!(reloaded < stepped_down, "a reloaded at {reloaded}, after it stepped down at {stepped_down}");
    let lease = Api::<Lease>::namespaced(t.admin.clone(), &t.ns).get(&lease_name).await.unwrap();
    let spec = lease.spec.expect("the Lease's spec");
    assert_eq!(spec.holder_identity.as_deref(), Some(users[1]));
    let acquired = spec.acquire_time.expect("b's acquireTime").0;
    // a can reach the API server again: a write it still meant to send would now land.
    stall.store(false, Ordering::SeqCst);
    let unstalled = std::time::Instant::now();
    eventually("b's admission objects", Duration::from_secs(60), || async {
        admission_objects_carry(&t, &lease_name, POLICIES, "192.0.2.39")
    })
    .await;
    // Past a's call deadline (10 s) since the proxy passes again: a write of a's pass that was
    // not fenced has been sent by now.
    tokio::time::sleep(Duration::from_secs(17).saturating_sub(unstalled.elapsed())).await;
    let ours = |e: &serde_json::Value| {
        let r = &e["objectRef"];
        let admission = r["apiGroup"] == "admissionregistration.k8s.io"
            && r["name"].as_str().is_some_and(|n| n.starts_with(&format!("{lease_name}-ingress-")));
        let status = r["resource"] == "ingresses" && r["namespace"] == t.ns.as_str();
        (admission || status) && ["create", "update", "patch", "delete"].contains(&e["verb"].as_str().unwrap_or(""))
    };
    let (mut before, mut after) = (0, Vec::new());
    for event in t.cluster.audit_events().iter().filter(|e| ours(e) && e["user"]["username"] == users[0]) {
        let at: Timestamp =
            event["requestReceivedTimestamp"].as_str().unwrap_or_default().parse().expect("a timestamp");
        if at < acquired {
            before += 1;
        } else {
            after.push(format!(
                "{} {} {} at {at}",
                event["verb"], event["objectRef"]["resource"], event["objectRef"]["name"]
            ));
        }
    }
    assert!(before >= 2 * POLICIES + 3, "a's writes before the stall are in the audit log: {before}");
    assert!(after.is_empty(), "a wrote after b acquired the Lease at {acquired}:\n{}", after.join("\n"));
    admission_objects_carry(&t, &lease_name, POLICIES, "192.0.2.39").expect("b's value stays enforced");
    eventually("b fills and heals every Ingress", Duration::from_secs(60), || async {
        let mut off = Vec::new();
        for (name, _) in &names {
            if stored(&t.ingresses, name).await != ["192.0.2.39"] {
                off.push(name);
            }
        }
        if off.is_empty() { Ok(()) } else { Err(format!("not b's: {off:?}")) }
    })
    .await;
    assert_eq!(a.metric("ingress_status_guard_leader"), 0.0, "a stays deposed");
}
