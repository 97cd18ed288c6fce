//! docs/migration.md's cutover, run with the guide's names.

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::PostParams;
use serde_json::json;

use super::harness::{BINARY, Kubelet, LEASE_FLAGS, lb_service, run};
use super::support::{Class, TestEnv, addresses, create_ingress, eventually};

/// docs/migration.md, steps 4 and 5, with `cutover`, then step 3 of its "Ingress → Gateway
/// API" section (`--to-publish-gateway`, [`gateway_cutover`]): the guide's names (controller A is
/// ingress-nginx publishing 203.0.113.10, B is Traefik publishing 203.0.113.20, the Ingresses
/// shop/web, shop/api and blog/www of class nginx) and its commands, off a terminal. The
/// output goes to `target/tmp/e2e/run-*/fresh-*/cutover-guide-*/transcript.md`, which is where
/// the guide's output comes from.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_migration_guide_cuts_over_with_cutover() {
    use k8s_openapi::api::core::v1::Namespace;
    let t = TestEnv::private("cutover-guide").await;
    // Fixed names, as in the guide, in a control plane of its own: the deploy and Gateway
    // migration tests use some of them.
    for ns in ["ingress-nginx", "traefik", "shop", "blog", "ingress-status-guard"] {
        let namespace: Namespace = serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap();
        Api::<Namespace>::all(t.admin.clone()).create(&PostParams::default(), &namespace).await.unwrap();
    }
    lb_service(&Api::namespaced(t.admin.clone(), "ingress-nginx"), "ingress-nginx-controller", "203.0.113.10").await;
    lb_service(&Api::namespaced(t.admin.clone(), "traefik"), "traefik", "203.0.113.20").await;
    let text = "policies:\n  - name: ingress-nginx\n    ingressClasses: [nginx]\n    publishService: ingress-nginx/ingress-nginx-controller\n";
    let cm: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "ingress-status-guard-config"},
        "data": {"config.yaml": text}
    }))
    .unwrap();
    Api::<ConfigMap>::namespaced(t.admin.clone(), "ingress-status-guard")
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();
    let dir = t.cluster.scratch_dir("cutover-guide-volume");
    let _kubelet = Kubelet::of(&t.admin, "ingress-status-guard", "ingress-status-guard-config", dir.clone(), None);
    eventually("the kubelet lays out the volume", Duration::from_secs(30), || async {
        if dir.join("config.yaml").exists() { Ok(()) } else { Err("no config.yaml yet".to_owned()) }
    })
    .await;
    let config = format!("--config={}", dir.join("config.yaml").display());
    let args = [
        config.as_str(),
        "--reconcile=true",
        "--leader-election-namespace=ingress-status-guard",
        LEASE_FLAGS[0],
        LEASE_FLAGS[1],
        LEASE_FLAGS[2],
    ];
    let guard = t.start_webhook(&args).await;
    let ingresses = [("shop", "web"), ("shop", "api"), ("blog", "www")];
    for (ns, name) in ingresses {
        create_ingress(&Api::namespaced(t.admin.clone(), ns), name, Class::Field("nginx")).await;
    }
    let stored_all = |want: &'static str| {
        let admin = t.admin.clone();
        let log = guard.log_path();
        async move {
            eventually(
                &format!("the guide's Ingresses store {want} (guard log: {})", log.display()),
                Duration::from_secs(60),
                || async {
                    for (ns, name) in ingresses {
                        let got = addresses(
                            &Api::<k8s_openapi::api::networking::v1::Ingress>::namespaced(admin.clone(), ns)
                                .get(name)
                                .await
                                .map_err(|e| e.to_string())?,
                        );
                        if got != [want] {
                            return Err(format!("{ns}/{name}: {got:?}"));
                        }
                    }
                    Ok(())
                },
            )
            .await;
        }
    };
    stored_all("203.0.113.10").await;

    let kc = t.cluster.admin_kubeconfig();
    let mut transcript = String::new();
    let flags = ["--config-map=ingress-status-guard/ingress-status-guard-config", "--policy=ingress-nginx"];
    for (extra, want) in [
        (&["--to-publish-service=traefik/traefik", "--dry-run"][..], None),
        (&["--to-publish-service=traefik/traefik"][..], Some("203.0.113.20")),
        (&["--rollback"][..], Some("203.0.113.10")),
    ] {
        let args: Vec<String> = std::iter::once("cutover".to_owned())
            .chain(std::iter::once(format!("--kubeconfig={}", kc.display())))
            .chain(flags.iter().chain(extra).map(|a| (*a).to_owned()))
            .collect();
        let out = run(BINARY, &args, None).await;
        assert_eq!(out.code, Some(0), "{}", out.stderr);
        let shown: Vec<&str> = args.iter().map(String::as_str).filter(|a| !a.starts_with("--kubeconfig")).collect();
        transcript.push_str(&format!("$ ingress-status-guard {}\n{}{}\n", shown.join(" "), out.stdout, out.stderr));
        assert!(out.stdout.contains("plan: policy ingress-nginx moves from service "), "{}", out.stdout);
        if let Some(want) = want {
            assert!(out.stdout.contains("done: 3/3 moved in "), "{}", out.stdout);
            stored_all(want).await;
        } else {
            assert_eq!(out.stdout.lines().count(), 5, "header, 3 Ingresses, summary: {}", out.stdout);
        }
    }
    // The source it already has: nothing is written, and the kept previous value stays.
    let cms: Api<ConfigMap> = Api::namespaced(t.admin.clone(), "ingress-status-guard");
    let before = cms.get("ingress-status-guard-config").await.unwrap();
    let mut args = vec!["cutover".to_owned(), format!("--kubeconfig={}", kc.display())];
    args.extend(flags.iter().map(|a| (*a).to_owned()));
    args.push("--to-publish-service=ingress-nginx/ingress-nginx-controller".to_owned());
    let out = run(BINARY, &args, None).await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(out.stdout.contains("0 Ingresses move, 3 already there"), "{}", out.stdout);
    assert!(
        out.stdout.contains(
            "unchanged: ConfigMap ingress-status-guard/ingress-status-guard-config key config.yaml already says this"
        ),
        "{}",
        out.stdout
    );
    assert!(out.stdout.lines().last().unwrap_or_default().starts_with("done: 0/0 moved in "), "{}", out.stdout);
    let after = cms.get("ingress-status-guard-config").await.unwrap();
    assert_eq!(after.metadata.resource_version, before.metadata.resource_version, "nothing written");

    transcript.push_str(&gateway_cutover(&t, &flags, &guard).await);

    let file = t.cluster.scratch_dir("cutover-guide").join("transcript.md");
    std::fs::write(&file, &transcript).unwrap();
    println!("{transcript}\nwritten to {}", file.display());
}

/// docs/migration.md, "Ingress → Gateway API", step 3 with `cutover`, after the guide above:
/// blog/www deleted (that section has shop/web and shop/api only), Envoy Gateway's Gateway
/// gateway/public (class `eg`) Programmed with 203.0.113.30, the plan, the move and the
/// rollback. Returns their transcript.
async fn gateway_cutover(t: &TestEnv, flags: &[&str], guard: &super::support::Webhook) -> String {
    use super::support::gateway::{
        create_gateway, create_gateway_class, gateway_status, gateways, write_gateway_status,
    };
    use k8s_openapi::api::core::v1::Namespace;
    use k8s_openapi::api::networking::v1::Ingress;
    Api::<Ingress>::namespaced(t.admin.clone(), "blog").delete("www", &Default::default()).await.unwrap();
    t.cluster.install_gateway_crds().await;
    let namespace: Namespace = serde_json::from_value(json!({"metadata": {"name": "gateway"}})).unwrap();
    Api::<Namespace>::all(t.admin.clone()).create(&PostParams::default(), &namespace).await.unwrap();
    create_gateway_class(&t.admin, "eg", "gateway.envoyproxy.io/gatewayclass-controller").await;
    let gws = gateways(&t.admin, "gateway");
    let generation = create_gateway(&gws, "public", "eg").await.metadata.generation.unwrap_or(1);
    write_gateway_status(&gws, "public", gateway_status(&["203.0.113.30"], true, generation), false).await.unwrap();
    let shop: Api<Ingress> = Api::namespaced(t.admin.clone(), "shop");
    let kc = t.cluster.admin_kubeconfig();
    let mut transcript = String::new();
    for (extra, want) in [
        (&["--to-publish-gateway=gateway/public", "--dry-run"][..], None),
        (&["--to-publish-gateway=gateway/public"][..], Some("203.0.113.30")),
        (&["--rollback"][..], Some("203.0.113.10")),
    ] {
        let args: Vec<String> = ["cutover".to_owned(), format!("--kubeconfig={}", kc.display())]
            .into_iter()
            .chain(flags.iter().chain(extra).map(|a| (*a).to_owned()))
            .collect();
        let out = run(BINARY, &args, None).await;
        assert_eq!(out.code, Some(0), "{} (guard log: {})", out.stderr, guard.log_path().display());
        let shown: Vec<&str> = args.iter().map(String::as_str).filter(|a| !a.starts_with("--kubeconfig")).collect();
        transcript.push_str(&format!("$ ingress-status-guard {}\n{}{}\n", shown.join(" "), out.stdout, out.stderr));
        assert!(out.stdout.contains("2 Ingresses move, 0 already there"), "{}", out.stdout);
        let Some(want) = want else { continue };
        assert!(out.stdout.contains("done: 2/2 moved in "), "{}", out.stdout);
        for name in ["web", "api"] {
            assert_eq!(addresses(&shop.get(name).await.unwrap()), [want], "shop/{name}");
        }
    }
    transcript
}
