//! The reconciler's scope from its webhook configuration, against the real kube-apiserver +
//! etcd of `support` (issue 33, item 8): each kind is scoped by the webhooks whose rules review
//! its status writes, and a configuration whose `matchConditions` the guard cannot evaluate is
//! refused for reconciling, fail closed, with one line that says why.

use crate::support;

use std::time::Duration;

use k8s_openapi::api::{admissionregistration::v1::MutatingWebhookConfiguration, networking::v1::Ingress};
use kube::{
    Api,
    api::{DeleteParams, Patch, PatchParams, PostParams},
};
use serde_json::{Value, json};

use support::guard::{await_synced_leader, guard_patches, reconciler_args, scoping_webhook, start};
use support::{Class, TestEnv, Webhook, create_ingress, eventually, stored, write_status};

const HEAL: Duration = Duration::from_secs(20);

/// The guard with its reconciler on, scoped by configuration `name`, governing class `class`,
/// once it leads with a synced cache.
async fn start_reconciler(t: &TestEnv, class: &str, name: &str) -> Webhook {
    let extra = [
        "--publish-status-address=192.0.2.10".to_owned(),
        format!("--ingress-class={class}"),
        format!("--webhook-configuration={name}"),
    ];
    let webhook = start(t, &reconciler_args(t, None, &extra)).await;
    await_synced_leader(&webhook, HEAL).await;
    webhook
}

/// Issue 33, item 8: the scope is per kind, per webhook rule, as the API server calls the
/// webhooks. One webhook reviews Ingress status writes in Namespace A, another Gateway status
/// writes in Namespace B. Every webhook's selector used to be ANDed whatever its rules, which
/// selects neither Namespace: the stale Ingress in A, where admission runs, was never healed.
/// Now it is, and the one in B, where admission never runs for an Ingress, is left alone. With
/// the Ingress webhook gone, no webhook reviews Ingresses: one WARN says so, nothing is patched.
#[tokio::test]
async fn each_kind_is_scoped_by_the_webhooks_whose_rules_review_it() {
    let t = TestEnv::new("scope-rules").await;
    let class = t.ns.clone();
    let b_ns = t.cluster.namespace(&t.admin, "scope-rules-b").await;
    let b: Api<Ingress> = Api::namespaced(t.admin.clone(), &b_ns);
    let b_rogue: Api<Ingress> = Api::namespaced(t.cluster.rogue().await, &b_ns);
    for (api, rogue) in [(&t.ingresses, &t.rogue), (&b, &b_rogue)] {
        create_ingress(api, "web", Class::Field(&class)).await;
        write_status(rogue, "web", &["198.51.100.7"], false).await.unwrap();
    }
    let in_ns = |ns: &str| json!({"matchLabels": {support::cluster::NAMESPACE_LABEL: ns}});
    let name = format!("isg-{}", t.ns);
    let config: MutatingWebhookConfiguration = serde_json::from_value(json!({
        "metadata": {"name": name},
        "webhooks": [
            scoping_webhook("ingresses.scope.ingress-status-guard.test", "ingresses", in_ns(&t.ns)),
            scoping_webhook("gateways.scope.ingress-status-guard.test", "gateways", in_ns(&b_ns)),
        ]
    }))
    .unwrap();
    let configs: Api<MutatingWebhookConfiguration> = Api::all(t.admin.clone());
    configs.create(&PostParams::default(), &config).await.unwrap();
    let webhook = start_reconciler(&t, &class, &name).await;
    eventually("the Ingress where its webhook runs is healed", HEAL, || async {
        let got = stored(&t.ingresses, "web").await;
        if got == ["192.0.2.10"] { Ok(()) } else { Err(format!("{got:?}")) }
    })
    .await;
    // Both were judged in the same pass: by now the other would have been patched too.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(stored(&b, "web").await, ["198.51.100.7"], "B: only Gateways are reviewed there");
    assert_eq!(guard_patches(t.cluster, &b_ns, "web"), Vec::<Value>::new(), "B: never patched");
    assert_eq!(webhook.metric("ingress_status_guard_reconcile_scope_known"), 1.0);

    // Only the Gateway webhook left: admission never runs for an Ingress.
    let gateways_only =
        json!({"webhooks": [scoping_webhook("gateways.scope.ingress-status-guard.test", "gateways", in_ns(&b_ns))]});
    configs.patch(&name, &PatchParams::default(), &Patch::Merge(&gateways_only)).await.unwrap();
    eventually("one WARN says no webhook reviews Ingresses", HEAL, || async {
        let log = webhook.log();
        let lines: Vec<&str> =
            log.lines().filter(|l| l.contains("admission never runs for Ingress status writes")).collect();
        match &lines[..] {
            [line] if line.contains("WARN") && line.contains("ingresses/status") => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    write_status(&t.rogue, "web", &["198.51.100.8"], false).await.unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(stored(&t.ingresses, "web").await, ["198.51.100.8"], "A: no longer reviewed, not patched");
    assert_eq!(webhook.metric("ingress_status_guard_reconcile_scope_known"), 1.0, "known: nowhere");
    configs.delete(&name, &DeleteParams::default()).await.unwrap();
}

/// The same for Gateways, with the Gateway API CRDs installed: the stale Gateway in B, where
/// the Gateway webhook runs, is healed; the one in A, where only Ingresses are reviewed, is
/// left alone (ANDed, the two selectors healed neither).
#[tokio::test]
async fn gateways_are_scoped_by_the_webhooks_that_review_gateways() {
    use support::gateway::{self, create_gateway, create_gateway_class, gateway_status, stored_gateway_addresses};
    let t = TestEnv::new("scope-gw").await;
    t.cluster.install_gateway_crds().await;
    let ns = t.ns.clone();
    create_gateway_class(&t.admin, &ns, "example.com/gateway-controller").await;
    let b_ns = t.cluster.namespace(&t.admin, "scope-gw-b").await;
    let rogue = t.cluster.rogue().await;
    for namespace in [&ns, &b_ns] {
        create_gateway(&gateway::gateways(&t.admin, namespace), "edge", &ns).await;
        let written = gateway_status(&[support::SENTINEL], true, 1);
        gateway::write_gateway_status(&gateway::gateways(&rogue, namespace), "edge", written, false)
            .await
            .expect("rogue status write");
    }
    let in_ns = |ns: &str| json!({"matchLabels": {support::cluster::NAMESPACE_LABEL: ns}});
    let name = format!("isg-{ns}");
    let config: MutatingWebhookConfiguration = serde_json::from_value(json!({
        "metadata": {"name": name},
        "webhooks": [
            scoping_webhook("ingresses.scope.ingress-status-guard.test", "ingresses", in_ns(&ns)),
            scoping_webhook("gateways.scope.ingress-status-guard.test", "gateways", in_ns(&b_ns)),
        ]
    }))
    .unwrap();
    let configs: Api<MutatingWebhookConfiguration> = Api::all(t.admin.clone());
    configs.create(&PostParams::default(), &config).await.unwrap();
    let file = t.cluster.scratch_dir(&format!("config-{ns}")).join("config.yaml");
    std::fs::write(
        &file,
        format!("policies:\n  - {{name: gw, gatewayClasses: [{ns}], publishStatusAddress: 192.0.2.60}}\n"),
    )
    .unwrap();
    let args = [
        format!("--config={}", file.display()),
        "--reconcile=true".to_owned(),
        format!("--leader-election-namespace={ns}"),
        "--leader-election-lease-duration=4s".to_owned(),
        "--leader-election-renew-deadline=3s".to_owned(),
        "--leader-election-retry-period=1s".to_owned(),
        format!("--webhook-configuration={name}"),
    ];
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let webhook = Webhook::start(t.cluster, &ns, t.cluster.admin_kubeconfig(), &args).await;
    let (a, b) = (gateway::gateways(&t.admin, &ns), gateway::gateways(&t.admin, &b_ns));
    let stored_in = |api: Api<kube::api::DynamicObject>| async move {
        stored_gateway_addresses(&api.get("edge").await.expect("get Gateway edge"))
    };
    eventually(&format!("the Gateway in B is healed ({})", webhook.log_path().display()), HEAL, || async {
        let got = stored_in(b.clone()).await;
        if got == ["192.0.2.60"] { Ok(()) } else { Err(format!("{got:?}")) }
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(stored_in(a.clone()).await, [support::SENTINEL], "A: only Ingresses are reviewed there");
    configs.delete(&name, &DeleteParams::default()).await.unwrap();
}

/// A webhook configuration whose matchCondition leaves `kube-system` out: the API server would
/// not call the webhook there, and the guard cannot evaluate the CEL to know. It used to read
/// the configuration by its namespaceSelector alone and patch a stale Ingress in `kube-system`
/// where admission never runs. Now the scope is refused (unknown, `reconcile_scope_known` 0, a
/// WARN naming the field and `--webhook-configuration`), nothing is patched anywhere, and with
/// the condition removed the reconciler heals again.
#[tokio::test]
async fn match_conditions_the_guard_cannot_evaluate_fail_closed() {
    let t = TestEnv::new("scope-cond").await;
    let class = t.ns.clone();
    let system_name = format!("{}-web", t.ns);
    let system: Api<Ingress> = Api::namespaced(t.admin.clone(), "kube-system");
    let system_rogue: Api<Ingress> = Api::namespaced(t.cluster.rogue().await, "kube-system");
    create_ingress(&system, &system_name, Class::Field(&class)).await;
    write_status(&system_rogue, &system_name, &["198.51.100.7"], false).await.unwrap();
    create_ingress(&t.ingresses, "web", Class::Field(&class)).await;
    write_status(&t.rogue, "web", &["198.51.100.7"], false).await.unwrap();

    let name = format!("isg-{}", t.ns);
    let config: MutatingWebhookConfiguration = serde_json::from_value(json!({
        "metadata": {"name": name},
        "webhooks": [{
            "name": "scope.conditions.ingress-status-guard.test",
            "clientConfig": {"url": "https://127.0.0.1:1/mutate"},
            // Matches no write of any test.
            "rules": [support::webhook::status_rule("ingresses")],
            // The two Namespaces of this test, so other tests' writes never call it.
            "namespaceSelector": {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["kube-system", t.ns]}]},
            "matchConditions": [{"name": "not-kube-system", "expression": "request.namespace != 'kube-system'"}],
            "admissionReviewVersions": ["v1"],
            "sideEffects": "None",
            "failurePolicy": "Ignore",
        }]
    }))
    .unwrap();
    let configs: Api<MutatingWebhookConfiguration> = Api::all(t.admin.clone());
    configs.create(&PostParams::default(), &config).await.unwrap();
    let webhook = start_reconciler(&t, &class, &name).await;
    eventually("the scope is refused, saying why", HEAL, || async {
        let log = webhook.log();
        let why = log.lines().find(|l| l.contains("webhooks[0].matchConditions")).map(str::to_owned);
        match why {
            Some(line) if line.contains("--webhook-configuration") && line.contains("not-kube-system") => Ok(line),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    assert_eq!(webhook.metric("ingress_status_guard_reconcile_scope_known"), 0.0);
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(stored(&system, &system_name).await, ["198.51.100.7"], "kube-system: kept as written");
    assert_eq!(
        guard_patches(t.cluster, "kube-system", &system_name),
        Vec::<Value>::new(),
        "kube-system: never patched"
    );
    assert_eq!(stored(&t.ingresses, "web").await, ["198.51.100.7"], "fail closed: not patched anywhere");

    // Without the condition the scope is the namespaceSelector's.
    let patch = json!({"webhooks": [{"name": "scope.conditions.ingress-status-guard.test", "matchConditions": null}]});
    configs.patch(&name, &PatchParams::default(), &Patch::Strategic(&patch)).await.unwrap();
    eventually("healed once the scope is known", HEAL, || async {
        let got = stored(&t.ingresses, "web").await;
        if got == ["192.0.2.10"] { Ok(()) } else { Err(format!("{got:?}")) }
    })
    .await;
    assert_eq!(webhook.metric("ingress_status_guard_reconcile_scope_known"), 1.0);
    configs.delete(&name, &DeleteParams::default()).await.unwrap();
    system.delete(&system_name, &DeleteParams::default()).await.unwrap();
}
