//! The label sets of the metrics, and [`Escaped`]: every label value a caller controls, escaped
//! as OpenMetrics requires and cut to [`MAX_LABEL_BYTES`].

use std::fmt::Write as _;

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};

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

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ResultLabel {
    pub(super) result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct RogueLabels {
    pub(super) policy: Escaped,
    pub(super) writer: Escaped,
    pub(super) action: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct PolicyLabel {
    pub(super) policy: Escaped,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct OverlapLabels {
    pub(super) first: Escaped,
    pub(super) second: Escaped,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ServiceLabel {
    pub(super) service: Escaped,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct FieldLabel {
    pub(super) field: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct PatchLabels {
    pub(super) policy: Escaped,
    pub(super) result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ListenerLabel {
    pub(super) listener: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ReasonLabel {
    pub(super) reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct LineLabel {
    pub(super) line: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct BuildLabels {
    pub(super) version: &'static str,
    pub(super) revision: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct EventLabel {
    pub(super) result: &'static str,
}
