//! What `--rollback` restores: each policy's source before its last cutover, kept per policy
//! beside the source the cutover set, so rolling one back leaves the others' moves in place and
//! is refused when its source was edited since. Pure.

use std::collections::BTreeMap;

use serde_norway::{Mapping, Value};

use super::edit::{EditError, NewSource, fields_of, replace_fields};

/// The annotation's one top-level field; an annotation without it is the whole previous file,
/// as cutover kept it before it kept sources per policy.
const TOP: &str = "previousSources";
/// Policies kept at most: far more than a policy file holds, and the annotation stays bounded.
const MAX_KEPT: usize = 256;

/// One policy's move: its source fields before, and the ones the cutover set.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
struct Move {
    before: Mapping,
    /// `None` when read from an annotation of the older shape (the whole previous file).
    #[serde(skip_serializing_if = "Option::is_none")]
    after: Option<Mapping>,
}

/// The moves kept in an annotation's text, by policy. An annotation of the older shape is
/// read as a move of every policy whose source differs between it and `current`.
fn read(kept: &str, current: &str) -> BTreeMap<String, Move> {
    let Ok(value) = serde_norway::from_str::<Value>(kept) else { return BTreeMap::new() };
    if let Some(moves) = value.get(TOP).and_then(Value::as_mapping) {
        return moves
            .iter()
            .filter_map(|(policy, m)| {
                let before = m.get("before")?.as_mapping()?.clone();
                let after = m.get("after").and_then(Value::as_mapping).cloned();
                Some((policy.as_str()?.to_owned(), Move { before, after }))
            })
            .collect();
    }
    // The older shape: the whole file before the last cutover, of whichever policy. Read as
    // YAML, not validated: what is restored is validated as the guard would, with its error.
    let names: Vec<String> = value
        .get("policies")
        .and_then(Value::as_sequence)
        .into_iter()
        .flatten()
        .filter_map(|p| p.get("name").and_then(Value::as_str).map(str::to_owned))
        .take(MAX_KEPT)
        .collect();
    names
        .into_iter()
        .filter_map(|name| {
            let before = fields_of(kept, &name).ok()?;
            (fields_of(current, &name).ok()? != before).then_some((name, Move { before, after: None }))
        })
        .collect()
}

fn write(moves: &BTreeMap<String, Move>) -> Result<String, EditError> {
    let kept: BTreeMap<&String, &Move> = moves.iter().take(MAX_KEPT).collect();
    serde_norway::to_string(&BTreeMap::from([(TOP, kept)])).map_err(|e| EditError::NotYaml(e.to_string()))
}

/// A cutover of `policy` to `to` in `current`: the key's new text and the annotation's, with
/// this policy's previous source kept (replacing what an earlier cutover of it kept) and every
/// other policy's kept as it was in `kept`.
pub(crate) fn cut_over(
    current: &str,
    policy: &str,
    to: &NewSource,
    kept: Option<&str>,
) -> Result<(String, String), EditError> {
    let after = to.fields();
    let (edited, before) = replace_fields(current, policy, &after)?;
    let mut moves = kept.map(|k| read(k, current)).unwrap_or_default();
    moves.insert(policy.to_owned(), Move { before, after: Some(after) });
    Ok((edited, write(&moves)?))
}

/// `--rollback --policy policy`: the key's new text, `policy`'s source back to what it was
/// before its last cutover and nothing else changed, and the annotation's, without it.
pub(crate) fn roll_back(current: &str, policy: &str, kept: &str) -> Result<(String, String), EditError> {
    let mut moves = read(kept, current);
    let Some(m) = moves.remove(policy) else { return Err(EditError::NothingKept { name: policy.to_owned() }) };
    let now = fields_of(current, policy)?;
    if let Some(after) = m.after.as_ref().filter(|after| **after != now) {
        let sources = Box::new([shown(&now), shown(after)]);
        return Err(EditError::ChangedSince { name: policy.to_owned(), sources });
    }
    let (edited, _) = replace_fields(current, policy, &m.before)?;
    Ok((edited, write(&moves)?))
}

/// Source fields on one line for an error, bounded.
fn shown(fields: &Mapping) -> String {
    let text = serde_norway::to_string(fields).unwrap_or_default();
    let line = text.trim_end().replace('\n', "; ");
    crate::names::escape_control(&crate::names::truncate(&line, 120, 120)).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "policies:\n  - name: a\n    ingressClasses: [a]\n    publishService: ns/a-old\n  - name: b\n    ingressClasses: [b]\n    publishStatusAddress: 192.0.2.1\n";

    fn svc(text: &str) -> NewSource {
        NewSource::Service(crate::policy::NamespacedName::service(text).unwrap())
    }

    fn source(text: &str, policy: &str) -> Mapping {
        fields_of(text, policy).unwrap()
    }

    /// Regression: `cutover a`, `cutover b`, `rollback --policy a` restored the whole key,
    /// undoing b and leaving a moved.
    #[test]
    fn rolling_one_policy_back_leaves_the_others_moved() {
        let (one, kept) = cut_over(FILE, "a", &svc("ns/a-new"), None).unwrap();
        let (two, kept) = cut_over(&one, "b", &svc("ns/b-new"), Some(&kept)).unwrap();
        let (back, kept) = roll_back(&two, "a", &kept).unwrap();
        assert_eq!(source(&back, "a"), source(FILE, "a"), "a is back:\n{back}");
        assert_eq!(source(&back, "b"), svc("ns/b-new").fields(), "b stays moved:\n{back}");
        assert_eq!(roll_back(&back, "a", &kept), Err(EditError::NothingKept { name: "a".into() }));
        let (again, _) = roll_back(&back, "b", &kept).unwrap();
        assert_eq!(source(&again, "b"), source(FILE, "b"));
        assert!(crate::policy::parse_file("f", &again).is_ok());
    }

    #[test]
    fn a_source_edited_since_its_cutover_is_not_rolled_back() {
        let (one, kept) = cut_over(FILE, "a", &svc("ns/a-new"), None).unwrap();
        let edited = replace_fields(&one, "a", &svc("ns/by-hand").fields()).unwrap().0;
        let err = roll_back(&edited, "a", &kept).unwrap_err();
        assert!(matches!(err, EditError::ChangedSince { .. }), "{err}");
        assert!(err.to_string().contains("ns/by-hand") && err.to_string().contains("ns/a-new"), "{err}");
        // Another policy's edit does not stand in the way.
        let other = replace_fields(&one, "b", &svc("ns/b-hand").fields()).unwrap().0;
        assert!(roll_back(&other, "a", &kept).is_ok());
    }

    #[test]
    fn an_annotation_of_the_older_shape_rolls_back_one_policy_too() {
        // Before, the annotation held the whole previous file.
        let moved = replace_fields(FILE, "a", &svc("ns/a-new").fields()).unwrap().0;
        let moved = replace_fields(&moved, "b", &svc("ns/b-new").fields()).unwrap().0;
        let (back, kept) = roll_back(&moved, "a", FILE).unwrap();
        assert_eq!(source(&back, "a"), source(FILE, "a"));
        assert_eq!(source(&back, "b"), svc("ns/b-new").fields(), "b stays moved");
        let (both, _) = roll_back(&back, "b", &kept).unwrap();
        assert_eq!(source(&both, "b"), source(FILE, "b"), "b's previous source was carried over");
        assert_eq!(roll_back(FILE, "a", "not: [yaml"), Err(EditError::NothingKept { name: "a".into() }));
    }
}
