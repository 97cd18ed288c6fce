//! A one-off list of one Namespace's objects into a follower's projection, beside the watch of
//! every object ([`super::follow_all`]): what a Namespace entering the owner's scope brings.
//! The watch is cluster-wide and filtered by the owner as objects arrive, so it already
//! delivers every later change in that Namespace; only the objects it went by before they were
//! kept need reading, and a list of that Namespace costs its objects, not the cluster's.
//!
//! Pages are bounded as the watch's are ([`super::lists`]); a page over its bytes is asked
//! again with a quarter of the objects, continuing the same list (the continue token is kept)
//! instead of starting it over.

use std::{fmt::Debug, hash::Hash};

use k8s_openapi::NamespaceResourceScope;
use kube::{Api, Resource, api::ListParams};
use serde::de::DeserializeOwned;

use super::{
    Change, Hold, Projected,
    lists::{LIST_PAGE, LIST_PAGE_BYTES, shrunk},
};
use crate::client::{CALL_TIMEOUT, CallError, over_cap, within};

/// Lists `namespace`'s objects of `R` into `held`, each projected by `project` as the watch's
/// are, and adopted ([`super::Projection::adopt`]) unless the watch holds it already; `hook` is
/// told of each adopted one, outside the lock, as of a watch event. Returns how many were
/// adopted.
pub(crate) async fn list_namespace<R, K, V, P: Into<Projected<K, V>>>(
    client: &kube::Client,
    namespace: &str,
    project: impl Fn(R) -> P,
    held: &impl Hold<K, V>,
    mut hook: impl FnMut(Change<K, V>),
) -> Result<usize, CallError>
where
    R: Resource<DynamicType = (), Scope = NamespaceResourceScope> + Clone + Debug + DeserializeOwned,
    K: Eq + Hash + Clone,
{
    let capped: Api<R> = Api::namespaced(crate::client::capped_lists(client, LIST_PAGE_BYTES), namespace);
    // A page of one is bounded by the API server alone, as the watch's are.
    let whole: Api<R> = Api::namespaced(client.clone(), namespace);
    let (mut page, mut token, mut adopted) = (LIST_PAGE, None::<String>, 0);
    loop {
        let mut params = ListParams::default().limit(page);
        if let Some(token) = &token {
            params = params.continue_token(token);
        }
        let api = if page > 1 { &capped } else { &whole };
        let list = match within(CALL_TIMEOUT, api.list(&params)).await {
            Ok(list) => list,
            Err(CallError::Api(e)) if page > 1 && over_cap(&e) => {
                tracing::info!(
                    namespace,
                    page,
                    bytes = LIST_PAGE_BYTES,
                    next = shrunk(page),
                    "a list page was over its bytes: continuing the list in smaller pages"
                );
                page = shrunk(page);
                continue;
            }
            Err(e) => return Err(e),
        };
        token = list.metadata.continue_.filter(|t| !t.is_empty());
        for obj in list.items {
            let Projected::Keep(key, value) = project(obj).into() else { continue };
            if let Some(change) = held.update(|projection| projection.adopt(key, value)) {
                adopted += 1;
                hook(change);
            }
        }
        if token.is_none() {
            return Ok(adopted);
        }
    }
}
