//! The I/O of `check` and `explain` that is theirs alone: the stored objects judged, read in
//! one-shot, paged, time-bounded lists ([`crate::client`]); the sources are read by
//! [`crate::sources::snapshot`].

use std::time::Duration;

use kube::{Api, Client, api::ListParams};

use super::report::{LastWriter, last_status_writer};
use super::{Explained, PAGE_SIZE};
use crate::{
    client::{RequestError, list_all, list_served},
    kind::Write,
};

/// Lists the stored objects of kind `K` page by page ([`Explained::stored`]) with who wrote
/// their status last; `None` when the API server does not serve an optional kind (a CRD).
pub(super) async fn stored<K: Explained>(
    client: &Client,
    namespace: Option<&str>,
    timeout: Duration,
) -> Result<Option<Vec<(Write<K::Entry>, Option<LastWriter>)>>, RequestError> {
    let api: Api<K::Read> = match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let params = ListParams::default().limit(PAGE_SIZE);
    let written = |object: K::Read| {
        let writer = last_status_writer(kube::Resource::meta(&object));
        (K::stored_write(&K::stored(object)).clone(), writer)
    };
    let listed = match K::KIND.info().optional_api {
        Some(_) => list_served(&api, params, K::LISTED, timeout, written).await?,
        None => Some(list_all(&api, params, K::LISTED, timeout, written).await?),
    };
    Ok(listed.map(|mut writes| {
        writes.retain(|(write, _)| K::listed(write));
        writes
    }))
}
