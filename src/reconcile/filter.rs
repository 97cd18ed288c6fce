//! Which watched objects the reconciler keeps: those some policy of their kind could govern by
//! class, in the webhook's scope, so other controllers' objects cost nothing. Pure;
//! [`Filter::widening`] says what a new filter admits that the old one did not.
//!
//! A superset of what [`crate::decision::decide`] governs: a policy's `namespaceSelector` is not
//! applied here, so a Namespace's labels changing never needs a re-list.

use std::collections::HashSet;

use crate::{
    kind::{Classes, Governed},
    policy::Policies,
};

/// The classes a filter admits: `None` is every class (a policy governs every object, or
/// the classes its controllers name are not read yet).
#[derive(Debug, Clone, PartialEq, Eq)]
struct ByClass {
    names: HashSet<String>,
    /// Objects naming no class.
    classless: bool,
}

/// What a new filter admits that the old one did not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Widening {
    /// Nothing.
    None,
    /// The objects of these Namespaces (sorted), entering the scope; by class, nothing more.
    Namespaces(Vec<String>),
    /// Objects anywhere (classes, or a scope of every Namespace): a re-list of every object.
    Everywhere,
}

/// Which objects of one kind to keep; the default keeps everything (nothing known yet).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Filter {
    classes: Option<ByClass>,
    /// `None`: every Namespace (no webhook scope, or not known yet).
    namespaces: Option<HashSet<String>>,
}

impl Filter {
    /// The filter of kind `K` under `policies`, its classes (`None` until listed) and scope.
    pub(crate) fn of<K: Governed>(
        policies: &Policies,
        classes: Option<&Classes>,
        namespaces: Option<HashSet<String>>,
    ) -> Filter {
        Filter { classes: by_class::<K>(policies, classes), namespaces }
    }

    /// Whether an object in `namespace` naming `class` is kept.
    pub(crate) fn admits(&self, namespace: &str, class: Option<&str>) -> bool {
        self.in_scope(namespace)
            && self.classes.as_ref().is_none_or(|c| match class {
                Some(class) => c.names.contains(class),
                None => c.classless,
            })
    }

    /// Whether the scope holds `namespace` (every one when not known).
    pub(crate) fn in_scope(&self, namespace: &str) -> bool {
        self.namespaces.as_ref().is_none_or(|n| n.contains(namespace))
    }

    /// Whether this filter admits some object that `old` rejects.
    #[cfg(test)]
    pub(crate) fn widens(&self, old: &Filter) -> bool {
        self.widening(old) != Widening::None
    }

    /// What this filter admits that `old` rejects.
    pub(crate) fn widening(&self, old: &Filter) -> Widening {
        let classes = match (&self.classes, &old.classes) {
            (_, None) => false,
            (None, Some(_)) => true,
            (Some(new), Some(old)) => (new.classless && !old.classless) || !new.names.is_subset(&old.names),
        };
        match (&self.namespaces, &old.namespaces) {
            _ if classes => Widening::Everywhere,
            (_, None) => Widening::None,
            (None, Some(_)) => Widening::Everywhere,
            (Some(new), Some(old)) => {
                let mut entering: Vec<String> = new.difference(old).cloned().collect();
                entering.sort_unstable();
                if entering.is_empty() { Widening::None } else { Widening::Namespaces(entering) }
            }
        }
    }
}

/// The classes `policies` could govern objects of kind `K` by, as [`crate::policy::ClassScope::matches`]
/// reads them: listed classes, classes of listed controllers, and class-less objects
/// (`watchIngressWithoutClass`, or through a default class the same policy governs).
fn by_class<K: Governed>(policies: &Policies, classes: Option<&Classes>) -> Option<ByClass> {
    let kind = K::KIND;
    // Matching reads class objects only when this says so (`decision::subject`).
    let need = policies.need_classes(kind);
    let known = classes.filter(|_| need);
    let mut all = ByClass { names: HashSet::new(), classless: false };
    if need && known.is_none() {
        // Not listed yet: a controller's classes could be any, and any default class could be
        // one a policy names.
        if policies.of(kind).any(|p| !p.scope.controllers.is_empty()) {
            return None;
        }
        all.classless = kind.info().default_class;
    }
    for policy in policies.of(kind) {
        let scope = &policy.scope;
        if scope.classes.is_empty() && scope.controllers.is_empty() {
            return None;
        }
        let mut own: HashSet<&str> = scope.classes.iter().map(String::as_str).collect();
        for (name, class) in known.into_iter().flatten() {
            if class.controller.as_ref().is_some_and(|c| scope.controllers.contains(c)) {
                own.insert(name);
            }
        }
        let default_governed = kind.info().default_class
            && known.into_iter().flatten().any(|(name, class)| class.default && own.contains(name.as_str()));
        all.classless |= scope.without_class || default_governed;
        all.names.extend(own.into_iter().map(str::to_owned));
    }
    Some(all)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kind::{Class, ingress::Ingresses};

    fn policies(yaml: &str) -> Policies {
        crate::policy::parse_file("p.yaml", yaml).unwrap()
    }

    fn classes() -> Classes {
        let class = |controller: &str, default| Class { controller: Some(controller.into()), default };
        Classes::from([
            ("public".into(), class("k8s.io/ingress-nginx", true)),
            ("traefik".into(), class("traefik.io/ingress-controller", false)),
        ])
    }

    fn admitted(f: &Filter) -> Vec<&'static str> {
        let cases =
            [("a", Some("nginx")), ("a", Some("public")), ("a", Some("traefik")), ("a", None), ("b", Some("nginx"))];
        let shown = ["nginx", "public", "traefik", "classless", "b/nginx"];
        cases.iter().zip(shown).filter(|((ns, class), _)| f.admits(ns, *class)).map(|(_, s)| s).collect()
    }

    #[test]
    fn keeps_what_some_policy_could_govern_by_class() {
        let by_name = policies("policies: [{name: p, ingressClasses: [nginx], publishStatusAddress: 192.0.2.1}]");
        let f = Filter::of::<Ingresses>(&by_name, Some(&classes()), None);
        assert_eq!(admitted(&f), ["nginx", "b/nginx"], "the default class is not the policy's");

        let by_controller = policies(
            "policies: [{name: p, controllerClasses: [k8s.io/ingress-nginx], publishStatusAddress: 192.0.2.1}]",
        );
        let f = Filter::of::<Ingresses>(&by_controller, Some(&classes()), None);
        assert_eq!(admitted(&f), ["public", "classless"], "by controller, and class-less through the default class");
        assert_eq!(Filter::of::<Ingresses>(&by_controller, None, None), Filter::default(), "classes unknown: all");
        let f = Filter::of::<Ingresses>(&by_name, None, None);
        assert_eq!(admitted(&f), ["nginx", "classless", "b/nginx"], "the default class unknown: class-less kept");

        let without = "policies: [{name: p, ingressClasses: [nginx], watchIngressWithoutClass: true, publishStatusAddress: 192.0.2.1}]";
        let f = Filter::of::<Ingresses>(&policies(without), None, None);
        assert_eq!(admitted(&f), ["nginx", "classless", "b/nginx"]);

        let every = policies("policies: [{name: p, publishStatusAddress: 192.0.2.1}]");
        assert_eq!(admitted(&Filter::of::<Ingresses>(&every, None, None)).len(), 5, "a policy of every class");

        let none = Policies::new(Vec::new()).unwrap();
        assert!(admitted(&Filter::of::<Ingresses>(&none, Some(&classes()), None)).is_empty(), "no policy: nothing");
    }

    #[test]
    fn scope_rejects_other_namespaces() {
        let every = policies("policies: [{name: p, publishStatusAddress: 192.0.2.1}]");
        let f = Filter::of::<Ingresses>(&every, None, Some(HashSet::from(["a".to_owned()])));
        assert_eq!(admitted(&f), ["nginx", "public", "traefik", "classless"]);
    }

    #[test]
    fn widening_is_told_from_narrowing() {
        let p = |classes: &str| {
            policies(&format!("policies: [{{name: p, ingressClasses: [{classes}], publishStatusAddress: 192.0.2.1}}]"))
        };
        let ns = |names: &[&str]| Some(names.iter().map(|n| (*n).to_owned()).collect::<HashSet<_>>());
        let none = Classes::new();
        let f = |classes: &str, namespaces| Filter::of::<Ingresses>(&p(classes), Some(&none), namespaces);
        let (one, two) = (f("nginx", None), f("nginx, public", None));
        assert!(two.widens(&one) && !one.widens(&two) && !one.widens(&one));
        assert!(Filter::default().widens(&one) && !one.widens(&Filter::default()));
        let (narrow, wide) = (f("nginx", ns(&["a"])), f("nginx", ns(&["a", "b"])));
        assert!(wide.widens(&narrow) && !narrow.widens(&wide));
        assert_eq!(wide.widening(&narrow), Widening::Namespaces(vec!["b".into()]), "b's list alone");
        assert_eq!(f("nginx", ns(&["c", "b"])).widening(&narrow), Widening::Namespaces(vec!["b".into(), "c".into()]));
        let (other, both) = (f("nginx", ns(&["b"])), f("nginx, public", ns(&["a", "b"])));
        assert_eq!(other.widening(&narrow), Widening::Namespaces(vec!["b".into()]), "a leaving changes nothing");
        assert_eq!(both.widening(&narrow), Widening::Everywhere, "a class too: every object");
        assert_eq!(one.widening(&narrow), Widening::Everywhere, "every Namespace");
        assert!(narrow.in_scope("a") && !narrow.in_scope("b") && one.in_scope("b"));
        assert!(one.widens(&narrow), "a scope no longer known keeps every Namespace");
        let without = "policies: [{name: p, ingressClasses: [nginx], watchIngressWithoutClass: true, publishStatusAddress: 192.0.2.1}]";
        assert!(Filter::of::<Ingresses>(&policies(without), Some(&none), None).widens(&one), "class-less objects too");
        assert!(Filter::of::<Ingresses>(&p("nginx"), None, None).widens(&one), "the default class not known yet");
    }
}
