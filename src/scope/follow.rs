//! The reconciler's view of the scope, kept current by two watches: the guard's own
//! MutatingWebhookConfiguration (by name, so RBAC can name it), and the Namespaces the
//! selectors select (filtered by the API server when there is one selector; with more, every
//! Namespace is watched and only its name and matching selectors kept). Fail closed: while the
//! scope is unknown (not read yet, forbidden, deleted, unusable, Namespaces not listed), the
//! reconciler patches nothing; admission does not depend on it.

use std::{
    collections::HashSet,
    sync::{Arc, RwLock},
};

use k8s_openapi::api::{admissionregistration::v1::MutatingWebhookConfiguration, core::v1::Namespace};
use kube::{Api, Client, ResourceExt, runtime::watcher};
use tokio::sync::watch;

use super::{Reach, Reaches, reaches_of};
use crate::{
    kind::Kind,
    metrics::Metrics,
    policy::LabelSelector,
    sources::follow::{Change, Projected, Projection, follow},
};

/// Whether the reconciler may act in one Namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Allow {
    Yes,
    /// Outside the webhook's scope: not the guard's, as at admission.
    No,
    /// The scope is unknown: no patch, until it is known.
    Unknown,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    /// Each kind's Namespaces ([`Kind::index`]; `None`: every one), and whether a webhook reviews it.
    Known {
        within: [Option<HashSet<String>>; Kind::ALL.len()],
        reviewed: [bool; Kind::ALL.len()],
    },
    Unknown(String),
}

/// Every Namespace, for every kind.
const EVERYWHERE: State = State::Known { within: [const { None }; Kind::ALL.len()], reviewed: [true; Kind::ALL.len()] };

/// The scope the reconciler checks each Namespace against.
pub(crate) struct Scope {
    state: RwLock<State>,
    changed: watch::Sender<u64>,
    /// `reconcile_scope_known`, when followed.
    metrics: Option<Arc<Metrics>>,
}

impl Scope {
    /// No webhook scope (`--webhook-configuration=`, or `--admission=policy`): every Namespace.
    pub(crate) fn everywhere() -> Arc<Scope> {
        Arc::new(Scope { state: RwLock::new(EVERYWHERE), changed: watch::Sender::new(0), metrics: None })
    }

    /// The scope of configuration `name`, unknown until first read, and the watch keeping it current.
    pub(crate) fn start(
        client: Client,
        name: String,
        metrics: Arc<Metrics>,
    ) -> (Arc<Scope>, impl std::future::Future<Output = ()> + Send + 'static) {
        let state = State::Unknown(format!("MutatingWebhookConfiguration {name} not read yet"));
        metrics.set_scope_known(false);
        let metrics = Some(metrics);
        let scope = Arc::new(Scope { state: RwLock::new(state), changed: watch::Sender::new(0), metrics });
        (scope.clone(), scope.run(client, name))
    }

    fn state(&self) -> std::sync::RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether the reconciler may patch an object of `kind` in `namespace`.
    pub(crate) fn allows(&self, kind: Kind, namespace: &str) -> Allow {
        match &*self.state() {
            State::Known { within, .. } => match &within[kind.index()] {
                Some(names) if !names.contains(namespace) => Allow::No,
                _ => Allow::Yes,
            },
            State::Unknown(_) => Allow::Unknown,
        }
    }

    /// The Namespaces the scope of `kind` selects; `None` for every one, or while unknown.
    pub(crate) fn namespaces(&self, kind: Kind) -> Option<HashSet<String>> {
        match &*self.state() {
            State::Known { within, .. } => within[kind.index()].clone(),
            State::Unknown(_) => None,
        }
    }

    /// False when the scope is known and no webhook reviews `kind`'s status writes.
    pub(crate) fn reviews(&self, kind: Kind) -> bool {
        match &*self.state() {
            State::Known { reviewed, .. } => reviewed[kind.index()],
            State::Unknown(_) => true,
        }
    }

    /// Ticks whenever the scope changes: the reconciler judges every object again.
    pub(crate) fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// Sets the state, telling subscribers and logging if it changed.
    fn set(&self, name: &str, new: State) {
        let mut state = self.state.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        if *state == new {
            return;
        }
        match (&*state, &new) {
            (_, State::Unknown(why)) => {
                tracing::warn!(webhook_configuration = %name, reason = %why, "the reconciler's scope is unknown: it patches nothing until it can read it (admission keeps working); the scope is the MutatingWebhookConfiguration named by --webhook-configuration: pass the name of this guard's own (or --webhook-configuration= to scope by the policies' namespaceSelectors alone)");
            }
            (State::Unknown(_), State::Known { within, reviewed }) => {
                let shown = |kind: Kind| match (&within[kind.index()], reviewed[kind.index()]) {
                    (_, false) => format!("{kind}: none (no webhook reviews its status writes)"),
                    (None, true) => format!("{kind}: every Namespace"),
                    (Some(names), true) => format!("{kind}: {} Namespaces", names.len()),
                };
                let shown: Vec<String> = Kind::ALL.into_iter().map(shown).collect();
                tracing::info!(webhook_configuration = %name, scope = %shown.join("; "), "reconciler scope known: the Namespaces the namespaceSelectors of the webhooks that review each kind select");
            }
            _ => {}
        }
        if let Some(metrics) = &self.metrics {
            metrics.set_scope_known(!matches!(new, State::Unknown(_)));
        }
        *state = new;
        drop(state);
        self.changed.send_modify(|g| *g += 1);
    }

    async fn run(self: Arc<Self>, client: Client, name: String) {
        let (selector_tx, selector_rx) =
            watch::channel(Err(format!("MutatingWebhookConfiguration {name} not read yet")));
        let held = RwLock::new(Projection::<(), Result<Reaches, String>>::default());
        let api: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
        let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
        let project = |c: MutatingWebhookConfiguration| Some(((), reaches_of(&c).map_err(|e| e.to_string())));
        let mut failing = false;
        let hook = |change: Result<Change<(), _>, watcher::Error>| {
            let held = held.read().unwrap_or_else(std::sync::PoisonError::into_inner);
            let read = match change {
                Ok(Change::Listing) => return,
                Ok(_) => {
                    failing = false;
                    match held.get(&()) {
                        Some(selector) => selector.clone(),
                        None => Err(format!("MutatingWebhookConfiguration {name} does not exist")),
                    }
                }
                Err(e) if held.synced() => {
                    // The watch resumes where it failed: the last known scope stands meanwhile.
                    if !std::mem::replace(&mut failing, true) {
                        tracing::warn!(webhook_configuration = %name, error = %e, "watch of the webhook configuration failed; retrying, the last known scope stands");
                    }
                    return;
                }
                Err(e) => Err(format!("cannot read MutatingWebhookConfiguration {name}: {e}")),
            };
            drop(held);
            selector_tx.send_if_modified(|current| {
                let changed = *current != read;
                *current = read;
                changed
            });
        };
        let configuration = follow(api, config, None, project, &held, hook);
        tokio::join!(configuration, self.follow_namespaces(client, &name, selector_rx));
    }

    /// Keeps the state current with `reaches`, watching the Namespaces they select.
    async fn follow_namespaces(
        &self,
        client: Client,
        name: &str,
        mut reaches: watch::Receiver<Result<Reaches, String>>,
    ) {
        loop {
            let current = reaches.borrow_and_update().clone();
            match current {
                Err(why) => self.set(name, State::Unknown(why)),
                Ok(read) => {
                    let selectors = Selectors::of(&read);
                    if selectors.all.is_empty() {
                        self.set(name, selectors.state(&read, &std::collections::HashMap::new()));
                    } else {
                        tokio::select! {
                            () = self.watch_namespaces(client.clone(), name, &read, &selectors) => {}
                            changed = reaches.changed() => if changed.is_err() { return },
                        }
                        continue;
                    }
                }
            }
            if reaches.changed().await.is_err() {
                return;
            }
        }
    }

    /// Watches the Namespaces `selectors` may select, keeping the state current.
    async fn watch_namespaces(&self, client: Client, name: &str, reaches: &Reaches, selectors: &Selectors) {
        let shown = selectors.all.iter().map(ToString::to_string).collect::<Vec<_>>().join(" or ");
        self.set(name, State::Unknown(format!("listing the Namespaces selected by {shown}")));
        let held = RwLock::new(Projection::<String, Mask>::default());
        let api: Api<Namespace> = Api::all(client);
        // One selector: the API server filters by it; more: their union is no one selector.
        let config = match &selectors.all[..] {
            [one] => watcher::Config::default().labels(&one.to_string()),
            _ => watcher::Config::default(),
        };
        let hook = |change: Result<Change<String, Mask>, watcher::Error>| match change {
            Ok(Change::Listing) => {}
            Ok(_) => {
                let held = held.read().unwrap_or_else(std::sync::PoisonError::into_inner);
                if let Some(names) = held.view() {
                    self.set(name, selectors.state(reaches, names));
                }
            }
            // As for the configuration: once listed, the last known set stands.
            Err(e) if held.read().unwrap_or_else(std::sync::PoisonError::into_inner).synced() => {
                tracing::debug!(error = %e, "Namespace watch of the reconciler's scope failed; retrying");
            }
            Err(e) => {
                self.set(name, State::Unknown(format!("cannot list the Namespaces selected by {shown}: {e}")));
            }
        };
        let project = |n: Namespace| {
            let mask = selectors.mask(n.metadata.labels.as_ref().unwrap_or(&std::collections::BTreeMap::new()));
            // Only names in scope are held.
            if mask == 0 { Projected::Gone(n.name_any()) } else { Projected::Keep(n.name_any(), mask) }
        };
        follow(api, config, None, project, &held, hook).await;
    }
}

/// Which of [`Selectors::all`] select a Namespace, one bit each.
type Mask = u32;

/// The distinct selectors of every kind's union, which the Namespace watch matches each
/// Namespace against once; at most one per webhook, so [`super::MAX_WEBHOOKS`] bits.
struct Selectors {
    all: Vec<LabelSelector>,
    /// Each kind's selectors, as bits of `all`.
    of_kind: [Mask; Kind::ALL.len()],
}

const _: () = assert!(super::MAX_WEBHOOKS <= Mask::BITS as usize);

impl Selectors {
    fn of(reaches: &Reaches) -> Selectors {
        let mut all: Vec<LabelSelector> = Vec::new();
        let mut of_kind = [0; Kind::ALL.len()];
        for kind in Kind::ALL {
            for selector in reaches.of(kind).selectors().unwrap_or_default() {
                let bit = all.iter().position(|s| s == selector).unwrap_or_else(|| {
                    all.push(selector.clone());
                    all.len() - 1
                });
                of_kind[kind.index()] |= 1 << bit;
            }
        }
        Selectors { all, of_kind }
    }

    fn mask(&self, labels: &std::collections::BTreeMap<String, String>) -> Mask {
        self.all.iter().enumerate().filter(|(_, s)| s.matches(labels)).fold(0, |mask, (bit, _)| mask | 1 << bit)
    }

    /// The known state, with `names` the Namespaces held and the selectors each matches.
    fn state(&self, reaches: &Reaches, names: &std::collections::HashMap<String, Mask>) -> State {
        let within = Kind::ALL.map(|kind| match reaches.of(kind) {
            Reach::Everywhere => None,
            Reach::Any(_) => {
                let bits = self.of_kind[kind.index()];
                Some(names.iter().filter(|(_, mask)| *mask & bits != 0).map(|(n, _)| n.clone()).collect())
            }
        });
        State::Known { within, reviewed: Kind::ALL.map(|kind| !reaches.of(kind).is_nowhere()) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_keeps_the_namespaces_of_its_own_selectors() {
        let parse = |t: &str| LabelSelector::parse(t).unwrap();
        let reaches = Reaches([
            Reach::Any(vec![parse("zone=a"), parse("zone=b")]),
            Reach::Any(vec![parse("zone=b")]),
            Reach::Any(Vec::new()),
        ]);
        let selectors = Selectors::of(&reaches);
        assert_eq!(selectors.all.len(), 2, "zone=b once");
        let labelled = |zone: &str| std::collections::BTreeMap::from([("zone".to_owned(), zone.to_owned())]);
        let names: std::collections::HashMap<String, Mask> =
            ["a", "b", "c"].iter().map(|z| ((*z).to_owned(), selectors.mask(&labelled(z)))).collect();
        let State::Known { within, reviewed } = selectors.state(&reaches, &names) else { panic!() };
        let sorted = |n: &Option<HashSet<String>>| {
            let mut n: Vec<String> = n.clone().unwrap().into_iter().collect();
            n.sort();
            n
        };
        assert_eq!(sorted(&within[0]), ["a", "b"]);
        assert_eq!(sorted(&within[1]), ["b"]);
        assert_eq!(reviewed, [true, true, false]);

        let gateways_only = Reaches([Reach::Any(Vec::new()), Reach::Everywhere, Reach::Any(Vec::new())]);
        let selectors = Selectors::of(&gateways_only);
        assert!(selectors.all.is_empty(), "nothing to watch");
        let state = selectors.state(&gateways_only, &std::collections::HashMap::new());
        assert_eq!(
            state,
            State::Known { within: [Some(HashSet::new()), None, Some(HashSet::new())], reviewed: [false, true, false] }
        );
    }
}
