use k8s_openapi::api::networking::v1::Ingress;
use serde_json::{Value, json};

use super::*;
use crate::{
    address::parse_static_list,
    review::{self, Target},
};

/// `object` as the API server sends it in a status UPDATE review.
fn review_of(object: &Value) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1",
        "request": {
            "uid": "u-1",
            "kind": {"group": "networking.k8s.io", "version": "v1", "kind": "Ingress"},
            "subResource": "status", "operation": "UPDATE",
            "name": object["metadata"]["name"], "namespace": object["metadata"]["namespace"],
            "userInfo": {"username": "someone"},
            "object": object,
        }
    }))
    .unwrap()
}

/// The three readers of one Ingress: the review's, the stored k8s-openapi Ingress's and the
/// reconciler's lean projection.
fn read_all(object: &Value) -> [(StatusWrite, Option<ClassFrom>, Option<StatusShape>); 3] {
    let body = review_of(object);
    let written = |review: review::Review<'_>| {
        let Target::Ingress(crate::review::Status { write, shape, object_uid, .. }) = review.target else {
            panic!("{object}")
        };
        assert_eq!(object_uid.as_deref(), object["metadata"]["uid"].as_str(), "{object}");
        (write, None, Some(shape))
    };
    let review = written(review::read(&body).unwrap_or_else(|e| panic!("{object}: {e}")));
    let stored = Stored::of(&serde_json::from_value::<Ingress>(object.clone()).unwrap());
    assert_eq!(stored.object_uid.as_deref(), object["metadata"]["uid"].as_str(), "{object}");
    let (lean, resource_version) =
        serde_json::from_value::<LeanIngress>(object.clone()).unwrap().into_write().expect("namespace and name");
    assert_eq!(resource_version.as_deref(), Some("7"), "{object}");
    [review, (stored.write, Some(stored.class_from), Some(stored.shape)), (lean, None, None)]
}

#[test]
fn every_reader_reads_the_same_write() {
    use ClassFrom::{Annotation, Field, Neither};
    use StatusShape::{IngressList, NoIngressList, NoLoadBalancer, NoStatus};
    let class = |field: Value, annotations: Value| {
        let spec = json!({"ingressClassName": field});
        json!({"metadata": {"annotations": annotations}, "spec": spec})
    };
    let status = |status: Value| json!({"status": status});
    // Skipped by every reader, escapes and all.
    let big = "x\\\"".repeat(2_000);
    let annotated = |class: &str| json!({"big": big, CLASS_ANNOTATION: class});
    let ports = json!([{"port": 443, "protocol": "TCP", "error": "e"}]);
    let lb = json!([{"ip": "192.0.2.1"}, {"hostname": "lb.example"},
                    {"ip": "192.0.2.2", "hostname": "both.example", "ports": ports}]);
    let mut listed = parse_static_list("192.0.2.1,lb.example").unwrap();
    listed.push(Address {
        ip: Some("192.0.2.2".into()),
        hostname: Some("both.example".into()),
        ports: vec![PortStatus { port: 443, protocol: "TCP".into(), error: Some("e".into()) }],
    });
    let null = Value::Null;
    let rows: Vec<(&str, Value, Option<&str>, ClassFrom, StatusShape, &[Address])> = vec![
        ("class from the field", class(json!("nginx"), json!({"big": big})), Some("nginx"), Field, NoStatus, &[]),
        (
            "class from the annotation",
            class(null.clone(), annotated("legacy")),
            Some("legacy"),
            Annotation,
            NoStatus,
            &[],
        ),
        ("both: the field wins", class(json!("new"), annotated("old")), Some("new"), Field, NoStatus, &[]),
        ("neither", class(null.clone(), json!({})), None, Neither, NoStatus, &[]),
        ("annotations null", class(null.clone(), null.clone()), None, Neither, NoStatus, &[]),
        ("annotations null, field set", class(json!("nginx"), null.clone()), Some("nginx"), Field, NoStatus, &[]),
        ("empty class name", class(json!(""), annotated("legacy")), Some(""), Field, NoStatus, &[]),
        ("status null", status(null.clone()), None, Neither, NoStatus, &[]),
        ("status empty", status(json!({})), None, Neither, NoLoadBalancer, &[]),
        ("loadBalancer null", status(json!({"loadBalancer": null})), None, Neither, NoLoadBalancer, &[]),
        ("loadBalancer empty", status(json!({"loadBalancer": {}})), None, Neither, NoIngressList, &[]),
        ("ingress list null", status(json!({"loadBalancer": {"ingress": null}})), None, Neither, NoIngressList, &[]),
        ("ingress list empty", status(json!({"loadBalancer": {"ingress": []}})), None, Neither, IngressList, &[]),
        ("ingress list present", status(json!({"loadBalancer": {"ingress": lb}})), None, Neither, IngressList, &listed),
    ];
    for (name, mut object, class, from, shape, addresses) in rows {
        object["apiVersion"] = json!("networking.k8s.io/v1");
        object["kind"] = json!("Ingress");
        let metadata = object["metadata"].as_object_mut().map(std::mem::take).unwrap_or_default();
        object["metadata"] = json!({"name": "web", "namespace": "shop", "uid": "uid-1", "resourceVersion": "7"});
        object["metadata"].as_object_mut().unwrap().extend(metadata);
        let want = StatusWrite {
            namespace: "shop".into(),
            name: "web".into(),
            class: class.map(String::from),
            addresses: addresses.to_vec(),
            omitted: 0,
        };
        for (reader, (write, class_from, read_shape)) in ["review", "stored", "lean"].into_iter().zip(read_all(&object))
        {
            assert_eq!(write, want, "{name}: {reader}");
            assert!(class_from.is_none_or(|f| f == from), "{name}: {reader}: {class_from:?}");
            assert!(read_shape.is_none_or(|s| s == shape), "{name}: {reader}: {read_shape:?}");
        }
    }
}

#[test]
fn a_class_annotation_of_null_is_refused_by_every_reader() {
    let object = json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
        "metadata": {"name": "web", "namespace": "shop", "annotations": {CLASS_ANNOTATION: null}}});
    assert!(review::read(&review_of(&object)).is_err());
    assert!(serde_json::from_value::<Ingress>(object.clone()).is_err());
    assert!(serde_json::from_value::<LeanIngress>(object).is_err());
}

#[test]
fn the_class_precedence() {
    let some = |s: &str| Some(s.to_owned());
    assert_eq!(super::class(some("f"), some("a")), (some("f"), ClassFrom::Field));
    assert_eq!(super::class(None, some("a")), (some("a"), ClassFrom::Annotation));
    assert_eq!(super::class(None, None), (None, ClassFrom::Neither));
}

#[test]
fn the_default_class_is_marked_true() {
    let of = |annotations: Value| -> IngressClass {
        serde_json::from_value(json!({"metadata": {"name": "c", "annotations": annotations}})).unwrap()
    };
    assert!(is_default_class(&of(json!({DEFAULT_CLASS_ANNOTATION: "true"}))));
    assert!(!is_default_class(&of(json!({DEFAULT_CLASS_ANNOTATION: "false"}))));
    assert!(!is_default_class(&of(json!({DEFAULT_CLASS_ANNOTATION: "True"}))));
    assert!(!is_default_class(&of(json!(null))));
}
