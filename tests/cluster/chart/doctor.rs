//! The chart runs `doctor`: a post-install/post-upgrade hook Job (off by `doctor.hook.enabled`)
//! and a `helm test` Pod, as a ServiceAccount of their own with the least RBAC doctor needs.
//!
//! There is no kubelet in the suite, so neither pod runs here: what is proven against the real
//! API server is that both pass admission under the restricted Pod Security profile (a
//! server-side dry-run create in a namespace that enforces it, beside a pod it refuses), and that
//! the doctor identity may do exactly what doctor does and no more (`kubectl auth can-i --as`,
//! which asks the API server's authorizer, as a SubjectAccessReview does). That doctor's checks
//! pass against a working webhook is tests/check's; that helm runs the hook and waits for it is
//! helm's.

use serde_json::{Value, json};

use super::{CHART, Helm, find, write};
use crate::support::TestEnv;

/// The rendered objects of release `release` in `namespace` with `set`.
fn render(helm: &Helm, release: &str, namespace: &str, set: &[&str]) -> Vec<Value> {
    let mut args = vec!["template", release, CHART, "--namespace", namespace];
    for s in set {
        args.extend(["--set", s]);
    }
    let out = helm.run(&args);
    assert!(out.success, "helm template {set:?}: {}", out.stderr);
    super::documents(&out.stdout)
}

/// What the hook and the test run, how helm treats them, and that they can be turned off.
#[test]
fn the_doctor_hook_and_test_render_as_documented() {
    let helm = Helm::new(3, &super::scratch("doctor-render"));
    let docs = render(&helm, "g", "isg", &[]);
    let job = find(&docs, "Job", "g-ingress-status-guard-doctor");
    assert_eq!(
        job["metadata"]["annotations"],
        json!({"helm.sh/hook": "post-install,post-upgrade", "helm.sh/hook-weight": "1",
               "helm.sh/hook-delete-policy": "before-hook-creation,hook-succeeded"})
    );
    let pod = find(&docs, "Pod", "g-ingress-status-guard-doctor-test");
    assert_eq!(pod["metadata"]["annotations"]["helm.sh/hook"], "test");
    assert_eq!(pod["metadata"]["annotations"]["helm.sh/hook-delete-policy"], "before-hook-creation");
    let job_spec = &job["spec"]["template"]["spec"];
    for (spec, wait) in [(job_spec, "--wait=2m"), (&pod["spec"], "--wait=30s")] {
        assert_eq!(spec["serviceAccountName"], "g-ingress-status-guard-doctor");
        assert_eq!(
            spec["containers"][0]["args"],
            json!([
                "doctor",
                "--config=/etc/ingress-status-guard/config/config.yaml",
                "--admission=webhook",
                "--webhook-configuration=g-ingress-status-guard",
                "--leader-election-namespace=isg",
                "--leader-election-lease-name=g-ingress-status-guard",
                wait,
                "--probe-namespace=isg",
                "--service-account=isg/g-ingress-status-guard",
            ])
        );
        assert_eq!(spec["volumes"][0]["configMap"]["name"], "g-ingress-status-guard-config");
    }
    // The hook off: no Job, the test Pod and the identity stay; doctor off: none of it.
    let docs = render(&helm, "g", "isg", &["doctor.hook.enabled=false"]);
    assert!(!docs.iter().any(|d| d["kind"] == "Job" && d["metadata"]["name"] == "g-ingress-status-guard-doctor"));
    find(&docs, "Pod", "g-ingress-status-guard-doctor-test");
    let docs = render(&helm, "g", "isg", &["doctor.enabled=false"]);
    assert!(!docs.iter().any(|d| d["metadata"]["labels"]["app.kubernetes.io/component"] == "doctor"));
    // admission.mode=policy: doctor checks the guard's admission policies instead of a webhook.
    let docs = render(&helm, "g", "isg", &["admission.mode=policy", "doctor.checkPermissions=false"]);
    let args =
        &find(&docs, "Job", "g-ingress-status-guard-doctor")["spec"]["template"]["spec"]["containers"][0]["args"];
    assert!(args.as_array().unwrap().contains(&json!("--admission=policy")), "{args}");
    assert!(
        !args.to_string().contains("--webhook-configuration") && !args.to_string().contains("--service-account"),
        "{args}"
    );
    let role = find(&docs, "ClusterRole", "g-ingress-status-guard-doctor");
    assert!(
        role.to_string().contains("mutatingadmissionpolicies") && !role.to_string().contains("subjectaccessreviews"),
        "{role}"
    );
    // A probe is passed on, and its grants name it; a probe namespace elsewhere gets the Role.
    let docs = render(&helm, "g", "isg", &["doctor.probe=web/front", "doctor.hook.wait=90s"]);
    let args =
        &find(&docs, "Job", "g-ingress-status-guard-doctor")["spec"]["template"]["spec"]["containers"][0]["args"];
    assert!(args.as_array().unwrap().contains(&json!("--probe=web/front")), "{args}");
    assert!(args.as_array().unwrap().contains(&json!("--wait=90s")), "{args}");
    assert_eq!(find(&docs, "Role", "g-ingress-status-guard-doctor-probe")["metadata"]["namespace"], "web");
    let docs = render(&helm, "g", "isg", &["doctor.probeNamespace=probes"]);
    assert_eq!(find(&docs, "Role", "g-ingress-status-guard-doctor-probe")["metadata"]["namespace"], "probes");
    let out = helm.run(&["template", "g", CHART, "--set", "doctor.probeNamespace=Not_One"]);
    assert!(!out.success && out.stderr.contains("probeNamespace"), "{}", out.stderr);
}

/// Applies `docs` with the administrator; returns the output.
fn apply(
    t: &TestEnv,
    dir: &std::path::Path,
    docs: &[&Value],
    extra: &[&str],
) -> crate::support::cluster::KubectlOutput {
    let file = write(dir, "objects.json", &json!({"apiVersion": "v1", "kind": "List", "items": docs}).to_string());
    let mut args = vec!["apply", "--server-side", "-f", file.as_str()];
    args.extend_from_slice(extra);
    t.cluster.kubectl(t.cluster.admin_kubeconfig(), &args)
}

/// The hook Job and the test Pod pass the restricted profile; the doctor identity may read the
/// release's webhook configuration and Service, its namespace's EndpointSlices and its Lease,
/// create its probe Ingress in its namespace and get, delete and patch the status of that one
/// name, read that Namespace and the IngressClasses, and ask SubjectAccessReviews; nothing else:
/// not another Ingress, not another name, not another namespace; with `doctor.probe`, only that
/// Ingress; in policy mode, the release's admission policies and the policies' sources.
#[tokio::test]
async fn the_doctor_pods_are_restricted_and_its_rbac_is_least() {
    let t = TestEnv::new("chart-doctor").await;
    let dir = t.cluster.scratch_dir("chart-doctor");
    let helm = Helm::new(3, &dir);
    let admin = t.cluster.admin_kubeconfig();
    let (release, namespace) = ("doc", "chart-doctor");
    let fullname = "doc-ingress-status-guard";
    let setup = json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace, "labels": {
            "pod-security.kubernetes.io/enforce": "restricted",
            "pod-security.kubernetes.io/enforce-version": "latest",
            "pod-security.kubernetes.io/warn": "restricted"}}},
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "chart-doctor-web"}},
    ]});
    let out =
        t.cluster.kubectl(admin, &["apply", "--server-side", "-f", &write(&dir, "setup.json", &setup.to_string())]);
    assert!(out.success, "{}", out.stderr);

    let docs = render(&helm, release, namespace, &[]);
    // The identity, for real (helm creates it before any hook).
    let identity: Vec<&Value> = docs
        .iter()
        .filter(|d| {
            d["metadata"]["labels"]["app.kubernetes.io/component"] == "doctor"
                && !["Job", "Pod"].contains(&d["kind"].as_str().unwrap())
        })
        .collect();
    assert_eq!(
        identity.len(),
        7,
        "ServiceAccount, ClusterRole and binding, Role and binding, the probe's Role and binding"
    );
    let out = apply(&t, &dir, &identity, &[]);
    assert!(out.success, "{}", out.stderr);
    // The ServiceAccount admission plugin refuses a Pod whose ServiceAccount does not exist yet.
    let job = find(&docs, "Job", &format!("{fullname}-doctor"));
    let pod = find(&docs, "Pod", &format!("{fullname}-doctor-test"));
    // Pod Security admission checks the Pod at create (enforce) and the Job's template (warn).
    let out = apply(&t, &dir, &[job, pod], &["--dry-run=server"]);
    assert!(out.success, "the restricted namespace refused the doctor Job or Pod:\n{}\n{}", out.stderr, out.stdout);
    assert_eq!(out.stdout.lines().filter(|l| l.ends_with("(server dry run)")).count(), 2, "{}", out.stdout);
    assert!(!out.stderr.contains("PodSecurity") && !out.stderr.contains("would violate"), "{}", out.stderr);
    // The namespace does enforce: the same Pod without its container securityContext is refused.
    let mut loose = pod.clone();
    loose["spec"]["containers"][0].as_object_mut().unwrap().remove("securityContext");
    let out = apply(&t, &dir, &[&loose], &["--dry-run=server"]);
    assert!(!out.success && out.stderr.contains("violates PodSecurity \"restricted"), "{}", out.stderr);

    let me = format!("--as=system:serviceaccount:{namespace}:{fullname}-doctor");
    let can = |args: &[&str]| {
        let mut all = vec!["auth", "can-i"];
        all.extend_from_slice(args);
        all.push(&me);
        let out = t.cluster.kubectl(admin, &all);
        assert!(out.stdout.trim() == "yes" || out.stdout.trim() == "no", "{args:?}: {}{}", out.stdout, out.stderr);
        out.success
    };
    let mwc = format!("mutatingwebhookconfigurations.admissionregistration.k8s.io/{fullname}");
    let service = format!("services/{fullname}");
    let probe = format!("ingresses.networking.k8s.io/{fullname}-doctor-probe");
    let lease = format!("leases.coordination.k8s.io/{fullname}");
    for (args, want) in [
        (vec!["get", mwc.as_str()], true),
        (vec!["get", "mutatingwebhookconfigurations.admissionregistration.k8s.io/other"], false),
        (vec!["list", "mutatingwebhookconfigurations.admissionregistration.k8s.io"], false),
        (vec!["patch", mwc.as_str()], false),
        (vec!["get", service.as_str(), "-n", namespace], true),
        (vec!["get", "services/other", "-n", namespace], false),
        (vec!["list", "endpointslices.discovery.k8s.io", "-n", namespace], true),
        (vec!["list", "endpointslices.discovery.k8s.io", "-n", "chart-doctor-web"], false),
        (vec!["get", lease.as_str(), "-n", namespace], true),
        (vec!["patch", lease.as_str(), "-n", namespace], false),
        (vec!["get", "leases.coordination.k8s.io/other", "-n", namespace], false),
        // Its probe: created in its namespace, and by its one name written to and deleted.
        (vec!["create", "ingresses.networking.k8s.io", "-n", namespace], true),
        (vec!["get", probe.as_str(), "-n", namespace], true),
        (vec!["delete", probe.as_str(), "-n", namespace], true),
        (vec!["patch", probe.as_str(), "--subresource=status", "-n", namespace], true),
        (vec!["patch", probe.as_str(), "-n", namespace], false),
        (vec!["update", probe.as_str(), "--subresource=status", "-n", namespace], false),
        (vec!["delete", "ingresses.networking.k8s.io/other", "-n", namespace], false),
        (vec!["patch", "ingresses.networking.k8s.io/other", "--subresource=status", "-n", namespace], false),
        (vec!["list", "ingresses.networking.k8s.io", "-A"], false),
        (vec!["create", "ingresses.networking.k8s.io", "-n", "chart-doctor-web"], false),
        (vec!["patch", "ingresses.networking.k8s.io/front", "--subresource=status", "-n", "chart-doctor-web"], false),
        (vec!["get", &format!("namespaces/{namespace}")], true),
        (vec!["get", "namespaces/chart-doctor-web"], false),
        (vec!["list", "ingressclasses.networking.k8s.io"], true),
        (vec!["create", "subjectaccessreviews.authorization.k8s.io"], true),
        (vec!["get", "secrets", "-n", namespace], false),
        (vec!["create", "pods", "-n", namespace], false),
    ] {
        assert_eq!(can(&args), want, "can-i {args:?}");
    }

    // With doctor.probe: the Ingress grants name that one Ingress in its namespace, nothing else.
    let docs = render(&helm, release, namespace, &["doctor.probe=chart-doctor-web/front"]);
    let identity: Vec<&Value> = docs
        .iter()
        .filter(|d| {
            d["metadata"]["labels"]["app.kubernetes.io/component"] == "doctor"
                && !["Job", "Pod"].contains(&d["kind"].as_str().unwrap())
        })
        .collect();
    assert_eq!(identity.len(), 7, "the probe's Role and binding in its namespace instead");
    let out = apply(&t, &dir, &identity, &["--force-conflicts"]);
    assert!(out.success, "{}", out.stderr);
    for (args, want) in [
        (vec!["get", mwc.as_str()], true),
        (vec!["get", "ingresses.networking.k8s.io/front", "-n", "chart-doctor-web"], true),
        (vec!["patch", "ingresses.networking.k8s.io/front", "--subresource=status", "-n", "chart-doctor-web"], true),
        (vec!["patch", "ingresses.networking.k8s.io/other", "--subresource=status", "-n", "chart-doctor-web"], false),
        (vec!["delete", "ingresses.networking.k8s.io/front", "-n", "chart-doctor-web"], false),
        (vec!["create", "ingresses.networking.k8s.io", "-n", "chart-doctor-web"], false),
        (vec!["get", "ingresses.networking.k8s.io/front", "-n", namespace], false),
        (vec!["list", "ingresses.networking.k8s.io", "-A"], false),
        (vec!["patch", "ingresses.networking.k8s.io/front", "-n", "chart-doctor-web"], false),
    ] {
        assert_eq!(can(&args), want, "with a probe: can-i {args:?}");
    }

    // Policy mode: the release's admission policies by name and the policies' sources (a
    // publish Service by name), no webhook configuration.
    let edge = "policies[0].publishService=chart-doctor-web/edge";
    let docs = render(
        &helm,
        release,
        namespace,
        &["admission.mode=policy", "policies[0].name=web", "policies[0].ingressClasses[0]=web", edge],
    );
    let identity: Vec<&Value> = docs
        .iter()
        .filter(|d| {
            d["metadata"]["labels"]["app.kubernetes.io/component"] == "doctor"
                && !["Job", "Pod"].contains(&d["kind"].as_str().unwrap())
        })
        .collect();
    assert_eq!(identity.len(), 9, "and the publish Service's Role and binding");
    let out = apply(&t, &dir, &identity, &["--force-conflicts"]);
    assert!(out.success, "{}", out.stderr);
    let map = format!("mutatingadmissionpolicies.admissionregistration.k8s.io/{fullname}-ingress-0");
    let binding = format!("mutatingadmissionpolicybindings.admissionregistration.k8s.io/{fullname}-ingress-0");
    // kubectl resolves a resource by discovery: where MutatingAdmissionPolicies are not served
    // (1.31, which .ci/run runs this module on too) it cannot ask about them.
    let served = t.cluster.kubectl(admin, &["api-resources", "--api-group=admissionregistration.k8s.io"]);
    let maps = served.stdout.contains("mutatingadmissionpolicies");
    if maps {
        for (args, want) in [
            (vec!["get", map.as_str()], true),
            (vec!["get", binding.as_str()], true),
            (vec!["update", map.as_str()], false),
            (vec!["get", "mutatingadmissionpolicies.admissionregistration.k8s.io/other"], false),
        ] {
            assert_eq!(can(&args), want, "policy mode: can-i {args:?}");
        }
    }
    for (args, want) in [
        (vec!["get", "services/edge", "-n", "chart-doctor-web"], true),
        (vec!["get", "services/other", "-n", "chart-doctor-web"], false),
        (vec!["list", "ingressclasses.networking.k8s.io"], true),
        (vec!["get", lease.as_str(), "-n", namespace], true),
        (vec!["create", "ingresses.networking.k8s.io", "-n", namespace], true),
    ] {
        assert_eq!(can(&args), want, "policy mode: can-i {args:?}");
    }
    // Server-side apply leaves the webhook mode's rules of the same objects to its owner; the
    // ClusterRole's rules are replaced whole, so the webhook configuration is no longer granted.
    assert!(!can(&["get", mwc.as_str()]), "policy mode grants no webhook configuration");

    let out = t.cluster.kubectl(admin, &["delete", "namespace", namespace, "chart-doctor-web", "--wait=false"]);
    assert!(out.success, "{}", out.stderr);
    for kind in ["clusterrole", "clusterrolebinding"] {
        let out = t.cluster.kubectl(admin, &["delete", kind, &format!("{fullname}-doctor")]);
        assert!(out.success, "{}", out.stderr);
    }
}

/// helm runs them: after an upgrade helm creates the doctor Job and waits for it (with no kubelet
/// it never finishes, so helm fails the upgrade when its --timeout is up: what a broken webhook
/// would do to a release), the next upgrade replaces it (before-hook-creation), and `helm test`
/// creates the doctor Pod, replaced on the next run too.
#[tokio::test]
async fn helm_runs_the_doctor_hook_after_an_upgrade_and_the_test_pod() {
    let t = TestEnv::new("chart-doctor-hook").await;
    let dir = t.cluster.scratch_dir("chart-doctor-hook");
    let helm = Helm::new(3, &dir);
    let admin = t.cluster.admin_kubeconfig();
    let (release, namespace) = ("hook", "chart-doctor-hook");
    let fullname = "hook-ingress-status-guard";
    let setup = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace, "labels": {
        "pod-security.kubernetes.io/enforce": "restricted"}}});
    let out = t.cluster.kubectl(admin, &["apply", "--server-side", "-f", &write(&dir, "ns.json", &setup.to_string())]);
    assert!(out.success, "{}", out.stderr);
    let kubeconfig = format!("--kubeconfig={}", admin.display());
    // Scoped to one label no namespace has: this API server is shared with other tests.
    let scope = "webhook.namespaceSelector.matchLabels.isg-chart-doctor-hook=none";
    let base = ["--namespace", namespace, kubeconfig.as_str(), "--set", scope];
    let run = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend_from_slice(&base);
        helm.run(&all)
    };
    let uid = |kind: &str, name: &str| {
        let out = t.cluster.kubectl(admin, &["-n", namespace, "get", kind, name, "-o", "jsonpath={.metadata.uid}"]);
        assert!(out.success, "{kind} {name}: {}", out.stderr);
        out.stdout
    };

    let out = run(&["install", release, CHART, "--set", super::NO_HOOK]);
    assert!(out.success, "helm install: {}", out.stderr);
    let job = format!("{fullname}-doctor");
    let out = t.cluster.kubectl(admin, &["-n", namespace, "get", "job", &job]);
    assert!(!out.success, "no hook Job when doctor.hook.enabled=false");

    let out = run(&["upgrade", release, CHART, "--timeout", "10s"]);
    assert!(
        !out.success && out.stderr.contains("post-upgrade"),
        "helm upgrade did not wait for the hook: {}",
        out.stderr
    );
    let first = uid("job", &job);
    let args = t.cluster.kubectl(
        admin,
        &["-n", namespace, "get", "job", &job, "-o", "jsonpath={.spec.template.spec.containers[0].args}"],
    );
    assert!(args.stdout.contains("--wait=2m"), "{}", args.stdout);
    let out = run(&["upgrade", release, CHART, "--timeout", "10s"]);
    assert!(!out.success, "{}", out.stdout);
    assert_ne!(uid("job", &job), first, "the next upgrade replaces the hook Job");

    let pod = format!("{fullname}-doctor-test");
    let test = || helm.run(&["test", release, "--namespace", namespace, &kubeconfig, "--timeout", "5s"]);
    let out = test();
    assert!(!out.success, "helm test passed with no kubelet to run its Pod: {}", out.stdout);
    let first = uid("pod", &pod);
    let _ = test();
    assert_ne!(uid("pod", &pod), first, "the next helm test replaces the Pod");

    // --no-hooks: the post-delete Job that removes admission objects would wait for a kubelet.
    let out = helm.run(&["uninstall", release, "--namespace", namespace, &kubeconfig, "--no-hooks"]);
    assert!(out.success, "{}", out.stderr);
    let out = t.cluster.kubectl(admin, &["delete", "namespace", namespace, "--wait=false"]);
    assert!(out.success, "{}", out.stderr);
}

/// doctor's `permissions` check against the chart's own RBAC for the guard: in each mode, the
/// rendered Roles and ClusterRoles (for a policy with a publish Service) grant everything doctor
/// asks the API server about, and without them doctor names what is missing.
#[tokio::test]
async fn the_charts_guard_rbac_passes_doctors_permissions_check() {
    let t = TestEnv::new("chart-doctor-perm").await;
    let dir = t.cluster.scratch_dir("chart-doctor-perm");
    let helm = Helm::new(3, &dir);
    let admin = t.cluster.admin_kubeconfig();
    let kubeconfig = format!("--kubeconfig={}", admin.display());
    let (release, namespace) = ("perm", "chart-doctor-perm");
    let fullname = "perm-ingress-status-guard";
    let setup = json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "chart-doctor-perm-edge"}},
    ]});
    let out =
        t.cluster.kubectl(admin, &["apply", "--server-side", "-f", &write(&dir, "setup.json", &setup.to_string())]);
    assert!(out.success, "{}", out.stderr);
    let policy = [
        "policies[0].name=web",
        "policies[0].ingressClasses[0]=web",
        "policies[0].publishService=chart-doctor-perm-edge/lb",
    ];
    for mode in ["webhook", "policy"] {
        let mut set = policy.to_vec();
        let admission = format!("admission.mode={mode}");
        set.push(&admission);
        let docs = render(&helm, release, namespace, &set);
        let config = write(
            &dir,
            &format!("{mode}.yaml"),
            docs.iter().find(|d| d["kind"] == "ConfigMap").unwrap()["data"]["config.yaml"].as_str().unwrap(),
        );
        let doctor = |extra: &[&str]| {
            let mut args = vec![
                "doctor".to_owned(),
                kubeconfig.clone(),
                format!("--config={config}"),
                format!("--admission={mode}"),
                format!("--webhook-configuration={fullname}"),
                format!("--leader-election-namespace={namespace}"),
                format!("--leader-election-lease-name={fullname}"),
                format!("--service-account={namespace}/{fullname}"),
                format!("--probe-namespace={namespace}"),
            ];
            args.extend(extra.iter().map(ToString::to_string));
            let out = std::process::Command::new(crate::support::webhook::BINARY)
                .args(&args)
                .env_remove("KUBECONFIG")
                .output()
                .expect("run doctor");
            let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
            println!("$ doctor ({mode})\n{stdout}{}", String::from_utf8_lossy(&out.stderr));
            stdout.lines().find(|l| l.split_whitespace().nth(1) == Some("permissions")).unwrap_or_default().to_owned()
        };
        let before = doctor(&[]);
        assert!(
            before.starts_with("FAIL") && before.contains(&format!("ServiceAccount {namespace}/{fullname} may not:")),
            "{mode}: {before}"
        );
        // The guard's identity and grants, as the chart renders them (not doctor's own).
        let grants: Vec<&Value> = docs
            .iter()
            .filter(|d| {
                ["ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"]
                    .contains(&d["kind"].as_str().unwrap_or_default())
                    && d["metadata"]["labels"]["app.kubernetes.io/component"] != "doctor"
                    && d["metadata"]["labels"]["app.kubernetes.io/component"] != "certgen"
            })
            .collect();
        let out = apply(&t, &dir, &grants, &["--force-conflicts"]);
        assert!(out.success, "{}", out.stderr);
        let after = eventually_line(|| doctor(&[]));
        assert!(after.starts_with("PASS"), "{mode}: the chart's RBAC is all the mode needs: {after}");
        // Gone again for the next mode: its rules differ.
        let names: Vec<String> = grants
            .iter()
            .filter(|d| d["kind"].as_str().unwrap().starts_with("Cluster"))
            .map(|d| {
                format!("{}/{}", d["kind"].as_str().unwrap().to_lowercase(), d["metadata"]["name"].as_str().unwrap())
            })
            .collect();
        let mut args = vec!["delete", "--ignore-not-found"];
        args.extend(names.iter().map(String::as_str));
        let out = t.cluster.kubectl(admin, &args);
        assert!(out.success, "{}", out.stderr);
    }
    let out = t.cluster.kubectl(admin, &["delete", "namespace", namespace, "chart-doctor-perm-edge", "--wait=false"]);
    assert!(out.success, "{}", out.stderr);
}

/// `line()` once the API server's authorizer has seen new grants (RBAC is read from a cache).
fn eventually_line(line: impl Fn() -> String) -> String {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let found = line();
        if found.starts_with("PASS") || std::time::Instant::now() > deadline {
            return found;
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
}
