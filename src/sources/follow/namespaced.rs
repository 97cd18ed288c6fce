//! A one-off list of one Namespace's objects into a follower's projection: what a Namespace
//! entering the owner's scope brings. The cluster-wide watch delivers every later change; only
//! the objects it went by before they were kept need reading, at the cost of that Namespace's
//! objects, in pages bounded as the watch's are ([`super::pages`]).

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

/// Lists `namespace`'s objects of `R` into `held`, projected as the watch's are and adopted
/// ([`super::Projection::adopt`]); `hook` is told of each adopted one. Returns how many.
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
