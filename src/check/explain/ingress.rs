//! What `check` and `explain` say of an Ingress ([`Explained`]): it is read as a k8s-openapi
//! Ingress, its class shown with the field it came from, its policies' scope in their fields.

use k8s_openapi::api::networking::v1::Ingress;

use crate::kind::ingress::{CLASS_ANNOTATION, ClassFrom, Ingresses, StatusWrite, Stored};
use crate::{check::Explained, names, policy, review, sources::Sources};

impl Explained for Ingresses {
    type Read = Ingress;
    type Stored = Stored;
    const LISTED: &'static str = "Ingresses";

    fn stored(ingress: Ingress) -> Stored {
        Stored::of(&ingress)
    }

    fn stored_write(stored: &Stored) -> &StatusWrite {
        &stored.write
    }

    fn review_target(stored: &Stored) -> review::Target<'static> {
        review::Target::Ingress(review::Status {
            write: stored.write.clone(),
            object_uid: stored.object_uid.clone().map(Into::into),
            shape: stored.shape,
            forged: None,
            metadata: None,
        })
    }

    /// The class and which of the two fields it was read from; an annotation value can be
    /// anything, so it is cut and quoted, and one that is no class name is said to be none.
    fn class_shown(stored: &Stored, _: &dyn Sources) -> String {
        let class = |c: &str| format!("{:?}", names::truncate(c, MAX_CLASS_CHARS, usize::MAX));
        let shown = stored.not_a_class.as_ref().or(stored.write.class.as_ref());
        let none = if stored.not_a_class.is_some() { "; not a class name, so no class" } else { "" };
        match (shown, stored.class_from) {
            (Some(c), ClassFrom::Field) => format!("{} (from spec.ingressClassName{none})", class(c)),
            (Some(c), _) => format!("{} (from annotation {CLASS_ANNOTATION}{none})", class(c)),
            (None, _) => format!("none (neither spec.ingressClassName nor annotation {CLASS_ANNOTATION} is set)"),
        }
    }

    fn governs_shown(policy: &policy::Policy) -> String {
        format!("; governs {}", scope_shown(policy))
    }

    fn none_shown(policies: &policy::Policies) -> String {
        let why: Vec<String> = policies
            .of(crate::kind::Kind::Ingress)
            .map(|p| format!("policy {:?} governs {}", p.name, scope_shown(p)))
            .collect();
        why.join("; ")
    }

    fn rule_shown(rule: &policy::ClassRule) -> String {
        rule.to_string()
    }
}

/// A class is shown by `explain` as read, cut to this many characters.
const MAX_CLASS_CHARS: usize = 80;

/// What an Ingress policy governs, as `explain` says it: its classes or controllers, the
/// class-less Ingresses, and its Namespaces.
fn scope_shown(policy: &policy::Policy) -> String {
    let every = policy.scope.classes.is_empty() && policy.scope.controllers.is_empty();
    let mut classes =
        if every { "every class".to_owned() } else { format!("classes {}", policy.scope.classes.join(",")) };
    if !policy.scope.controllers.is_empty() {
        classes.push_str(&format!(" and IngressClasses of controllers {}", policy.scope.controllers.join(",")));
    }
    let without = if every || policy.scope.without_class {
        "and class-less Ingresses"
    } else {
        "and class-less Ingresses only when the default IngressClass is one of them"
    };
    let namespaces =
        policy.namespace_selector.as_ref().map_or_else(String::new, |s| format!(", in Namespaces labelled {s}"));
    format!("{classes} {without}{namespaces}")
}
