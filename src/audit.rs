//! Findings: who tried to write which addresses to a governed Ingress, against what the policy
//! says, and what the webhook did about it. Pure values, plus their log line.

pub(crate) mod events;
pub(crate) mod ratelimit;

use crate::{
    address::{Address, Addresses, Written},
    decision::{Action, Verdict},
    names::truncate,
    review::{Review, Target},
};

/// The Events API refuses notes over 1 kB.
const MAX_NOTE: usize = 1024;
/// Longest caller-chosen text field of the log line (the address lists have their own bound).
const MAX_FIELD: usize = 1024;

/// The identity that sent a status write, from `request.userInfo`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Writer {
    pub username: String,
    pub groups: Vec<String>,
    /// `(namespace, name)` when the writer is a ServiceAccount.
    pub service_account: Option<(String, String)>,
}

impl Writer {
    pub fn new(username: String, groups: Vec<String>) -> Self {
        let service_account = username
            .strip_prefix("system:serviceaccount:")
            .and_then(|rest| rest.split_once(':'))
            // As the API server names them; a username cut by the reader ends in `…`.
            .filter(|(ns, name)| crate::names::is_dns1123_label(ns) && crate::names::is_dns1123_subdomain(name))
            .map(|(ns, name)| (ns.to_owned(), name.to_owned()));
        Writer { username, groups, service_account }
    }
}

/// A governed status write whose addresses differ from the canonical ones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub uid: String,
    /// `metadata.uid` of the Ingress, so `kubectl describe` finds the Event.
    pub object_uid: Option<String>,
    pub namespace: String,
    pub name: String,
    pub class: Option<String>,
    pub policy: String,
    pub writer: Writer,
    pub attempted: Vec<Address>,
    /// Entries written after `attempted`, counted but not kept.
    pub attempted_omitted: usize,
    pub canonical: Vec<Address>,
    pub action: Action,
    pub dry_run: bool,
}

impl Finding {
    /// The finding of a review, when its verdict is a mismatch. Takes the review and verdict
    /// apart instead of copying them (the handler is done with both): fewer allocations on the
    /// request path.
    pub fn take(review: Review, verdict: Verdict<'_>) -> Option<Finding> {
        let (Verdict::Mismatch { policy, action, canonical }, Target::IngressStatus { write, object_uid, .. }) =
            (verdict, review.target)
        else {
            return None;
        };
        Some(Finding {
            uid: review.uid.into_owned(),
            object_uid: object_uid.map(std::borrow::Cow::into_owned),
            namespace: write.namespace,
            name: write.name,
            class: write.class,
            policy: policy.name.clone(),
            writer: Writer::new(review.user.username.into_owned(), review.user.groups),
            attempted: write.addresses,
            attempted_omitted: write.omitted,
            canonical: canonical.into_owned(),
            action,
            dry_run: review.dry_run,
        })
    }

    /// What was done, as the `action` label of the rogue-writes metric: a dry run changes
    /// nothing, so it is counted apart from the writes that happened.
    pub fn outcome(&self) -> &'static str {
        if self.dry_run { "dry_run" } else { self.action.result() }
    }

    /// What was done, as a verb for people.
    pub fn verb(&self) -> &'static str {
        match self.action {
            Action::Rewrite => "rewritten",
            Action::Deny => "denied",
            Action::Audit => "allowed (audit mode)",
        }
    }

    /// The message of the Kubernetes Event (at most 1 kB, as the events API requires).
    pub fn note(&self) -> String {
        let note = format!(
            "{} wrote status.loadBalancer.ingress [{}]; policy {} requires [{}]; {}",
            self.writer.username,
            Written { kept: &self.attempted, omitted: self.attempted_omitted },
            self.policy,
            Addresses(&self.canonical),
            self.verb()
        );
        truncate(&note, usize::MAX, MAX_NOTE)
    }

    /// One WARN event with every field structured, for log pipelines.
    pub fn log(&self) {
        let (sa_namespace, sa_name) = match &self.writer.service_account {
            Some((ns, name)) => (ns.as_str(), name.as_str()),
            None => ("", ""),
        };
        tracing::warn!(
            uid = %self.uid,
            ingress_namespace = %self.namespace,
            ingress_name = %self.name,
            ingress_class = %truncate(self.class.as_deref().unwrap_or(""), usize::MAX, MAX_FIELD),
            policy = %self.policy,
            writer = %truncate(&self.writer.username, usize::MAX, MAX_FIELD),
            writer_groups = %truncate(&self.writer.groups.join(","), usize::MAX, MAX_FIELD),
            writer_sa_namespace = sa_namespace,
            writer_sa_name = sa_name,
            attempted = %Written { kept: &self.attempted, omitted: self.attempted_omitted },
            canonical = %Addresses(&self.canonical),
            action = self.action.result(),
            dry_run = self.dry_run,
            "rogue status write"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writers() {
        let cases = [
            ("system:serviceaccount:ingress-nginx:ingress-nginx", Some(("ingress-nginx", "ingress-nginx"))),
            ("system:serviceaccount:ns:", None),
            ("system:serviceaccount:ns", None),
            ("system:serviceaccount:ns:a:b", None),
            ("kubernetes-admin", None),
            ("system:node:worker-1", None),
        ];
        for (username, want) in cases {
            let writer = Writer::new(username.to_owned(), vec![]);
            let got = writer.service_account.as_ref().map(|(a, b)| (a.as_str(), b.as_str()));
            assert_eq!(got, want, "{username}");
        }
    }

    #[test]
    fn note_is_bounded() {
        let many: Vec<Address> = (0..200).map(|i| Address::hostname(format!("host-{i}.example.com"))).collect();
        let finding = Finding {
            uid: "u".into(),
            object_uid: None,
            namespace: "ns".into(),
            name: "ing".into(),
            class: None,
            policy: "p".into(),
            writer: Writer::new("rogue".into(), vec![]),
            attempted: many,
            attempted_omitted: 0,
            canonical: vec![Address::hostname("lb.example")],
            action: Action::Rewrite,
            dry_run: false,
        };
        let note = finding.note();
        assert!(note.len() <= 1024 && note.starts_with("rogue wrote status.loadBalancer.ingress [host-0.example.com,"));
        let empty = Finding { attempted: vec![], ..finding };
        assert_eq!(
            empty.note(),
            "rogue wrote status.loadBalancer.ingress [<none>]; policy p requires [lb.example]; rewritten"
        );
    }
}
