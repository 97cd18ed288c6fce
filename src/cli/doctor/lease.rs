//! Whether the guard's leader Lease has a live holder (renewed within its duration), judged by
//! this machine's clock as a contender would judge it.

use std::time::Duration;

use k8s_openapi::{api::coordination::v1::Lease, jiff::Timestamp};
use kube::Api;

use super::report::Finding;
use crate::client::bounded;

const CHECK: &str = "lease";

/// Reads Lease `namespace/name` and judges it now.
pub(crate) async fn live_holder(client: &kube::Client, namespace: &str, name: &str, timeout: Duration) -> Finding {
    let api = Api::<Lease>::namespaced(client.clone(), namespace);
    match bounded(|| format!("get Lease {namespace}/{name}"), timeout, api.get_opt(name)).await {
        Ok(found) => judge(&format!("{namespace}/{name}"), found.as_ref(), Timestamp::now()),
        Err(e) => Finding::fail(
            CHECK,
            e.to_string(),
            "give doctor an identity that may get the Lease (the chart's doctor Role)",
        ),
    }
}

/// What Lease `shown` says at `now` (pure).
fn judge(shown: &str, lease: Option<&Lease>, now: Timestamp) -> Finding {
    let running = "is the guard running (`kubectl get pods`), with the reconciler on (--reconcile), and may it write its Lease (see permissions)? Its log says why it does not lead";
    let Some(spec) = lease.and_then(|l| l.spec.as_ref()) else {
        return Finding::fail(CHECK, format!("Lease {shown} not found: no guard has ever led"), running);
    };
    let Some(holder) = spec.holder_identity.as_deref().filter(|h| !h.is_empty()) else {
        return Finding::fail(CHECK, format!("Lease {shown} has no holder: the last leader released it"), running);
    };
    let duration = spec.lease_duration_seconds.unwrap_or(0);
    let Some(renewed) = spec.renew_time.as_ref().map(|t| t.0) else {
        return Finding::fail(CHECK, format!("Lease {shown}: holder {holder:?} has never renewed it"), running);
    };
    let age = now.as_second() - renewed.as_second();
    if age > i64::from(duration) {
        return Finding::fail(
            CHECK,
            format!(
                "Lease {shown}: holder {holder:?} renewed it {age}s ago, over its {duration}s: the leader is gone or stalled"
            ),
            running,
        );
    }
    Finding::pass(CHECK, format!("Lease {shown} is held by {holder:?}, renewed {}s ago (of {duration}s)", age.max(0)))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::coordination::v1::LeaseSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;

    use super::super::report::State;
    use super::*;

    fn lease(holder: &str, renewed_ago: i64) -> Lease {
        Lease {
            spec: Some(LeaseSpec {
                holder_identity: Some(holder.into()),
                lease_duration_seconds: Some(15),
                renew_time: Some(MicroTime(
                    Timestamp::from_second(Timestamp::now().as_second() - renewed_ago).unwrap(),
                )),
                ..LeaseSpec::default()
            }),
            ..Lease::default()
        }
    }

    #[test]
    fn a_lease_is_live_while_renewed_within_its_duration() {
        let now = Timestamp::now();
        assert_eq!(judge("isg/g", Some(&lease("pod-a", 3)), now).state, State::Pass);
        let stale = judge("isg/g", Some(&lease("pod-a", 60)), now);
        assert!(stale.found.contains("over its 15s: the leader is gone or stalled"), "{stale:?}");
        assert!(judge("isg/g", Some(&lease("", 1)), now).found.contains("has no holder"));
        assert!(judge("isg/g", None, now).found.contains("not found"));
    }
}
