//! The guard's scope, as its own MutatingWebhookConfiguration says: for each kind, the
//! Namespaces in which the API server calls a webhook of it for the reconciler's status write.
//! The reconciler ([`follow`]) and `check`/`explain` ([`read`]) act only there, so never wider
//! than admission. The policies' selectors narrow it further (and alone are the scope with
//! `--admission=policy`, which has no webhook configuration).

pub(crate) mod follow;
mod rules;

use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use kube::{Api, Client};

use crate::{
    client::{CallError, within},
    kind::Kind,
    policy::{LabelSelector, MAX_SELECTOR_TEXT as MAX_TEXT, Policies, SelectorError},
};

/// The configuration the manifests and the chart's default release install.
pub(crate) const DEFAULT_CONFIGURATION: &str = "ingress-status-guard";
/// More webhooks than this in one configuration is not the guard's.
const MAX_WEBHOOKS: usize = 16;

/// Why a webhook configuration gives no scope the guard can honour.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ScopeError {
    #[error("MutatingWebhookConfiguration {name} has no webhooks")]
    NoWebhooks { name: String },
    #[error("MutatingWebhookConfiguration {name} has {count} webhooks, more than the {MAX_WEBHOOKS} the guard reads")]
    TooManyWebhooks { name: String, count: usize },
    #[error("MutatingWebhookConfiguration {name}: webhooks[{index}].namespaceSelector: {source}")]
    Selector { name: String, index: usize, source: SelectorError },
    #[error(
        "MutatingWebhookConfiguration {name}: webhooks[{index}].objectSelector is set, and the reconciler keeps no Ingress labels to stay within it; scope by namespaceSelector"
    )]
    ObjectSelector { name: String, index: usize },
    #[error(
        "MutatingWebhookConfiguration {name}: webhooks[{index}].matchConditions ({condition:?}) is CEL the guard cannot evaluate, so it cannot know where admission runs: the reconciler patches nothing (fail closed); scope by namespaceSelector instead"
    )]
    MatchConditions { name: String, index: usize, condition: String },
}

/// Where the API server reviews one kind's status writes: the union of the `namespaceSelector`s
/// of the webhooks whose rules match them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Reach {
    /// A matching webhook has no selector (or the API server's default `{}`).
    Everywhere,
    /// A Namespace any of these selects (each non-empty, none twice); none: admission never runs.
    Any(Vec<LabelSelector>),
}

impl Reach {
    /// The union, `None` for every Namespace.
    pub(crate) fn selectors(&self) -> Option<&[LabelSelector]> {
        match self {
            Reach::Everywhere => None,
            Reach::Any(any) => Some(any),
        }
    }

    /// Whether a Namespace labelled `labels` is in it.
    pub(crate) fn matches(&self, labels: &std::collections::BTreeMap<String, String>) -> bool {
        self.selectors().is_none_or(|any| any.iter().any(|s| s.matches(labels)))
    }

    /// No webhook reviews the kind's status writes.
    pub(crate) fn is_nowhere(&self) -> bool {
        self.selectors().is_some_and(<[_]>::is_empty)
    }

    /// Adds the Namespaces `selector` selects (empty: every one).
    fn add(&mut self, selector: LabelSelector) {
        match self {
            Reach::Everywhere => {}
            Reach::Any(_) if selector.is_empty() => *self = Reach::Everywhere,
            Reach::Any(any) if any.contains(&selector) => {}
            Reach::Any(any) => any.push(selector),
        }
    }
}

/// Each kind's [`Reach`] ([`Kind::index`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Reaches([Reach; Kind::ALL.len()]);

impl Reaches {
    pub(crate) fn of(&self, kind: Kind) -> &Reach {
        &self.0[kind.index()]
    }

    /// `policies`, each narrowed to its kind's reach ([`Policies::within`]).
    pub(crate) fn narrow(&self, policies: &Policies) -> Policies {
        policies.within(|kind| self.of(kind).selectors())
    }
}

/// Each kind's [`Reach`] in `config` (an absent or empty `namespaceSelector` selects every
/// Namespace, as the API server reads it). A webhook that matches no kind is not read further.
pub(crate) fn reaches_of(config: &MutatingWebhookConfiguration) -> Result<Reaches, ScopeError> {
    let name = config.metadata.name.clone().unwrap_or_default();
    let webhooks = config.webhooks.as_deref().unwrap_or_default();
    if webhooks.is_empty() {
        return Err(ScopeError::NoWebhooks { name });
    }
    if webhooks.len() > MAX_WEBHOOKS {
        return Err(ScopeError::TooManyWebhooks { name, count: webhooks.len() });
    }
    let mut reaches = Reaches(std::array::from_fn(|_| Reach::Any(Vec::new())));
    for (index, webhook) in webhooks.iter().enumerate() {
        let kinds: Vec<Kind> = Kind::ALL.into_iter().filter(|kind| rules::calls(webhook, *kind)).collect();
        if kinds.is_empty() {
            continue;
        }
        let empty = |s: &k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector| {
            s.match_labels.as_ref().is_none_or(std::collections::BTreeMap::is_empty)
                && s.match_expressions.as_ref().is_none_or(Vec::is_empty)
        };
        if webhook.object_selector.as_ref().is_some_and(|s| !empty(s)) {
            return Err(ScopeError::ObjectSelector { name, index });
        }
        // A condition can exclude any write (a namespace, a user, a field): patching where it
        // would exclude is patching where admission never runs. Its name is the caller's text.
        if let Some(first) = webhook.match_conditions.as_deref().and_then(<[_]>::first) {
            let condition = crate::names::truncate(&first.name, 63, 63);
            return Err(ScopeError::MatchConditions { name, index, condition });
        }
        let selector = match webhook.namespace_selector.clone() {
            None => LabelSelector::default(),
            Some(selector) => LabelSelector::from_kube(selector).map_err(|source| ScopeError::Selector {
                name: name.clone(),
                index,
                source,
            })?,
        };
        // A selector may go to a watch's labelSelector: bounded as a policy's is.
        if selector.to_string().len() > MAX_TEXT {
            return Err(ScopeError::Selector { name, index, source: SelectorError::TooLong });
        }
        for kind in kinds {
            reaches.0[kind.index()].add(selector.clone());
        }
    }
    Ok(reaches)
}

/// Why `check` or `explain` cannot read the scope (`--webhook-configuration`).
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReadError {
    #[error(
        "--webhook-configuration {name}: cannot read the MutatingWebhookConfiguration that scopes the reconciler: {source} (pass --webhook-configuration= to judge by the policies' namespaceSelectors alone)"
    )]
    Read { name: String, source: CallError },
    #[error("--webhook-configuration: {0}")]
    Scope(#[from] ScopeError),
}

/// The scope of configuration `name` for a one-shot reader judging `policies`: `None` when
/// there is none to honour (`name` empty, or no such configuration) or the reader may not see
/// it (warned). A kind of `policies` that no webhook reviews is warned about too.
pub(crate) async fn read(
    client: &Client,
    name: &str,
    timeout: std::time::Duration,
    policies: &Policies,
) -> Result<Option<Reaches>, ReadError> {
    if name.is_empty() {
        return Ok(None);
    }
    let api: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    match within(timeout, api.get_opt(name)).await {
        Ok(Some(config)) => {
            let reaches = reaches_of(&config)?;
            for kind in Kind::ALL {
                if reaches.of(kind).is_nowhere() && policies.of(kind).next().is_some() {
                    tracing::warn!(webhook_configuration = %name, kind = kind.name(), "{}", unreviewed(kind));
                }
            }
            Ok(Some(reaches))
        }
        Ok(None) => {
            tracing::info!(webhook_configuration = %name, "no such MutatingWebhookConfiguration: the policies' namespaceSelectors alone scope the guard");
            Ok(None)
        }
        // A reader who may not see the scope still gets a report, told what it lacks.
        Err(CallError::Api(kube::Error::Api(status))) if status.code == 403 => {
            tracing::warn!(
                "cannot read MutatingWebhookConfiguration {name} (forbidden): judging by the policies' namespaceSelectors alone, which may be wider than the reconciler's scope; grant get on it, or pass --webhook-configuration="
            );
            Ok(None)
        }
        Err(source) => Err(ReadError::Read { name: name.to_owned(), source }),
    }
}

/// What a WARN says of a kind with policies that no webhook of the configuration reviews.
pub(crate) fn unreviewed(kind: Kind) -> String {
    format!(
        "no webhook of the MutatingWebhookConfiguration named by --webhook-configuration has a rule for UPDATE of {group}/{version} {resource}/status: admission never runs for {kind} status writes, so the reconciler governs no {kind} (its policies act nowhere); add that rule to the guard's webhook",
        group = kind.group(),
        version = kind.version(),
        resource = kind.plural(),
    )
}

#[cfg(test)]
mod tests;
