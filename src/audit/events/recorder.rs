//! Writes `events.k8s.io/v1` Events with names the API server accepts whatever the object's:
//! kube's `Recorder` names one `<object name>.<hex nanoseconds>`, over 253 bytes past a
//! 236-byte name, so this one cuts the name to fit ([`event_name`]). Like kube's, repeats
//! within [`SERIES_TTL`] count up in the first Event's `series`; unlike it, its memory is
//! bounded ([`MAX_SERIES`]).

use std::collections::HashMap;

use k8s_openapi::{
    api::{
        core::v1::ObjectReference,
        events::v1::{Event as K8sEvent, EventSeries},
    },
    apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta},
    jiff::{SignedDuration, Timestamp},
};
use kube::{
    Api, Client,
    api::{Patch, PatchParams, PostParams},
    runtime::events::{Event, EventType, Reporter},
};

/// Longest name of an object (a DNS-1123 subdomain).
pub(crate) const MAX_NAME: usize = 253;
/// How long after its last repeat an Event still counts further repeats (kube's figure, well
/// inside the API server's default one-hour Event TTL).
pub(crate) const SERIES_TTL: SignedDuration = SignedDuration::from_mins(6);
/// Events remembered for their series; beyond it the least recently repeated is forgotten (its
/// next repeat starts a new Event), so a flood of distinct writers cannot grow memory.
pub(crate) const MAX_SERIES: usize = 4096;

/// The name of an Event about object `object` written at `nanos`: the object's name cut so that
/// the whole fits in [`MAX_NAME`], then `.` and the nanoseconds in hex (unique within one
/// process, see [`next_stamp`]). The cut never leaves a `.` or `-` before the suffix (a
/// DNS-1123 label ends alphanumeric); an object name with nothing usable gives `fallback`.
pub(crate) fn event_name(object: &str, fallback: &str, nanos: u128) -> String {
    let suffix = format!(".{nanos:x}");
    let room = MAX_NAME - suffix.len();
    let fit = |name: &str| {
        // Names are ASCII in practice; cut on a char boundary anyway so a hostile one cannot panic.
        let mut end = name.len().min(room);
        while !name.is_char_boundary(end) {
            end -= 1;
        }
        name[..end].trim_end_matches(['.', '-']).to_owned()
    };
    let mut prefix = fit(object);
    if prefix.is_empty() {
        prefix = fit(fallback);
    }
    prefix + &suffix
}

/// What makes two findings repeats of one another: kube's key, minus the reporter (one per
/// recorder).
#[derive(Clone, PartialEq, Eq, Hash)]
struct Key {
    action: String,
    reason: String,
    regarding: [Option<String>; 4],
    related: Option<[Option<String>; 4]>,
}

fn reference_key(r: &ObjectReference) -> [Option<String>; 4] {
    [r.kind.clone(), r.namespace.clone(), r.name.clone(), r.uid.clone()]
}

/// The suffix for an Event written at `now` after one stamped `last`: the clock in nanoseconds,
/// but always above `last`, so names stay distinct within a clock tick or a clock stepped back.
fn next_stamp(last: u128, now: Timestamp) -> u128 {
    u128::try_from(now.as_nanosecond()).unwrap_or(0).max(last.saturating_add(1))
}

/// An Event written, for its series.
struct Written {
    namespace: String,
    name: String,
    count: i32,
    last: Timestamp,
}

/// Publishes Events for one reporter.
pub(crate) struct Recorder {
    client: Client,
    reporter: Reporter,
    series: HashMap<Key, Written>,
    /// The last suffix handed out ([`next_stamp`]).
    last_nanos: u128,
}

impl Recorder {
    pub(crate) fn new(client: Client, reporter: Reporter) -> Self {
        Self { client, reporter, series: HashMap::new(), last_nanos: 0 }
    }

    /// Forgets series past their TTL and, if still full, the least recently repeated one.
    fn make_room(&mut self, now: Timestamp) {
        self.series.retain(|_, w| w.last + SERIES_TTL > now);
        if self.series.len() >= MAX_SERIES
            && let Some(oldest) = self.series.iter().min_by_key(|(_, w)| w.last).map(|(k, _)| k.clone())
        {
            self.series.remove(&oldest);
        }
    }

    /// Writes `ev` about `regarding`: a repeat within the TTL patches the first Event's series,
    /// anything else creates an Event.
    pub(crate) async fn publish(&mut self, ev: &Event, regarding: &ObjectReference) -> Result<(), kube::Error> {
        let now = Timestamp::now();
        let key = Key {
            action: ev.action.clone(),
            reason: ev.reason.clone(),
            regarding: reference_key(regarding),
            related: ev.secondary.as_ref().map(reference_key),
        };
        if let Some(w) = self.series.get_mut(&key).filter(|w| w.last + SERIES_TTL > now) {
            let count = w.count.saturating_add(1);
            let patch = serde_json::json!({"series": EventSeries { count, last_observed_time: MicroTime(now) }});
            let events: Api<K8sEvent> = Api::namespaced(self.client.clone(), &w.namespace);
            match events.patch(&w.name, &PatchParams::default(), &Patch::Merge(&patch)).await {
                Ok(_) => {
                    w.count = count;
                    w.last = now;
                    return Ok(());
                }
                // Deleted meanwhile (the API server's Event TTL, or by hand): start anew. Any
                // other refusal forgets the series too, so that the next Event is created
                // rather than patched again (and refused) until the series' TTL ends.
                Err(e) => {
                    self.series.remove(&key);
                    if !matches!(&e, kube::Error::Api(status) if status.code == 404) {
                        return Err(e);
                    }
                }
            }
        }
        let namespace = regarding.namespace.clone().unwrap_or_else(|| "default".to_owned());
        let nanos = next_stamp(self.last_nanos, now);
        self.last_nanos = nanos;
        let name = event_name(regarding.name.as_deref().unwrap_or_default(), &self.reporter.controller, nanos);
        let event = K8sEvent {
            action: Some(ev.action.clone()),
            reason: Some(ev.reason.clone()),
            event_time: Some(MicroTime(now)),
            regarding: Some(regarding.clone()),
            related: ev.secondary.clone(),
            note: ev.note.clone(),
            metadata: ObjectMeta { namespace: Some(namespace.clone()), name: Some(name.clone()), ..Default::default() },
            reporting_controller: Some(self.reporter.controller.clone()),
            reporting_instance: Some(
                self.reporter.instance.clone().unwrap_or_else(|| self.reporter.controller.clone()),
            ),
            type_: Some(match ev.type_ {
                EventType::Normal => "Normal".to_owned(),
                EventType::Warning => "Warning".to_owned(),
            }),
            ..Default::default()
        };
        let events: Api<K8sEvent> = Api::namespaced(self.client.clone(), &namespace);
        events.create(&PostParams::default(), &event).await?;
        self.make_room(now);
        self.series.insert(key, Written { namespace, name, count: 1, last: now });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    /// A DNS-1123 subdomain: labels of lowercase alphanumerics and `-`, each starting and ending
    /// alphanumeric, at most 253 in all.
    fn valid(name: &str) -> bool {
        name.len() <= MAX_NAME
            && name.split('.').all(|l| {
                !l.is_empty()
                    && l.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                    && !l.starts_with('-')
                    && !l.ends_with('-')
            })
    }

    const NOW: u128 = 1_764_610_000_000_000_000;

    #[test]
    fn a_short_name_is_kept_whole() {
        assert_eq!(event_name("web", "isg", 255), "web.ff");
        assert!(valid(&event_name("web", "isg", NOW)));
    }

    #[test]
    fn a_253_byte_name_is_cut_to_fit() {
        let long = format!("{}.{}", "a".repeat(126), "b".repeat(126));
        assert_eq!(long.len(), 253);
        let name = event_name(&long, "isg", NOW);
        assert_eq!(name.len(), MAX_NAME, "{name}");
        assert!(valid(&name), "{name}");
        assert!(name.starts_with(&long[..200]));
        assert!(name.ends_with(&format!(".{NOW:x}")));
    }

    #[test]
    fn a_cut_never_ends_a_label_in_a_dot_or_a_dash() {
        let room = MAX_NAME - format!(".{NOW:x}").len();
        for tail in ["-", ".", "-.-", "..", "-x"] {
            // Put `tail` right where the cut falls.
            let name = format!("{}{tail}{}", "a".repeat(room - tail.len()), "z".repeat(30));
            let event = event_name(&name[..name.len().min(253)], "isg", NOW);
            assert!(valid(&event), "{tail:?}: {event}");
            assert!(event.len() <= MAX_NAME);
        }
        // Nothing but separators where the prefix would be: the fallback.
        assert_eq!(event_name("-.-", "isg", 1), "isg.1");
    }

    #[test]
    fn a_hostile_multibyte_name_does_not_panic() {
        let name = event_name(&"é".repeat(200), "isg", NOW);
        assert!(name.len() <= MAX_NAME);
    }

    #[test]
    fn names_cut_to_the_same_prefix_stay_unique() {
        let prefix = "p".repeat(250);
        let mut seen = HashSet::new();
        let now = Timestamp::from_nanosecond(NOW as i128).unwrap();
        let mut last = 0u128;
        for i in 0..1000u32 {
            // The same clock reading many times over, as within one tick.
            let nanos = next_stamp(last, now);
            assert!(nanos > last);
            last = nanos;
            let name = event_name(&format!("{prefix}{i}"), "isg", nanos);
            assert!(valid(&name), "{name}");
            assert!(seen.insert(name), "a repeated name at {i}");
        }
    }
}
