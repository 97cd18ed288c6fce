//! The label sets of the metrics, and [`Escaped`]: every label value a caller controls, escaped
//! as OpenMetrics requires and cut to [`MAX_LABEL_BYTES`].

use std::fmt::Write as _;

use prometheus_client::encoding::{EncodeLabelValue, LabelValueEncoder};

use super::writers;
use crate::names::truncate;

/// Longest label value kept, in bytes: a forged 1 MiB username must not become a 1 MiB series.
pub(super) const MAX_LABEL_BYTES: usize = writers::MAX_LABEL_BYTES;

/// A label value as OpenMetrics requires it: `\`, `"` and line feed escaped. prometheus-client
/// 0.24 writes `String` label values verbatim, so a `"` and a newline in a username would forge
/// a sample line.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub(super) struct Escaped(String);

impl Escaped {
    pub(super) fn new(value: &str) -> Self {
        Escaped(truncate(value, usize::MAX, MAX_LABEL_BYTES))
    }
}

impl EncodeLabelValue for Escaped {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        let mut rest = self.0.as_str();
        while let Some(at) = rest.find(['\\', '"', '\n']) {
            encoder.write_str(&rest[..at])?;
            encoder.write_str(match rest.as_bytes()[at] {
                b'\\' => "\\\\",
                b'"' => "\\\"",
                _ => "\\n",
            })?;
            rest = &rest[at + 1..];
        }
        encoder.write_str(rest)
    }
}

/// Declares label sets: structs whose fields are encoded as labels of their names.
macro_rules! label_sets {
    ($($name:ident { $($field:ident: $ty:ty),+ })*) => {
        $(
            #[derive(Clone, Debug, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet)]
            pub(super) struct $name {
                $(pub(super) $field: $ty,)+
            }
        )*
    };
}

label_sets! {
    ResultLabel { result: &'static str }
    RogueLabels { policy: Escaped, writer: Escaped, action: &'static str }
    PolicyLabel { policy: Escaped }
    OverlapLabels { first: Escaped, second: Escaped }
    ServiceLabel { service: Escaped }
    FieldLabel { field: &'static str }
    PatchLabels { policy: Escaped, result: &'static str }
    ListenerLabel { listener: &'static str }
    ReasonLabel { reason: &'static str }
    LineLabel { line: &'static str }
    BuildLabels { version: &'static str, revision: &'static str }
    KindPolicyLabels { policy: Escaped, kind: &'static str }
    ForgedLabels { field: &'static str, result: &'static str }
    WatchLabel { watch: &'static str }
}
