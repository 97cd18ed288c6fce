//! Gateway API, end to end: the built binary against the real kube-apiserver + etcd of
//! `support`, with the released Gateway API CRDs (`sigs.k8s.io/gateway-api`, fetched through
//! the Go module proxy by `tests/gateway-api/fetch.sh`; never a hand-written schema) applied.
//! The bundle holds a ValidatingAdmissionPolicy, so these tests need an API server of 1.30 or
//! later: `.ci/run` runs them on v1.37 and v1.31.
//!
//! Isolation in the shared API server: each test has its own namespace, ingress class (named
//! after the namespace), Gateway and Lease, so parallel tests never touch each other's objects.

use crate::support;

mod checked;
mod counted;
mod followed;
mod forged;
mod governed;
mod migration;
mod reconciled;

use std::time::Duration;

use k8s_openapi::api::networking::v1::Ingress;
use kube::Api;
use kube::api::DynamicObject;

use support::gateway::{
    self, create_gateway, create_gateway_class, gateway_status, stored_gateway_addresses, write_gateway_status,
};
use support::{
    Class, Cluster, FailurePolicy, SENTINEL, TestEnv, Webhook, addresses, create_ingress, eventually, stored,
    write_status,
};

/// Generous bound for state that settles asynchronously on a loaded machine.
const SETTLE: Duration = Duration::from_secs(30);

#[tokio::test]
async fn the_real_crds_serve_gateways_and_their_status() {
    let t = TestEnv::new("gw-crds").await;
    t.cluster.install_gateway_crds().await;
    create_gateway_class(&t.admin, &t.ns, "example.com/gateway-controller").await;
    let admin = gateway::gateways(&t.admin, &t.ns);
    let created = create_gateway(&admin, "edge", &t.ns).await;
    assert_eq!(created.data["status"]["conditions"][1]["type"], "Programmed", "the CRD's default status");
    let rogue = gateway::gateways(&t.cluster.rogue().await, &t.ns);
    let written = gateway::write_gateway_status(
        &rogue,
        "edge",
        gateway_status(&["192.0.2.7", "gw.example.test"], true, 1),
        false,
    )
    .await
    .expect("the rogue writer may write Gateway statuses");
    assert_eq!(stored_gateway_addresses(&written), ["192.0.2.7", "gw.example.test"]);
    // The CRD validates entries: an IPAddress that is no IP is refused by the API server.
    let refused =
        gateway::write_gateway_status(&rogue, "edge", gateway_status(&["IPAddress=not-an-ip"], true, 1), false).await;
    assert!(refused.is_err(), "the CRD refuses an IPAddress entry that is no IP: {refused:?}");
    let stored =
        eventually("the Gateway is readable", SETTLE, || async { admin.get("edge").await.map_err(|e| e.to_string()) })
            .await;
    assert_eq!(stored_gateway_addresses(&stored), ["192.0.2.7", "gw.example.test"]);
}

/// `--reconcile=true` with this test's Lease (shortened timings), and `--config=<file>`
/// holding `policies`.
fn guard_args(t: &TestEnv, policies: &str) -> Vec<String> {
    let dir = t.cluster.scratch_dir(&format!("config-{}", t.ns));
    let file = dir.join("config.yaml");
    std::fs::write(&file, policies).expect("write the policy file");
    vec![
        format!("--config={}", file.display()),
        "--reconcile=true".to_owned(),
        format!("--leader-election-namespace={}", t.ns),
        "--leader-election-lease-duration=4s".to_owned(),
        "--leader-election-renew-deadline=3s".to_owned(),
        "--leader-election-retry-period=1s".to_owned(),
    ]
}

async fn start_guard(t: &TestEnv, args: &[String]) -> Webhook {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    t.start_webhook(&args).await
}

/// A GatewayClass and Gateway `edge` (class: the namespace's name) whose status a controller
/// wrote: `addresses`, Programmed `programmed`.
async fn programmed_gateway(t: &TestEnv, addresses: &[&str], programmed: bool) -> Api<DynamicObject> {
    t.cluster.install_gateway_crds().await;
    create_gateway_class(&t.admin, &t.ns, "example.com/gateway-controller").await;
    let admin = gateway::gateways(&t.admin, &t.ns);
    create_gateway(&admin, "edge", &t.ns).await;
    let rogue = gateway::gateways(&t.cluster.rogue().await, &t.ns);
    set_gateway(&rogue, addresses, programmed).await;
    rogue
}

async fn set_gateway(api: &Api<DynamicObject>, addresses: &[&str], programmed: bool) {
    let written = write_gateway_status(api, "edge", gateway_status(addresses, programmed, 1), false)
        .await
        .unwrap_or_else(|e| panic!("write the status of Gateway edge: {e}"));
    assert_eq!(stored_gateway_addresses(&written), addresses);
}

async fn await_stored(t: &TestEnv, name: &str, want: &[&str], webhook: &Webhook) {
    eventually(
        &format!("Ingress {}/{name} stores {want:?} (webhook log: {})", t.ns, webhook.log_path().display()),
        SETTLE,
        || async {
            let got = stored(&t.ingresses, name).await;
            if got == want { Ok(()) } else { Err(format!("stored {got:?}")) }
        },
    )
    .await;
}

/// An Ingress of a `publishGateway` policy follows its Gateway's addresses through the
/// reconciler alone (no webhook registered, nobody writes the Ingress), and a Gateway that is
/// not Programmed or has no addresses never clears or changes the Ingress's status.
#[tokio::test]
async fn an_ingress_follows_its_gateway_through_the_reconciler() {
    let t = TestEnv::new("gw-follow").await;
    let rogue_gw = programmed_gateway(&t, &["192.0.2.10"], true).await;
    create_ingress(&t.ingresses, "app", Class::Field(&t.ns)).await;
    write_status(&t.rogue, "app", &[SENTINEL], false).await.expect("a stale status, before any guard");
    let policies =
        format!("policies:\n  - name: cutover\n    ingressClasses: [{ns}]\n    publishGateway: {ns}/edge\n", ns = t.ns);
    let webhook = start_guard(&t, &guard_args(&t, &policies)).await;
    await_stored(&t, "app", &["192.0.2.10"], &webhook).await;

    set_gateway(&rogue_gw, &["gw.example.test", "192.0.2.11"], true).await;
    await_stored(&t, "app", &["192.0.2.11", "gw.example.test"], &webhook).await;

    // Not Programmed, then no addresses: unresolved, said so, and the status stays.
    set_gateway(&rogue_gw, &["192.0.2.12"], false).await;
    eventually("the guard logs the Gateway as not Programmed", SETTLE, || async {
        let log = webhook.log();
        if log.contains("is not Programmed (Programmed: False, reason Pending)") {
            Ok(())
        } else {
            Err("not yet".to_owned())
        }
    })
    .await;
    set_gateway(&rogue_gw, &[], true).await;
    eventually("the guard logs the Gateway as without addresses", SETTLE, || async {
        if webhook.log().contains("has no addresses in status.addresses yet") {
            Ok(())
        } else {
            Err("not yet".to_owned())
        }
    })
    .await;
    // A reconciler acting on the unresolved source would have done so by now (it reacts to
    // the source change it just logged); the status is still the last canonical one.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(stored(&t.ingresses, "app").await, ["192.0.2.11", "gw.example.test"], "never cleared");

    set_gateway(&rogue_gw, &["192.0.2.13"], true).await;
    await_stored(&t, "app", &["192.0.2.13"], &webhook).await;

    // `explain` reads the Gateway as the webhook does.
    let kubeconfig = format!("--kubeconfig={}", t.cluster.admin_kubeconfig().display());
    let config = guard_args(&t, &policies).remove(0);
    let (code, text) = run_cli(&["explain", &format!("{}/app", t.ns), &kubeconfig, &config]);
    assert_eq!(code, Some(0), "{text}");
    let source = format!("Source:    gateway {}/edge", t.ns);
    let resolved = "Resolved:  192.0.2.13 (the Gateway's status.addresses (IPAddress as ip, Hostname as hostname)";
    assert!(text.contains(&source) && text.contains(resolved), "{text}");

    // A new spec (generation 2) with the status still of generation 1: the Programmed condition
    // is stale, so its addresses are not published until the implementation catches up.
    let spec = serde_json::json!({"spec": {"listeners": [{"name": "http", "port": 8080, "protocol": "HTTP"}]}});
    let bumped = gateway::gateways(&t.admin, &t.ns)
        .patch("edge", &Default::default(), &kube::api::Patch::Merge(&spec))
        .await
        .expect("a new Gateway spec");
    assert_eq!(bumped.metadata.generation, Some(2));
    write_gateway_status(&rogue_gw, "edge", gateway_status(&["192.0.2.14"], true, 1), false).await.expect("stale");
    eventually("the guard logs the Programmed condition as stale", SETTLE, || async {
        let said = "is Programmed only for generation 1, not its current generation 2 (a stale condition)";
        if webhook.log().contains(said) { Ok(()) } else { Err("not yet".to_owned()) }
    })
    .await;
    assert_eq!(stored(&t.ingresses, "app").await, ["192.0.2.13"], "a stale condition publishes nothing");
    write_gateway_status(&rogue_gw, "edge", gateway_status(&["192.0.2.14"], true, 2), false).await.expect("current");
    await_stored(&t, "app", &["192.0.2.14"], &webhook).await;

    // An address type an Ingress cannot carry, then a deleted Gateway: unresolved, named, kept.
    write_gateway_status(&rogue_gw, "edge", gateway_status(&["NamedAddress=edge-vip"], true, 2), false)
        .await
        .expect("a NamedAddress status");
    eventually("the guard names the address type", SETTLE, || async {
        let said = "status.addresses[0]: address type \\\"NamedAddress\\\" has no Ingress equivalent";
        if webhook.log().contains(said) { Ok(()) } else { Err("not yet".to_owned()) }
    })
    .await;
    gateway::gateways(&t.admin, &t.ns).delete("edge", &Default::default()).await.expect("delete the Gateway");
    eventually("the guard logs the Gateway as missing", SETTLE, || async {
        if webhook.log().contains("publish Gateway not found") { Ok(()) } else { Err("not yet".to_owned()) }
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(stored(&t.ingresses, "app").await, ["192.0.2.14"], "never cleared");
}

/// The webhook rewrites a rogue Ingress status write to the Gateway's addresses.
#[tokio::test]
async fn the_webhook_rewrites_a_rogue_write_to_the_gateways_addresses() {
    let t = TestEnv::new("gw-webhook").await;
    programmed_gateway(&t, &["2001:DB8::20", "192.0.2.20"], true).await;
    let policies =
        format!("policies:\n  - name: cutover\n    ingressClasses: [{ns}]\n    publishGateway: {ns}/edge\n", ns = t.ns);
    let mut args = guard_args(&t, &policies);
    args.retain(|a| !a.starts_with("--reconcile"));
    let webhook = start_guard(&t, &args).await;
    t.register(&webhook, FailurePolicy::Fail, Class::Field(&t.ns), &["192.0.2.20", "2001:db8::20"]).await;
    let written = write_status(&t.rogue, "probe", &["10.1.1.1", "lb.rogue.test"], false).await.expect("rogue write");
    assert_eq!(addresses(&written), ["192.0.2.20", "2001:db8::20"], "stored as the Gateway publishes, canonical");
}

/// `ingress-status-guard ARGS`, its exit code and output (stdout then stderr).
fn run_cli(args: &[&str]) -> (Option<i32>, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ingress-status-guard"))
        .args(args)
        .env_remove("KUBECONFIG")
        .output()
        .expect("run ingress-status-guard");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    println!("$ ingress-status-guard {}\n{text}(exit {:?})\n", args.join(" "), out.status.code());
    (out.status.code(), text)
}

/// A cluster without the Gateway API CRDs: the guard starts and gets ready, enforces its
/// Ingress policies, says once (log) and in `/readyz` and `check` that the publishGateway
/// source is inactive; once the CRDs are applied, it becomes active without a restart.
#[tokio::test]
async fn without_the_crds_the_guard_runs_and_activates_gateways_when_they_appear() {
    let cluster = Cluster::fresh().await;
    let admin = cluster.admin().await;
    let ns = cluster.namespace(&admin, "gw-absent").await;
    let ingresses: Api<Ingress> = Api::namespaced(admin.clone(), &ns);
    create_ingress(&ingresses, "cut-app", Class::Field("cut")).await;
    write_status(&ingresses, "cut-app", &[SENTINEL], false).await.expect("a stale status");
    let dir = cluster.scratch_dir("config-absent");
    let file = dir.join("config.yaml");
    let policies = format!(
        "policies:\n  - {{name: fixed, ingressClasses: [fixed], publishStatusAddress: 192.0.2.30}}\n  - {{name: cutover, ingressClasses: [cut], publishGateway: {ns}/edge}}\n"
    );
    std::fs::write(&file, &policies).unwrap();
    let config = format!("--config={}", file.display());
    let lease = format!("--leader-election-namespace={ns}");
    let args = [
        config.as_str(),
        "--reconcile=true",
        &lease,
        "--leader-election-lease-duration=4s",
        "--leader-election-renew-deadline=3s",
        "--leader-election-retry-period=1s",
    ];
    // Webhook::start waits for /readyz 200: readiness does not wait for the Gateway API.
    let webhook = Webhook::start(&cluster, &ns, cluster.admin_kubeconfig(), &args).await;
    let inactive = format!(
        "publishGateway {ns}/edge: inactive, the API server serves no Gateways (Gateway API CRDs not installed)"
    );
    let (status, body) = webhook.readyz_text().expect("/readyz answers");
    assert_eq!((status, body.contains(&inactive)), (200, true), "/readyz names the inactive source:\n{body}");

    // Ingress enforcement is unaffected.
    webhook.register(&admin, &ns, FailurePolicy::Fail).await;
    create_ingress(&ingresses, "fixed-app", Class::Field("fixed")).await;
    eventually(
        &format!("a write of {ns}/fixed-app is rewritten (log: {})", webhook.log_path().display()),
        SETTLE,
        || async {
            let written = write_status(&ingresses, "fixed-app", &[SENTINEL], false).await.map_err(|e| e.to_string())?;
            let got = addresses(&written);
            if got == ["192.0.2.30"] { Ok(()) } else { Err(format!("stored {got:?}")) }
        },
    )
    .await;
    assert_eq!(stored(&ingresses, "cut-app").await, [SENTINEL], "an inactive source never rewrites a status");
    let said = "the API server serves no Gateways (the Gateway API CRDs are not installed)";
    tokio::time::sleep(Duration::from_secs(12)).await; // more than one retry of the watch
    assert_eq!(webhook.log().matches(said).count(), 1, "said once, not per retry:\n{}", webhook.log_tail());

    let kubeconfig = format!("--kubeconfig={}", cluster.admin_kubeconfig().display());
    let (code, text) = run_cli(&["check", &kubeconfig, &config]);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("the Gateway API CRDs are not installed"), "check names the inactive source:\n{text}");
    // A Gateway policy as well: `check` still reads the Ingresses, and says in one line that
    // Gateway policies are inactive.
    let with_gateways = dir.join("with-gateways.yaml");
    std::fs::write(
        &with_gateways,
        format!("{policies}  - {{name: gw, gatewayClasses: [cut], publishStatusAddress: 192.0.2.32}}\n"),
    )
    .unwrap();
    let (code, text) = run_cli(&["check", &kubeconfig, &format!("--config={}", with_gateways.display()), "-n", &ns]);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains(&format!("ingress  {ns}/fixed-app")), "the Ingresses are listed:\n{text}");
    let inactive =
        "Gateway policies: inactive: the API server serves no Gateways (the Gateway API CRDs are not installed)";
    assert_eq!(text.matches(inactive).count(), 1, "{text}");

    // The CRDs appear: the source becomes active without a restart.
    cluster.install_gateway_crds().await;
    create_gateway_class(&admin, "cut", "example.com/gateway-controller").await;
    let gateways = gateway::gateways(&admin, &ns);
    create_gateway(&gateways, "edge", "cut").await;
    write_gateway_status(&gateways, "edge", gateway_status(&["192.0.2.31"], true, 1), false)
        .await
        .expect("Gateway status");
    eventually(
        &format!("{ns}/cut-app follows the Gateway (log: {})", webhook.log_path().display()),
        Duration::from_secs(60),
        || async {
            let got = stored(&ingresses, "cut-app").await;
            if got == ["192.0.2.31"] { Ok(()) } else { Err(format!("stored {got:?}")) }
        },
    )
    .await;
    let (status, body) = webhook.readyz_text().expect("/readyz answers");
    assert_eq!((status, body.as_str()), (200, "ok\n"), "nothing inactive any more");
    assert!(webhook.log().contains("the API server serves Gateways now"), "{}", webhook.log_tail());
    let (code, text) = run_cli(&["check", &kubeconfig, &config]);
    assert_eq!(code, Some(0), "{text}");
}
