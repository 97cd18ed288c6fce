use super::*;

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(std::string::ToString::to_string).collect()
}

fn scope(classes: &[&str], without_class: bool) -> ClassScope {
    ClassScope { classes: strings(classes), controllers: Vec::new(), without_class }
}

fn by_controller(controllers: &[&str], classes: &[&str], without_class: bool) -> ClassScope {
    ClassScope { classes: strings(classes), controllers: strings(controllers), without_class }
}

fn subject(class: Option<&str>) -> Subject<'_> {
    Subject { namespace: "ns", class, ..Default::default() }
}

/// `class` names an IngressClass whose controller is `controller`; `defaults` are the
/// default IngressClasses with their controllers.
fn in_cluster<'a>(class: Option<&'a str>, controller: Option<&str>, defaults: &[(&str, &str)]) -> Subject<'a> {
    Subject {
        class_controller: controller.map(str::to_owned),
        default_classes: defaults.iter().map(|(n, c)| ((*n).to_owned(), Some((*c).to_owned()))).collect(),
        ..subject(class)
    }
}

#[test]
fn class_scope() {
    const NGINX: &str = "k8s.io/ingress-nginx";
    let cases = [
        ("no classes governs all", scope(&[], false), subject(Some("x")), Some(ClassRule::Everything)),
        ("no classes governs class-less", scope(&[], false), subject(None), Some(ClassRule::Everything)),
        ("listed class", scope(&["nginx"], false), subject(Some("nginx")), Some(ClassRule::ClassName)),
        ("other class", scope(&["nginx"], false), subject(Some("traefik")), None),
        ("class-less not governed", scope(&["nginx"], false), subject(None), None),
        ("class-less governed on request", scope(&["nginx"], true), subject(None), Some(ClassRule::WithoutClass)),
        ("without-class does not widen classes", scope(&["nginx"], true), subject(Some("traefik")), None),
        (
            "controller of the Ingress's class",
            by_controller(&[NGINX], &[], false),
            in_cluster(Some("public"), Some(NGINX), &[]),
            Some(ClassRule::Controller(NGINX.into())),
        ),
        (
            "class of another controller",
            by_controller(&[NGINX], &[], false),
            in_cluster(Some("traefik"), Some("traefik.io/ingress-controller"), &[]),
            None,
        ),
        (
            "class without IngressClass object",
            by_controller(&[NGINX], &[], false),
            in_cluster(Some("public"), None, &[]),
            None,
        ),
        (
            "class name or controller, either is enough",
            by_controller(&[NGINX], &["legacy"], false),
            in_cluster(Some("legacy"), None, &[]),
            Some(ClassRule::ClassName),
        ),
        (
            "default class governed by name",
            scope(&["nginx"], false),
            in_cluster(None, None, &[("nginx", NGINX)]),
            Some(ClassRule::DefaultClass("nginx".into())),
        ),
        (
            "default class governed by controller",
            by_controller(&[NGINX], &[], false),
            in_cluster(None, None, &[("public", NGINX)]),
            Some(ClassRule::DefaultClass("public".into())),
        ),
        (
            "default class of another controller",
            by_controller(&[NGINX], &[], false),
            in_cluster(None, None, &[("traefik", "traefik.io/ingress-controller")]),
            None,
        ),
        (
            "default class does not apply to an Ingress with a class",
            scope(&["nginx"], false),
            in_cluster(Some("other"), None, &[("nginx", NGINX)]),
            None,
        ),
        (
            "without-class wins over the default class rule",
            scope(&["nginx"], true),
            in_cluster(None, None, &[("nginx", NGINX)]),
            Some(ClassRule::WithoutClass),
        ),
    ];
    for (name, scope, subject, want) in cases {
        assert_eq!(scope.matches(&subject), want, "case {name}");
    }
}

#[test]
fn namespace_selector_rules() {
    let policy = |selector: Option<&str>| Policy {
        name: "p".into(),
        kind: crate::kind::Kind::Ingress,
        kind_inferred: false,
        scope: scope(&[], false),
        namespace_selector: selector.map(|s| LabelSelector::parse(s).unwrap()),
        sources: vec![Source::Static(vec![Address::hostname("lb.example")])],
        mode: Mode::Enforce,
        keep_ports: false,
        on_unresolved: OnUnresolved::Allow,
    };
    let labels = |pairs: &[(&str, &str)]| -> Option<BTreeMap<String, String>> {
        Some(pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect())
    };
    let cases = [
        ("no selector, any namespace", policy(None), None, true),
        ("labelled namespace", policy(Some("team=blue")), labels(&[("team", "blue")]), true),
        ("other label", policy(Some("team=blue")), labels(&[("team", "green")]), false),
        ("unlabelled namespace", policy(Some("team=blue")), labels(&[]), false),
        ("unknown namespace is not governed", policy(Some("team notin (green)")), None, false),
        ("notin matches unlabelled", policy(Some("team notin (green)")), labels(&[]), true),
    ];
    for (name, policy, namespace_labels, want) in cases {
        let subject = Subject { namespace_labels, ..subject(Some("x")) };
        assert_eq!(policy.matches(&subject).is_some(), want, "case {name}");
    }
}

#[test]
fn service_refs() {
    assert_eq!(ServiceRef::service("ns/svc").unwrap().to_string(), "ns/svc");
    for bad in ["svc", "/svc", "ns/", "Ns/svc", "ns/svc/x", "n.s/svc"] {
        let err = ServiceRef::service(bad).unwrap_err().to_string();
        assert!(err.contains(&format!("{bad:?}")), "{bad}: {err}");
    }
}

#[test]
fn file_policies() {
    let text = r#"
policies:
  - name: public
    ingressClasses: [nginx]
    watchIngressWithoutClass: true
    publishService: ingress-nginx/ingress-nginx-controller
  - name: internal
    ingressClasses: [internal]
    publishStatusAddress: "10.0.0.2, 10.0.0.1,"
    mode: audit
    keepPorts: true
    onUnresolved: deny
"#;
    let policies = parse_file("p.yaml", text).unwrap();
    let public = policies.governing(crate::kind::Kind::Ingress, &subject(Some("nginx"))).unwrap();
    assert_eq!(public.name, "public");
    assert_eq!(policies.governing(crate::kind::Kind::Ingress, &subject(None)).unwrap().name, "public");
    let internal = policies.governing(crate::kind::Kind::Ingress, &subject(Some("internal"))).unwrap();
    assert_eq!(internal.mode, Mode::Audit);
    assert_eq!(internal.on_unresolved, OnUnresolved::Deny);
    assert!(internal.keep_ports);
    assert_eq!(SourceList(&internal.sources).to_string(), "static [10.0.0.1,10.0.0.2]");
    assert!(policies.governing(crate::kind::Kind::Ingress, &subject(Some("traefik"))).is_none());
    assert_eq!(
        policies.services(),
        vec![crate::policy::NamespacedName::service("ingress-nginx/ingress-nginx-controller").unwrap()]
    );
    assert!(
        policies.need_classes(crate::kind::Kind::Ingress),
        "internal may govern class-less Ingresses through the default class"
    );
    assert!(!policies.need_namespaces());
}

#[test]
fn file_sources_classes_and_namespaces() {
    let text = r#"
policies:
  - name: bare-metal
    controllerClasses: [k8s.io/ingress-nginx]
    namespaceSelector: "team in (blue)"
    publishPods: {namespace: ingress-nginx, selector: "app.kubernetes.io/name=ingress-nginx"}
    reportNodeInternalIp: true
  - name: blue-green
    ingressClasses: [nginx]
    namespaceSelector:
      matchExpressions: [{key: team, operator: NotIn, values: [blue]}]
    sources:
      - publishService: ingress/blue
      - publishService: ingress/green
      - publishStatusAddress: lb.example.com
      - publishPods: {namespace: ingress, selector: app=edge}
        reportNodeInternalIp: true
"#;
    let policies = parse_file("p.yaml", text).unwrap();
    let all: Vec<&Policy> = policies.of(crate::kind::Kind::Ingress).collect();
    assert_eq!(
        SourceList(&all[0].sources).to_string(),
        "pods ingress-nginx/{app.kubernetes.io/name=ingress-nginx} (internal node IPs)"
    );
    assert_eq!(all[0].namespace_selector.as_ref().unwrap().to_string(), "team in (blue)");
    assert_eq!(
        SourceList(&all[1].sources).to_string(),
        "service ingress/blue + service ingress/green + static [lb.example.com] + pods ingress/{app=edge} (internal node IPs)"
    );
    assert_eq!(policies.services().len(), 2);
    assert_eq!(
        policies.pod_watches(),
        [
            ("ingress".to_owned(), "app=edge".to_owned()),
            ("ingress-nginx".to_owned(), "app.kubernetes.io/name=ingress-nginx".to_owned())
        ]
    );
    assert!(policies.need_classes(crate::kind::Kind::Ingress) && policies.need_namespaces());
    // Their classes meet only through an IngressClass at run time; their selectors are disjoint.
    assert!(policies.possible_overlaps().is_empty());
}

#[test]
fn overlaps_refused_statically_or_left_to_run_time() {
    let two = |a: &str, b: &str| {
        format!(
            "policies: [{{name: a, publishStatusAddress: 1.1.1.1, {a}}}, {{name: b, publishStatusAddress: 1.1.1.1, {b}}}]"
        )
    };
    let refused = [
        ("controllerClasses: [x]", "controllerClasses: [y, x]", "both govern controller \"x\""),
        (
            "ingressClasses: [n], namespaceSelector: team=a",
            "ingressClasses: [n]",
            "one of them has no namespaceSelector",
        ),
        (
            "ingressClasses: [n], namespaceSelector: team=a",
            "ingressClasses: [n], namespaceSelector: 'team = a'",
            "same namespaceSelector",
        ),
    ];
    for (a, b, want) in refused {
        let err = parse_file("p.yaml", &two(a, b)).unwrap_err().to_string();
        assert!(err.contains(want), "{a} / {b}: {err}");
    }
    let allowed = [
        ("ingressClasses: [n], namespaceSelector: team=a", "ingressClasses: [n], namespaceSelector: team=b", false),
        ("ingressClasses: [n], namespaceSelector: team=a", "ingressClasses: [n], namespaceSelector: '!team'", false),
        ("ingressClasses: [n], namespaceSelector: team=a", "ingressClasses: [n], namespaceSelector: env=prod", true),
        ("ingressClasses: [nginx]", "controllerClasses: [k8s.io/ingress-nginx]", false),
        ("ingressClasses: [nginx], watchIngressWithoutClass: true", "controllerClasses: [k8s.io/ingress-nginx]", false),
    ];
    for (a, b, possible) in allowed {
        let policies = parse_file("p.yaml", &two(a, b)).unwrap_or_else(|e| panic!("{a} / {b}: {e}"));
        assert_eq!(!policies.possible_overlaps().is_empty(), possible, "{a} / {b}");
    }
}

#[test]
fn file_errors_name_the_field() {
    let cases = [
        ("policies: []", "policies: must list at least one policy"),
        (
            "policies: [{name: a}]",
            "policies[0].publishService: one of publishService, publishStatusAddress, publishPods, publishGateway, sources or trustedWriters is required",
        ),
        (
            "policies: [{name: a, sources: [{publishService: a/b}, {}]}]",
            "policies[0].sources[1].publishService: one of publishService",
        ),
        (
            "policies: [{name: a, publishService: a/b, sources: [{publishService: a/c}]}]",
            "policies[0].publishService: publishService and sources are mutually exclusive",
        ),
        (
            "policies: [{name: a, sources: [{publishService: a/b, publishStatusAddress: 1.1.1.1}]}]",
            "policies[0].sources[0].publishService: publishService and publishStatusAddress are mutually exclusive",
        ),
        (
            "policies: [{name: a, sources: [{publishStatusAddress: 'x_y'}]}]",
            "policies[0].sources[0].publishStatusAddress: \"x_y\" is neither",
        ),
        (
            "policies: [{name: a, publishPods: {namespace: Ing, selector: app=x}}]",
            "policies[0].publishPods.namespace: \"Ing\" is not a valid namespace name",
        ),
        (
            "policies: [{name: a, publishPods: {namespace: ing, selector: ''}}]",
            "policies[0].publishPods.selector: must not be empty",
        ),
        (
            "policies: [{name: a, publishPods: {namespace: ing, selector: 'app in x'}}]",
            "policies[0].publishPods.selector: \"app in x\": expected",
        ),
        ("policies: [{name: a, publishPods: {namespace: ing}}]", "missing field `selector`"),
        (
            "policies: [{name: a, publishService: a/b, reportNodeInternalIp: true}]",
            "policies[0].reportNodeInternalIp: applies only to a publishPods source",
        ),
        (
            "policies: [{name: a, reportNodeInternalIp: true, sources: [{publishService: a/b}]}]",
            "policies[0].reportNodeInternalIp: applies only to a publishPods source",
        ),
        (
            "policies: [{name: a, sources: [{publishService: a/b, reportNodeInternalIp: true}]}]",
            "policies[0].sources[0].reportNodeInternalIp: applies only",
        ),
        (
            "policies: [{name: a, ingressClasses: [Nginx], publishService: a/b}]",
            "policies[0].ingressClasses: \"Nginx\" is not a class name (a DNS-1123 subdomain: lowercase letters, digits, '-' and '.'), so no Ingress can be of this class",
        ),
        (
            "policies: [{name: a, controllerClasses: [''], publishService: a/b}]",
            "policies[0].controllerClasses: \"\": controller names must not be empty",
        ),
        (
            "policies: [{name: a, namespaceSelector: 'Team_=x', publishService: a/b}]",
            "policies[0].namespaceSelector: \"Team_\" is not a valid label key",
        ),
        (
            "policies: [{name: a, namespaceSelector: {matchExpressions: [{key: t, operator: Is}]}, publishService: a/b}]",
            "policies[0].namespaceSelector: matchExpressions operator \"Is\"",
        ),
        ("policies: [{name: a, publishService: x}]", "policies[0].publishService: \"x\" must be NAMESPACE/NAME"),
        (
            "policies: [{name: a, publishGateway: x}]",
            "policies[0].publishGateway: \"x\" must be NAMESPACE/NAME of a Gateway",
        ),
        (
            "policies: [{name: a, publishGateway: infra/Edge}]",
            "policies[0].publishGateway: \"infra/Edge\": name \"Edge\" is not a valid Kubernetes name",
        ),
        (
            "policies: [{name: a, publishGateway: infra/edge, publishService: a/b}]",
            "policies[0].publishService: publishService and publishGateway are mutually exclusive",
        ),
        (
            "policies: [{name: a, sources: [{publishService: a/b}, {publishGateway: x.y/edge}]}]",
            "policies[0].sources[1].publishGateway: \"x.y/edge\": namespace \"x.y\" is not a valid Kubernetes name",
        ),
        (
            "policies: [{name: a, publishService: a/b, publishStatusAddress: 1.1.1.1}]",
            "policies[0].publishService: publishService and publishStatusAddress are mutually exclusive",
        ),
        ("policies: [{name: a, publishStatusAddress: 'x_y'}]", "policies[0].publishStatusAddress: \"x_y\" is neither"),
        ("policies: [{name: a, publishStatusAddress: 1.1.1.1, mode: block}]", "unknown variant `block`"),
        ("policies: [{name: a, publishStatusAddress: 1.1.1.1, classes: [x]}]", "unknown field `classes`"),
        (
            "policies: [{name: a, ingressClasses: [x], publishStatusAddress: 1.1.1.1}, {name: a, ingressClasses: [y], publishStatusAddress: 1.1.1.1}]",
            "policies[1].name: \"a\" is used by an earlier policy",
        ),
        (
            "policies: [{name: a, ingressClasses: [x], publishStatusAddress: 1.1.1.1}, {name: b, ingressClasses: [y, x], publishStatusAddress: 1.1.1.1}]",
            "policies \"a\" and \"b\" overlap: both govern class \"x\"",
        ),
        (
            "policies: [{name: a, publishStatusAddress: 1.1.1.1}, {name: b, ingressClasses: [y], publishStatusAddress: 1.1.1.1}]",
            "governs every Ingress",
        ),
        (
            "policies: [{name: a, ingressClasses: [x], watchIngressWithoutClass: true, publishStatusAddress: 1.1.1.1}, {name: b, ingressClasses: [y], watchIngressWithoutClass: true, publishStatusAddress: 1.1.1.1}]",
            "both set watchIngressWithoutClass",
        ),
    ];
    for (text, want) in cases {
        let err = parse_file("p.yaml", text).unwrap_err().to_string();
        assert!(err.contains(want), "{text}\n  got:  {err}\n  want: {want}");
    }
}

#[test]
fn specs_say_which_field_is_wrong() {
    let spec = |svc: Option<&str>, list: Option<&str>| PolicySpec {
        name: "p".into(),
        publish_service: svc.map(String::from),
        publish_status_address: list.map(String::from),
        ..Default::default()
    };
    assert_eq!(spec(None, None).build().unwrap_err(), SpecError::NoSource);
    assert_eq!(
        spec(Some("a/b"), Some("1.1.1.1")).build().unwrap_err(),
        SpecError::BothSources("publishService", "publishStatusAddress")
    );
    let err = spec(None, Some("1.1.1.1, bad_host")).build().unwrap_err();
    assert_eq!(err.field(), "publishStatusAddress");
    assert!(err.to_string().starts_with("\"bad_host\" is neither"), "{err}");
    assert_eq!(spec(Some("x"), None).build().unwrap_err().field(), "publishService");
    assert_eq!(SourceList(&spec(Some("a/b"), None).build().unwrap().sources).to_string(), "service a/b");
    let unnamed = PolicySpec { name: String::new(), ..spec(Some("a/b"), None) };
    assert_eq!(unnamed.build().unwrap_err(), SpecError::EmptyName);
}

#[test]
fn publish_gateway_sources() {
    let text = "policies:
  - {name: cutover, ingressClasses: [nginx], publishGateway: gateway-system/public.v2}
  - name: both
    ingressClasses: [edge]
    sources: [{publishGateway: gateway-system/public.v2}, {publishService: edge/lb}, {publishGateway: infra/internal}]";
    let policies = parse_file("p.yaml", text).unwrap();
    let gw: GatewayRef = crate::policy::NamespacedName::gateway("gateway-system/public.v2").unwrap();
    let first = policies.of(crate::kind::Kind::Ingress).next().unwrap();
    assert_eq!(first.sources, [Source::Gateway(gw.clone())]);
    assert_eq!(first.sources[0].to_string(), "gateway gateway-system/public.v2");
    let internal: GatewayRef = crate::policy::NamespacedName::gateway("infra/internal").unwrap();
    assert_eq!(policies.gateways(), [gw, internal], "each Gateway watched once, sorted");
    assert!(policies.cluster_needs().gateways && policies.cluster_needs().any());
    let no_gateway = parse_file("p.yaml", "policies: [{name: a, publishStatusAddress: 1.1.1.1}]").unwrap();
    assert!(no_gateway.gateways().is_empty() && !no_gateway.cluster_needs().gateways);
}

#[test]
fn gateway_policies_are_apart_and_never_mix_kinds() {
    let text = "policies:
  - {name: ingresses, publishStatusAddress: 192.0.2.1}
  - {name: eg, gatewayClasses: [eg], publishService: gw/envoy}
  - {name: by-controller, gatewayControllers: [example.com/ctl], publishStatusAddress: 192.0.2.2, mode: deny}";
    let policies = parse_file("p.yaml", text).unwrap();
    assert_eq!(
        policies.of(crate::kind::Kind::Ingress).map(|p| p.name.as_str()).collect::<Vec<_>>(),
        ["ingresses"],
        "iter() is Ingress policies"
    );
    let gateways: Vec<_> = policies.of(crate::kind::Kind::Gateway).collect();
    assert_eq!(gateways.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(), ["eg", "by-controller"]);
    assert_eq!(gateways[0].scope.classes, ["eg"]);
    assert_eq!(gateways[1].scope.controllers, ["example.com/ctl"]);
    assert!(policies.need_classes(crate::kind::Kind::Gateway) && !policies.need_classes(crate::kind::Kind::Ingress));
    assert_eq!(policies.services().len(), 1, "a Gateway policy's sources are watched too");
    let gw = Subject { namespace: "a", class: Some("eg"), ..Subject::default() };
    assert_eq!(policies.governing(crate::kind::Kind::Gateway, &gw).map(|p| p.name.as_str()), Some("eg"));
    assert_eq!(
        policies.governing(crate::kind::Kind::Ingress, &gw).map(|p| p.name.as_str()),
        Some("ingresses"),
        "Ingress matching ignores them"
    );
    let by_controller = Subject { class_controller: Some("example.com/ctl".into()), class: Some("x"), ..gw };
    assert_eq!(
        policies.governing(crate::kind::Kind::Gateway, &by_controller).map(|p| p.name.as_str()),
        Some("by-controller")
    );

    let cases = [
        (
            "policies: [{name: a, ingressClasses: [x], gatewayClasses: [eg], publishStatusAddress: 1.1.1.1}]",
            "policies[0].gatewayClasses: ingressClasses governs Ingresses and gatewayClasses Gateways; a policy governs one kind, so split it in two",
        ),
        (
            "policies: [{name: a, watchIngressWithoutClass: true, gatewayControllers: [a/b], publishStatusAddress: 1.1.1.1}]",
            "policies[0].gatewayControllers: watchIngressWithoutClass governs Ingresses and gatewayControllers Gateways",
        ),
        (
            "policies: [{name: a, kind: Gateway, gatewayClasses: [eg, 'e g'], publishStatusAddress: 1.1.1.1}]",
            "policies[0].gatewayClasses: \"e g\" is not a class name (a DNS-1123 subdomain: lowercase letters, digits, '-' and '.'), so no Gateway can be of this class",
        ),
        (
            "policies: [{name: a, gatewayClasses: [''], publishStatusAddress: 1.1.1.1}]",
            "policies[0].gatewayClasses: \"\": names must not be empty",
        ),
        (
            "policies: [{name: a, gatewayClasses: [eg], publishStatusAddress: 1.1.1.1}, {name: b, gatewayClasses: [x, eg], publishStatusAddress: 1.1.1.2}]",
            "policies \"a\" and \"b\" overlap: both govern class \"eg\"",
        ),
        (
            "policies: [{name: a, gatewayClasses: [eg], publishStatusAddress: 1.1.1.1}, {name: a, ingressClasses: [eg], publishStatusAddress: 1.1.1.2}]",
            "policies[1].name: \"a\" is used by an earlier policy",
        ),
    ];
    for (text, want) in cases {
        let err = parse_file("p.yaml", text).unwrap_err().to_string();
        assert!(err.contains(want), "{text}\n  got:  {err}\n  want: {want}");
    }
    let same_class_other_kind = "policies: [{name: a, ingressClasses: [eg], publishStatusAddress: 1.1.1.1}, {name: b, gatewayClasses: [eg], publishStatusAddress: 1.1.1.2}]";
    assert!(parse_file("p.yaml", same_class_other_kind).is_ok(), "an Ingress and a Gateway policy never overlap");
    // Admission objects are named by kind and slot, not by policy name: nothing to refuse.
    let prefixed = "policies: [{name: gateway-web, ingressClasses: [x], publishStatusAddress: 1.1.1.1}, {name: web, kind: Gateway, gatewayClasses: [eg], publishStatusAddress: 1.1.1.2}]";
    assert!(parse_file("p.yaml", prefixed).is_ok());
}

#[test]
fn gateway_policies_that_can_overlap_at_run_time_are_warned_about() {
    // The same as two Ingress policies with selectors that a Namespace can match both of.
    let file = "policies: [\
        {name: a, publishStatusAddress: 1.1.1.1, gatewayClasses: [n], namespaceSelector: team=a},\
        {name: b, publishStatusAddress: 1.1.1.1, gatewayClasses: [n], namespaceSelector: env=prod}]";
    let policies = parse_file("p.yaml", file).unwrap();
    assert_eq!(policies.possible_overlaps(), vec![("a", "b")]);
}

#[test]
fn a_policy_names_its_kind_and_class_fields_of_another_kind_are_refused() {
    use crate::kind::Kind;
    let text = "policies:
  - {name: plain, ingressClasses: [a], publishStatusAddress: 192.0.2.1}
  - {name: said, kind: Ingress, ingressClasses: [nginx], publishStatusAddress: 192.0.2.2}
  - {name: gw, kind: Gateway, gatewayClasses: [eg], publishStatusAddress: 192.0.2.3}
  - {name: inferred, gatewayControllers: [example.com/ctl], publishStatusAddress: 192.0.2.4}";
    let policies = parse_file("p.yaml", text).unwrap();
    let kinds: Vec<_> = policies.iter().map(|p| (p.name.as_str(), p.kind, p.kind_inferred)).collect();
    assert_eq!(
        kinds,
        [
            ("plain", Kind::Ingress, false),
            ("said", Kind::Ingress, false),
            ("gw", Kind::Gateway, false),
            ("inferred", Kind::Gateway, true)
        ],
        "only the last one's kind is inferred, which serve warns about"
    );
    let cases = [
        (
            "policies: [{name: a, kind: Ingress, gatewayClasses: [eg], publishStatusAddress: 1.1.1.1}]",
            "policies[0].gatewayClasses: gatewayClasses is a field of Gateway policies; this policy has kind: Ingress",
        ),
        (
            "policies: [{name: a, kind: Gateway, ingressClasses: [x], publishStatusAddress: 1.1.1.1}]",
            "policies[0].ingressClasses: ingressClasses is a field of Ingress policies; this policy has kind: Gateway",
        ),
        (
            "policies: [{name: a, kind: Pod, publishStatusAddress: 1.1.1.1}]",
            "unknown kind \"Pod\", expected one of Ingress, Gateway, Service",
        ),
    ];
    for (text, want) in cases {
        let err = parse_file("p.yaml", text).unwrap_err().to_string();
        assert!(err.contains(want), "{text}: {err}");
    }
}

/// The fields the leader publishes are every field serde accepts in a policy and in a
/// `sources` entry (read from serde's own list of expected fields), no more, no less.
#[test]
fn the_published_fields_are_every_field_a_policy_accepts() {
    let expected = |yaml: &str| -> Vec<String> {
        let err = parse_file("p.yaml", yaml).unwrap_err().to_string();
        let list = err.split_once("expected one of ").unwrap_or_else(|| panic!("{err}")).1;
        let list = list.split(" at line ").next().unwrap_or(list);
        list.split(", ").map(|f| f.trim_matches(|c: char| c == '`' || c.is_whitespace()).to_owned()).collect()
    };
    let mut accepted = expected("policies: [{name: a, zzz: 1}]");
    accepted.extend(expected("policies: [{name: a, sources: [{zzz: 1}]}]"));
    accepted.sort();
    accepted.dedup();
    let mut published: Vec<String> = super::spec::FIELDS.iter().map(|f| (*f).to_owned()).collect();
    published.sort();
    assert_eq!(published, accepted);
}

#[test]
fn trusted_writers_are_a_source_of_their_own() {
    let ok = parse_file(
        "f",
        "policies:\n  - {name: a, ingressClasses: [traefik], trustedWriters: [system:serviceaccount:traefik:traefik, admin, admin]}\n",
    )
    .unwrap();
    let policy = ok.iter().next().unwrap();
    let writers = policy.trusted_writers().expect("a trusted-writer policy");
    assert!(writers.contains("admin") && writers.contains("system:serviceaccount:traefik:traefik"));
    assert_eq!(
        SourceList(&policy.sources).to_string(),
        "trusted writers [admin, system:serviceaccount:traefik:traefik]"
    );
    let needs = ok.cluster_needs();
    assert!(!needs.services && !needs.gateways && !needs.pods, "no address, no source to watch");
    let cases = [
        ("trustedWriters: []", "policies[0].trustedWriters: must list at least one identity"),
        ("trustedWriters: ['']", "policies[0].trustedWriters: item 0: an identity must not be empty"),
        (
            "trustedWriters: ['system:serviceaccount:Traefik:traefik']",
            "policies[0].trustedWriters: item 0: \"system:serviceaccount:Traefik:traefik\" must be system:serviceaccount:NAMESPACE:NAME",
        ),
        (
            "trustedWriters: [a], publishService: a/b",
            "policies[0].trustedWriters: trustedWriters and publishService cannot be combined",
        ),
        (
            "trustedWriters: [a], sources: [{publishStatusAddress: 192.0.2.1}]",
            "policies[0].trustedWriters: trustedWriters and sources cannot be combined",
        ),
        ("trustedWriters: [a], keepPorts: true", "policies[0].keepPorts: has no meaning with trustedWriters"),
        ("trustedWriters: [a, \"b\\tc\"]", "policies[0].trustedWriters: item 1: \"b\\tc\" holds a control character"),
    ];
    for (fields, want) in cases {
        let text = format!("policies:\n  - {{name: a, {fields}}}\n");
        let error = parse_file("f", &text).unwrap_err().to_string();
        assert!(error.contains(want), "{fields}: {error}");
    }
    let many: Vec<String> = (0..17).map(|i| format!("u{i}")).collect();
    let text = format!("policies:\n  - {{name: a, trustedWriters: [{}]}}\n", many.join(", "));
    let error = parse_file("f", &text).unwrap_err().to_string();
    assert!(error.contains("policies[0].trustedWriters: lists 17 identities, more than the 16"), "{error}");
}
