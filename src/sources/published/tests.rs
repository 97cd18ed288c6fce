//! The publish-source cache against the Service's wire: readiness once each source is read, and a
//! source read missing.

use super::*;
use crate::{
    policy::ServiceRef,
    sources::service::{PublishService, ServiceError},
};

fn svc(name: &str) -> ServiceRef {
    ServiceRef { namespace: "ingress".into(), name: name.into() }
}

fn cache(services: &[&str], init: &Initialize) -> Published<PublishService> {
    let spec = crate::PolicySpec { publish_service: Some(format!("ingress/{}", services[0])), ..Default::default() };
    let published = Published::new(&spec.into_policies().unwrap(), Arc::default(), init);
    published.track(&services.iter().map(|s| svc(s)).collect::<Vec<_>>());
    published
}

/// Each source holds readiness until its watch reads it: found, missing or unusable alike;
/// a source no policy names any more is not waited for.
#[test]
fn readiness_waits_for_each_source_to_be_read() {
    let init = Initialize::default();
    let published = cache(&["a", "b", "c"], &init);
    assert_eq!(published.lookup(&svc("a")), Err(Unresolved::NotSynced(svc("a"))));
    published.set(&svc("a"), Ok(vec![Address::parse("192.0.2.1").unwrap()]));
    assert!(!init.initialized(), "b and c are unread");
    published.set(&svc("b"), Err(Why::Unusable(ServiceError::Pending)));
    assert_eq!(published.lookup(&svc("b")), Err(Unresolved::Service(svc("b"), ServiceError::Pending)));
    assert!(!init.initialized(), "c is unread");
    published.track(&[svc("a"), svc("b")]);
    assert!(init.initialized(), "c is no policy's any more");
    assert_eq!(published.lookup(&svc("a")).map(|a| a.len()), Ok(1));
    assert_eq!(published.lookup(&svc("c")), Err(Unresolved::NotSynced(svc("c"))), "forgotten");
    published.set(&svc("c"), Err(Why::Missing));
    assert_eq!(
        published.lookup(&svc("c")),
        Err(Unresolved::NotSynced(svc("c"))),
        "a stopped watch brings nothing back"
    );
}

#[test]
fn a_source_read_missing_is_missing_and_read() {
    let init = Initialize::default();
    let published = cache(&["a"], &init);
    published.set(&svc("a"), Err(Why::Missing));
    assert_eq!(published.lookup(&svc("a")), Err(Unresolved::Missing(svc("a"))));
    assert!(init.initialized());
    assert!(published.inactive().is_empty(), "a Service is never inactive");
}
