//! Gateway policies rendered by `render-admission-policy` and enforced by the API server on
//! the real Gateway API CRDs: the MutatingAdmissionPolicy replaces a rogue `status.addresses`
//! (conditions and listeners kept as written), the deny policy refuses with its message.

use std::time::Duration;

use super::support::gateway::{
    create_gateway, create_gateway_class, gateway_status, gateways, stored_gateway_addresses, write_gateway_status,
};
use super::support::{TestEnv, eventually};
use super::{lease_flag, lease_of, run_render};

const WAIT: Duration = Duration::from_secs(60);

/// Renders a Gateway policy of `mode` governing controller `controller` (resolved into the
/// class `class` from a GatewayClass manifest) with 192.0.2.50 and `lb.<ns>.example.test`,
/// and applies it (server dry run first). Returns the policy file.
fn render_and_apply(t: &TestEnv, class: &str, controller: &str, mode: &str) -> std::path::PathBuf {
    let dir = t.cluster.scratch_dir(&format!("gw-map-{mode}"));
    let (cfg, classes, out) = (dir.join("policies.yaml"), dir.join("classes.yaml"), dir.join("rendered.yaml"));
    let policies = format!(
        "policies:\n  - name: {ns}\n    gatewayControllers: [{controller}]\n    publishStatusAddress: 192.0.2.50,lb.{ns}.example.test\n    mode: {mode}\n",
        ns = t.ns
    );
    std::fs::write(&cfg, policies).unwrap();
    let manifest = format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {{name: {class}}}\nspec: {{controllerName: {controller}}}\n"
    );
    std::fs::write(&classes, manifest).unwrap();
    let lease = lease_flag(&t.ns);
    let (code, yaml, stderr) =
        run_render(&["--config", cfg.to_str().unwrap(), "-f", classes.to_str().unwrap(), &lease]);
    assert_eq!(code, Some(0), "render failed: {stderr}");
    assert!(yaml.contains(&format!("oldObject.spec.gatewayClassName in [\"{class}\"]")), "{yaml}");
    std::fs::write(&out, &yaml).unwrap();
    let admin = t.cluster.admin_kubeconfig();
    let dry = t.cluster.kubectl(admin, &["apply", "--dry-run=server", "-f", out.to_str().unwrap()]);
    assert!(dry.success, "server dry run refused the rendered objects: {}\n{yaml}", dry.stderr);
    let applied = t.cluster.kubectl(admin, &["apply", "-f", out.to_str().unwrap()]);
    assert!(applied.success, "apply failed: {}", applied.stderr);
    cfg
}

/// `check` of `config` in the test's namespace, as the guard of the test's Lease: exit code,
/// and stdout then stderr.
fn check(t: &TestEnv, config: &std::path::Path) -> (Option<i32>, String) {
    let kubeconfig = t.cluster.admin_kubeconfig().to_str().unwrap();
    let out = std::process::Command::new(super::support::webhook::BINARY)
        .args(["check", "--kubeconfig", kubeconfig, "--config", config.to_str().unwrap(), "-n", &t.ns])
        .arg(lease_flag(&t.ns))
        .output()
        .expect("run the binary");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.code(), text)
}

/// Enforce: the API server rewrites a rogue Gateway status write to the canonical addresses,
/// keeping its conditions and listeners; a Gateway of another class keeps its write.
#[tokio::test]
async fn a_rendered_gateway_policy_rewrites_rogue_addresses_and_keeps_the_rest() {
    let t = TestEnv::new("gw-map-enforce").await;
    t.cluster.install_gateway_crds().await;
    let (class, other) = (format!("{}-gw", t.ns), format!("{}-other", t.ns));
    let controller = format!("example.test/{}", t.ns);
    create_gateway_class(&t.admin, &class, &controller).await;
    create_gateway_class(&t.admin, &other, "example.test/someone-else").await;
    let cfg = render_and_apply(&t, &class, &controller, "enforce");
    let (admin_gws, rogue_gws) = (gateways(&t.admin, &t.ns), gateways(&t.cluster.rogue().await, &t.ns));
    create_gateway(&admin_gws, "public", &class).await;
    create_gateway(&admin_gws, "elsewhere", &other).await;
    let want = vec!["192.0.2.50".to_owned(), format!("lb.{}.example.test", t.ns)];
    eventually("the MAP rewrites the rogue Gateway write", WAIT, || async {
        let got = write_gateway_status(&rogue_gws, "public", gateway_status(&["198.51.100.66"], true, 1), false)
            .await
            .map_err(|e| e.to_string())?;
        let got = stored_gateway_addresses(&got);
        if got == want { Ok(()) } else { Err(format!("stored {got:?}")) }
    })
    .await;
    let stored = admin_gws.get_status("public").await.unwrap();
    assert_eq!(stored_gateway_addresses(&stored), want);
    let status = &stored.data["status"];
    let conditions: Vec<&str> =
        status["conditions"].as_array().unwrap().iter().map(|c| c["type"].as_str().unwrap()).collect();
    assert_eq!(conditions, ["Accepted", "Programmed"], "conditions as written: {status}");
    assert_eq!(status["listeners"][0]["name"], "http", "listeners as written: {status}");
    assert_eq!(status["addresses"][0]["type"], "IPAddress");
    assert_eq!(status["addresses"][1]["type"], "Hostname");
    let elsewhere = write_gateway_status(&rogue_gws, "elsewhere", gateway_status(&["198.51.100.66"], true, 1), false)
        .await
        .unwrap();
    assert_eq!(stored_gateway_addresses(&elsewhere), ["198.51.100.66"], "another class is left as written");

    // `check` judges the MAP: current against the file it was rendered from, stale against
    // a file whose source gives another address.
    // The file's one Gateway policy: slot 0 of the Gateway kind.
    let name = format!("{}-gateway-0", lease_of(&t.ns));
    let (code, out) = check(&t, &cfg);
    assert!(out.contains(&format!("MutatingAdmissionPolicy {name} of policy \"{}\": CURRENT", t.ns)), "{out}");
    assert_eq!(code, Some(0), "{out}");
    let moved = cfg.with_file_name("moved.yaml");
    std::fs::write(&moved, std::fs::read_to_string(&cfg).unwrap().replace("192.0.2.50", "192.0.2.51")).unwrap();
    let (code, out) = check(&t, &moved);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains(&format!(
            "MutatingAdmissionPolicy {name} of policy \"{}\": STALE (the sources give 192.0.2.51,",
            t.ns
        )),
        "{out}"
    );
}

/// Deny: a Gateway status write off canonical is refused with the message naming the
/// canonical addresses; the canonical set in another order is stored as written.
#[tokio::test]
async fn a_rendered_gateway_deny_policy_refuses_with_the_canonical_value() {
    let t = TestEnv::new("gw-map-deny").await;
    t.cluster.install_gateway_crds().await;
    let class = format!("{}-gw", t.ns);
    let controller = format!("example.test/{}", t.ns);
    create_gateway_class(&t.admin, &class, &controller).await;
    render_and_apply(&t, &class, &controller, "deny");
    let rogue_gws = gateways(&t.cluster.rogue().await, &t.ns);
    create_gateway(&gateways(&t.admin, &t.ns), "public", &class).await;
    let message = eventually("the VAP refuses the rogue Gateway write", WAIT, || async {
        match write_gateway_status(&rogue_gws, "public", gateway_status(&["198.51.100.66"], true, 1), false).await {
            Err(kube::Error::Api(status)) => Ok(status.message),
            other => Err(format!("not refused: {other:?}")),
        }
    })
    .await;
    let expected = format!(
        "ingress-status-guard policy \"{}\" requires status.addresses [192.0.2.50,lb.{}.example.test]",
        t.ns, t.ns
    );
    assert!(message.contains(&expected), "{message}");
    let host = format!("lb.{}.example.test", t.ns);
    let written = write_gateway_status(&rogue_gws, "public", gateway_status(&[&host, "192.0.2.50"], true, 1), false)
        .await
        .expect("the canonical set is accepted");
    assert_eq!(stored_gateway_addresses(&written), [host.as_str(), "192.0.2.50"]);
}

/// `serve --admission=policy` keeps a Gateway policy's MutatingAdmissionPolicy: its class is
/// created after the guard starts (by controller), the leader renders it in, and the API
/// server rewrites a rogue Gateway status write with no webhook registered.
#[tokio::test]
async fn the_guard_in_policy_mode_keeps_a_gateway_policy_current() {
    let t = TestEnv::new("gw-map-kept").await;
    t.cluster.install_gateway_crds().await;
    let dir = t.cluster.scratch_dir("gw-map-kept");
    let config = dir.join("policies.yaml");
    let controller = format!("example.test/{}", t.ns);
    std::fs::write(
        &config,
        format!(
            "policies:\n  - name: {ns}\n    gatewayControllers: [{controller}]\n    publishStatusAddress: 192.0.2.60\n",
            ns = t.ns
        ),
    )
    .unwrap();
    let guard = super::guard::start_guard(&t, &config).await;
    let class = format!("{}-gw", t.ns);
    create_gateway_class(&t.admin, &class, &controller).await;
    create_gateway(&gateways(&t.admin, &t.ns), "public", &class).await;
    let rogue_gws = gateways(&t.cluster.rogue().await, &t.ns);
    eventually(
        &format!("the kept MAP rewrites the rogue Gateway write (guard log {})", guard.log_path().display()),
        WAIT,
        || async {
            let got = write_gateway_status(&rogue_gws, "public", gateway_status(&["198.51.100.66"], true, 1), false)
                .await
                .map_err(|e| e.to_string())?;
            let got = stored_gateway_addresses(&got);
            if got == ["192.0.2.60"] { Ok(()) } else { Err(format!("stored {got:?}")) }
        },
    )
    .await;
}
