//! The I/O of `check` and `explain` that is theirs alone: the stored objects judged, read in
//! one-shot, paged, time-bounded lists ([`crate::client`]); the sources are read by
//! [`crate::sources::snapshot`].

use std::time::Duration;

use k8s_openapi::api::networking::v1::Ingress;
use kube::{Api, Client, api::ListParams};

use super::PAGE_SIZE;
use crate::{
    client::{RequestError, list_all, list_served},
    kind::Governed as _,
    kind::gateway::{GatewayWrite, Gateways, LeanGateway, LeanGatewayClass},
    kind::ingress::{StatusWrite, Stored},
};

/// Lists Ingresses page by page, keeping only what the decision reads.
pub(super) async fn stored_ingresses(
    client: &Client,
    namespace: Option<&str>,
    timeout: Duration,
) -> Result<Vec<StatusWrite>, RequestError> {
    let api: Api<Ingress> = match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    list_all(&api, ListParams::default().limit(PAGE_SIZE), "Ingresses", timeout, |ingress| Stored::of(&ingress).write)
        .await
}

/// Lists Gateways page by page, keeping what the Gateway decision reads (each already bounded
/// by the lean reader); `None` when the API server serves no Gateways.
pub(super) async fn stored_gateways(
    client: &Client,
    namespace: Option<&str>,
    timeout: Duration,
) -> Result<Option<Vec<GatewayWrite>>, RequestError> {
    let api: Api<LeanGateway> = match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    // The API server names every object it lists: `leaned` always has a write.
    let written = |gateway| Gateways::leaned(gateway).map(|lean| lean.write).unwrap_or_default();
    list_served(&api, ListParams::default().limit(PAGE_SIZE), "Gateways", timeout, written).await
}

/// Every GatewayClass's controller, for Gateway policies that match by `gatewayControllers`
/// (none when the API server serves no GatewayClasses).
pub(super) async fn gateway_classes(
    client: &Client,
    timeout: Duration,
) -> Result<Vec<(String, Option<String>)>, RequestError> {
    use kube::ResourceExt as _;
    let api: Api<LeanGatewayClass> = Api::all(client.clone());
    let classes = list_served(&api, ListParams::default().limit(PAGE_SIZE), "GatewayClasses", timeout, |class| {
        (class.name_any(), class.controller)
    });
    Ok(classes.await?.unwrap_or_default())
}
