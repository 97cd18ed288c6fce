//! The decision for a Gateway status write: the same policies' sources and modes as for an
//! Ingress, matched by the Gateway's class and its GatewayClass's controller, compared on
//! `status.addresses` (entries `{type, value}`, ignoring order), and unresolved when the
//! canonical set has more entries than the CRD's 16.

use std::collections::HashSet;

use super::Verdict;
use crate::{
    gateway::{GatewayWrite, status::GatewayAddress, status::MAX_ADDRESSES},
    policy::{OnUnresolved, Policies, Subject},
    sources::{Sources, Unresolved},
};

/// Decides one Gateway status write.
pub(crate) fn decide_gateway<'p>(write: &GatewayWrite, policies: &'p Policies, sources: &dyn Sources) -> Verdict<'p> {
    let subject = Subject {
        namespace: &write.namespace,
        class: write.class.as_deref(),
        class_controller: write
            .class
            .as_deref()
            .filter(|_| policies.need_gateway_classes())
            .and_then(|c| sources.gateway_class_controller(c)),
        default_classes: Vec::new(),
        namespace_labels: if policies.need_namespaces() { sources.namespace_labels(&write.namespace) } else { None },
    };
    let Some(policy) = policies.governing_gateway(&subject) else {
        return Verdict::NotGoverned;
    };
    let unresolved = |reason| Verdict::Unresolved { policy, deny: policy.on_unresolved == OnUnresolved::Deny, reason };
    let canonical = match sources.canonical(policy) {
        Err(reason) => return unresolved(reason),
        Ok(canonical) => canonical,
    };
    let entries = GatewayAddress::from_addresses(&canonical);
    if entries.len() > MAX_ADDRESSES {
        return unresolved(Unresolved::TooManyForGateway(entries.len()));
    }
    let written: HashSet<(&str, &str)> = write.addresses.iter().map(|a| (a.kind.as_str(), a.value.as_str())).collect();
    let wanted: HashSet<(&str, &str)> = entries.iter().map(|a| (a.kind.as_str(), a.value.as_str())).collect();
    // A list longer than the reader keeps is longer than any canonical one.
    if write.omitted == 0 && written == wanted {
        Verdict::Canonical { policy }
    } else {
        Verdict::Mismatch { policy, action: policy.mode.into(), canonical }
    }
}
