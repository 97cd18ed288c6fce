//! The follow of a cutover: a watch of the Ingresses of the plan, each judged by the webhook's
//! own `decide` over the edited policies and the sources (re-read every few seconds, so a
//! source that becomes unresolved is named), until every one is canonical or `--timeout`.

use std::{
    collections::HashMap,
    time::{Duration, Instant},
};

use futures::StreamExt as _;
use k8s_openapi::api::networking::v1::Ingress;
use kube::{
    Api, Client,
    runtime::{WatchStreamExt as _, watcher},
};

use super::{
    CutoverError, Settings,
    plan::Plan,
    show::Show,
    track::{Change, Judged, Key, Tracker},
};
use crate::{
    client::RequestError,
    decision::{Verdict, decide},
    kind::ingress::{StatusWrite, Stored},
    policy::Policies,
    sources::{Sources, snapshot},
};

/// How often the sources are read again while following.
const SOURCES_EVERY: Duration = Duration::from_secs(5);
/// How long every Ingress must stay moved before the cutover is done: an old controller that
/// writes its address back at once is then seen (a fight), not missed by an early exit.
const SETTLE: Duration = Duration::from_secs(2);
/// How often the display is refreshed.
const TICK: Duration = Duration::from_millis(500);
/// Ingresses named in the one-line timeout error; the report above lists more.
const NAMED: usize = 3;

/// What is kept of the last sight of an Ingress of the plan, to judge it again when the
/// sources change.
struct Sight {
    write: StatusWrite,
    writers: Vec<String>,
}

/// Follows until every Ingress of the plan is canonical (`Ok`) or the timeout passes.
pub(super) async fn follow(
    client: &Client,
    settings: &Settings,
    policies: &Policies,
    plan: &Plan,
    show: &mut Show,
) -> Result<(), CutoverError> {
    let started = Instant::now();
    let deadline = tokio::time::Instant::now() + settings.timeout;
    let mut tracker = Tracker::new(plan.ingresses.iter().map(super::plan::Move::key));
    show.start(&tracker);
    let timeout = settings.cluster.request_timeout;
    let mut sources = snapshot::read(client, policies, timeout).await?;
    let mut namespaces: Vec<&str> = plan.ingresses.iter().map(|m| m.namespace.as_str()).collect();
    namespaces.dedup();
    let api: Api<Ingress> = match namespaces[..] {
        [one] => Api::namespaced(client.clone(), one),
        _ => Api::all(client.clone()),
    };
    // Watch requests shorter than the client's read timeout, as every watch of the guard's.
    let config = watcher::Config::default().timeout(crate::sources::follow::WATCH_TIMEOUT_SECS);
    let mut events = watcher(api, config).default_backoff().boxed();
    let mut last_error: Option<String> = None;
    let mut sights: HashMap<Key, Sight> = HashMap::new();
    let mut tick = tokio::time::interval(TICK);
    let mut reread = tokio::time::interval_at(tokio::time::Instant::now() + SOURCES_EVERY, SOURCES_EVERY);
    // When every Ingress had moved, last; done once that has held for `SETTLE`.
    let mut all_moved: Option<Instant> = None;
    loop {
        match (tracker.done(), all_moved) {
            (true, Some(at)) if at.elapsed() >= SETTLE || tracker.total() == 0 => break,
            (true, None) => all_moved = Some(Instant::now()),
            (false, _) => all_moved = None,
            (true, Some(_)) => {}
        }
        tokio::select! {
            event = events.next() => match event {
                Some(Ok(watcher::Event::Apply(ingress) | watcher::Event::InitApply(ingress))) => {
                    let key: Key = (ingress.metadata.namespace.clone().unwrap_or_default(), ingress.metadata.name.clone().unwrap_or_default());
                    if tracker.follows(&key) {
                        let sight = Sight { write: Stored::of(&ingress).write, writers: status_writers(&ingress) };
                        let judged = judge(&sight, policies, &sources, &settings.policy);
                        sights.insert(key.clone(), sight);
                        observe(&mut tracker, show, &key, judged);
                    }
                }
                Some(Ok(watcher::Event::Delete(ingress))) => {
                    let key: Key = (ingress.metadata.namespace.clone().unwrap_or_default(), ingress.metadata.name.clone().unwrap_or_default());
                    sights.remove(&key);
                    observe(&mut tracker, show, &key, Judged::Gone);
                }
                Some(Ok(watcher::Event::Init | watcher::Event::InitDone)) => {}
                // No right to list or watch Ingresses will not come by waiting.
                Some(Err(watcher::Error::InitialListFailed(source) | watcher::Error::WatchStartFailed(source)))
                    if matches!(&source, kube::Error::Api(status) if status.code == 403) =>
                {
                    return Err(RequestError::Api { what: "watch Ingresses".to_owned(), source }.into());
                }
                // Else the watcher backs off and resumes, and the timeout bounds how long that
                // may take; each new kind of failure is said once.
                Some(Err(e)) => {
                    let text = e.to_string();
                    if last_error.as_deref() != Some(text.as_str()) {
                        tracing::warn!(error = %text, "the watch of Ingresses failed; retrying");
                        last_error = Some(text);
                    }
                }
                None => break,
            },
            _ = reread.tick() => {
                // A failed read keeps the last sources: the follow goes on, bounded by the timeout.
                match snapshot::read(client, policies, timeout).await {
                    Ok(fresh) => {
                        sources = fresh;
                        let keys: Vec<Key> = sights.keys().cloned().collect();
                        for key in keys {
                            let judged = judge(&sights[&key], policies, &sources, &settings.policy);
                            observe(&mut tracker, show, &key, judged);
                        }
                    }
                    Err(e) => tracing::warn!(error = %e, "cannot read the sources again; judging with the last read"),
                }
            }
            _ = tick.tick() => show.tick(&tracker, started.elapsed()),
            () = tokio::time::sleep_until(deadline) => {
                show.timed_out(&tracker, started.elapsed());
                let (moved, total, not_moved) = (tracker.moved(), tracker.total(), summarize(&tracker.not_moved()));
                return Err(CutoverError::Timeout { timeout: settings.timeout, moved, total, not_moved });
            }
        }
    }
    show.done(&tracker, all_moved.map_or_else(|| started.elapsed(), |at| at.duration_since(started)));
    Ok(())
}

/// The Ingresses that have not moved, in one line: grouped by reason and detail (a source
/// that is unresolved is the same cause for all of them), a few named in each group.
fn summarize(not_moved: &[super::track::NotMoved]) -> String {
    let mut groups: Vec<(String, String, Vec<&str>)> = Vec::new();
    for n in not_moved {
        let reason =
            serde_json::to_value(n.reason).ok().and_then(|v| v.as_str().map(str::to_uppercase)).unwrap_or_default();
        // The detail names addresses and writers; grouped by reason and detail, a fight with
        // two writers is two groups.
        match groups.iter_mut().find(|(r, d, _)| *r == reason && *d == n.detail) {
            Some((_, _, names)) => names.push(&n.ingress),
            None => groups.push((reason, n.detail.clone(), vec![&n.ingress])),
        }
    }
    let mut parts: Vec<String> = groups
        .iter()
        .take(NAMED)
        .map(|(reason, detail, names)| {
            let mut shown = names.iter().take(NAMED).copied().collect::<Vec<_>>().join(", ");
            if names.len() > NAMED {
                shown.push_str(&format!(" and {} more", names.len() - NAMED));
            }
            format!("{} {reason} ({shown}): {detail}", names.len())
        })
        .collect();
    if groups.len() > NAMED {
        parts.push(format!("and {} other causes (listed above)", groups.len() - NAMED));
    }
    parts.join("; ")
}

fn observe(tracker: &mut Tracker, show: &mut Show, key: &Key, judged: Judged) {
    let name = || format!("{}/{}", key.0, key.1);
    match tracker.observe(key, judged) {
        Change::Moved => show.changed(&name(), false, tracker),
        Change::Undone => show.changed(&name(), true, tracker),
        Change::Left | Change::None => {}
    }
}

/// An Ingress of the plan as the webhook would judge a write of its stored status now.
fn judge(sight: &Sight, policies: &Policies, sources: &dyn Sources, name: &str) -> Judged {
    match decide::<crate::kind::ingress::Ingresses>(&sight.write, policies, sources) {
        Verdict::Canonical { policy } if policy.name == name => Judged::Canonical,
        Verdict::Mismatch { policy, canonical, .. } if policy.name == name => Judged::Off {
            stored: sight.write.addresses.clone(),
            canonical: canonical.into_owned(),
            writers: sight.writers.clone(),
        },
        Verdict::Unresolved { policy, reason, .. } if policy.name == name => Judged::Unresolved(reason.to_string()),
        _ => Judged::NotGoverned,
    }
}

/// The field managers that wrote the Ingress's status, latest first (bounded: a cell of the
/// timeout report, not the object's history).
fn status_writers(ingress: &Ingress) -> Vec<String> {
    let mut entries: Vec<_> = ingress
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter(|m| m.subresource.as_deref() == Some("status"))
        .filter_map(|m| Some((m.time.as_ref().map(|t| t.0), crate::names::truncate(m.manager.as_deref()?, 63, 128))))
        .collect();
    entries.sort_by_key(|e| std::cmp::Reverse(e.0));
    entries.into_iter().map(|(_, m)| m).take(4).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cutover::track::{NotMoved, Reason};

    #[test]
    fn the_timeout_line_groups_ingresses_by_cause() {
        let n =
            |ingress: &str, reason, detail: &str| NotMoved { ingress: ingress.into(), reason, detail: detail.into() };
        let lost = "Service t/b not found";
        let not_moved = [
            n("a/1", Reason::Unresolved, lost),
            n("a/2", Reason::Unresolved, lost),
            n("a/3", Reason::Unresolved, lost),
            n("a/4", Reason::Unresolved, lost),
            n("b/1", Reason::Fight, "moved, then written back"),
        ];
        assert_eq!(
            summarize(&not_moved),
            "4 UNRESOLVED (a/1, a/2, a/3 and 1 more): Service t/b not found; 1 FIGHT (b/1): moved, then written back"
        );
        let many: Vec<NotMoved> = (0..5).map(|i| n(&format!("c/{i}"), Reason::Drift, &format!("d{i}"))).collect();
        assert!(summarize(&many).ends_with("; and 2 other causes (listed above)"), "{}", summarize(&many));
    }
}
