//! A one-off list of one Namespace's objects into a follower's projection, beside the watch of
//! every object ([`super::follow_all`]): what a Namespace entering the owner's scope brings.
//! The watch is cluster-wide and filtered by the owner as objects arrive, so it already
//! delivers every later change in that Namespace; only the objects it went by before they were
//! kept need reading, and a list of that Namespace costs its objects, not the cluster's.
//!
//! Pages are bounded as the watch's are, through the same client ([`super::pages`]): a page
//! over its bytes is asked again with a quarter of the objects, continuing the same list
//! instead of starting it over.

use std::{fmt::Debug, hash::Hash};

use k8s_openapi::NamespaceResourceScope;
use kube::{Api, Resource, api::ListParams};
use serde::de::DeserializeOwned;

use super::{
    Change, Hold, Projected,
    lists::LIST_PAGE,
    pages::{PageSize, paging},
};
use crate::client::{CALL_TIMEOUT, CallError, within};

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
    // The page size is this list's own: it shrinks within it, and the next list starts afresh.
    let api: Api<R> = Api::namespaced(paging(client, &PageSize::new(LIST_PAGE)), namespace);
    let (mut token, mut adopted) = (None::<String>, 0);
    loop {
        let mut params = ListParams::default().limit(LIST_PAGE);
        if let Some(token) = &token {
            params = params.continue_token(token);
        }
        let list = within(CALL_TIMEOUT, api.list(&params)).await?;
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
