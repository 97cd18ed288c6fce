//! A trusted-writer policy's source as written (`trustedWriters`): a policy's only source, and
//! without `keepPorts`, since a trusted writer's entries stand as written.

use super::{Source, SpecError, TrustedWriters};

/// The source of a policy with `trustedWriters: identities`; `computed` is the first field
/// beside it that computes addresses, which no trusted writer has a meaning with.
pub(super) fn source(
    identities: Vec<String>,
    computed: Option<&'static str>,
    keep_ports: bool,
) -> Result<Source, SpecError> {
    if let Some(field) = computed {
        return Err(SpecError::TrustedWithSource(field));
    }
    if keep_ports {
        return Err(SpecError::TrustedKeepPorts);
    }
    TrustedWriters::new(identities).map(Source::Trusted).map_err(SpecError::Trusted)
}
