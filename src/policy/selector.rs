//! Label selectors as operators write them (kubectl's text syntax or a Kubernetes `LabelSelector`),
//! validated once, matched, rendered for a watch, and compared for provable disjointness.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector as KubeLabelSelector;
use kube::core::{Expression, SelectorExt};

/// Longest selector text accepted; a label selector this long is a mistake, not a policy.
pub(crate) const MAX_TEXT: usize = 4096;

/// A validated label selector. Empty selects everything.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LabelSelector(Vec<Expression>);

/// Why a selector cannot be used; the text says which requirement is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    #[error("is longer than {MAX_TEXT} characters")]
    TooLong,
    #[error("{0:?}: expected KEY, !KEY, KEY=VALUE, KEY!=VALUE, KEY in (V,...) or KEY notin (V,...)")]
    Syntax(String),
    #[error("{0:?} is not a valid label key (optional DNS-1123 prefix and '/', then at most 63 of A-Z a-z 0-9 - _ .)")]
    Key(String),
    #[error("{0:?} is not a valid label value (at most 63 of A-Z a-z 0-9 - _ ., starting and ending alphanumeric)")]
    Value(String),
    #[error("matchExpressions operator {0:?} is not one of In, NotIn, Exists, DoesNotExist")]
    Operator(String),
    #[error("matchExpressions {0:?}: In and NotIn need values, Exists and DoesNotExist take none")]
    Values(String),
}

impl LabelSelector {
    /// Parses kubectl's selector syntax.
    pub fn parse(text: &str) -> Result<Self, SelectorError> {
        if text.len() > MAX_TEXT {
            return Err(SelectorError::TooLong);
        }
        let mut exprs = Vec::new();
        for requirement in split_top_level(text) {
            let requirement = requirement.trim();
            if requirement.is_empty() {
                if text.trim().is_empty() {
                    continue;
                }
                return Err(SelectorError::Syntax(text.to_owned()));
            }
            exprs.push(parse_requirement(requirement)?);
        }
        Ok(LabelSelector(exprs))
    }

    /// Converts a Kubernetes `LabelSelector` object, validating keys and values.
    pub fn from_kube(selector: KubeLabelSelector) -> Result<Self, SelectorError> {
        let mut exprs = Vec::new();
        for (key, value) in selector.match_labels.unwrap_or_default() {
            exprs.push(Expression::Equal(key, value));
        }
        for req in selector.match_expressions.unwrap_or_default() {
            let values: Option<BTreeSet<String>> = req.values.map(|v| v.into_iter().collect());
            let has_values = values.as_ref().is_some_and(|v| !v.is_empty());
            let expr = match (req.operator.as_str(), has_values) {
                ("In", true) => Expression::In(req.key, values.unwrap_or_default()),
                ("NotIn", true) => Expression::NotIn(req.key, values.unwrap_or_default()),
                ("Exists", false) => Expression::Exists(req.key),
                ("DoesNotExist", false) => Expression::DoesNotExist(req.key),
                ("In" | "NotIn" | "Exists" | "DoesNotExist", _) => return Err(SelectorError::Values(req.key)),
                (other, _) => return Err(SelectorError::Operator(other.to_owned())),
            };
            exprs.push(expr);
        }
        for expr in &exprs {
            validate(expr)?;
        }
        Ok(LabelSelector(exprs))
    }

    /// The selector as a Kubernetes `LabelSelector` of `matchExpressions` only (`k=v` is `In [v]`,
    /// `k!=v` is `NotIn [v]`), for an admission policy binding's `namespaceSelector`.
    pub(crate) fn to_kube(&self) -> KubeLabelSelector {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;
        let requirement = |key: &str, operator: &str, values: Option<Vec<String>>| LabelSelectorRequirement {
            key: key.to_owned(),
            operator: operator.to_owned(),
            values,
        };
        let expressions = self
            .0
            .iter()
            .map(|e| match e {
                Expression::In(k, v) => requirement(k, "In", Some(v.iter().cloned().collect())),
                Expression::NotIn(k, v) => requirement(k, "NotIn", Some(v.iter().cloned().collect())),
                Expression::Equal(k, v) => requirement(k, "In", Some(vec![v.clone()])),
                Expression::NotEqual(k, v) => requirement(k, "NotIn", Some(vec![v.clone()])),
                Expression::Exists(k) => requirement(k, "Exists", None),
                Expression::DoesNotExist(k) => requirement(k, "DoesNotExist", None),
            })
            .collect();
        KubeLabelSelector { match_expressions: Some(expressions), match_labels: None }
    }

    /// The selector no label map matches (`k,!k`): a policy narrowed to a scope that holds no
    /// Namespace, its key saying why where the selector is shown.
    pub(crate) fn nothing() -> LabelSelector {
        const KEY: &str = "ingress-status-guard/no-webhook-reviews-this-kind";
        LabelSelector(vec![Expression::Exists(KEY.to_owned()), Expression::DoesNotExist(KEY.to_owned())])
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The selector that matches what both match: every requirement of each.
    pub(crate) fn and(&self, other: &LabelSelector) -> LabelSelector {
        let mut exprs = self.0.clone();
        exprs.extend(other.0.iter().filter(|e| !self.0.contains(e)).cloned());
        LabelSelector(exprs)
    }

    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0.iter().all(|e| e.matches(labels))
    }

    /// True when no label map can match both selectors, judged requirement by requirement on the
    /// same key (`team=a` and `team=b`). False means "may overlap", not "does".
    pub fn disjoint(&self, other: &LabelSelector) -> bool {
        self.0.iter().any(|a| other.0.iter().any(|b| conflict(a, b) || conflict(b, a)))
    }
}

/// `key in (a,b)`, `key!=v`, ... joined by commas: what a watch sends as `labelSelector`.
impl fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

/// What one requirement says about its key's value.
enum Constraint<'a> {
    /// The key exists and its value is in the set (`None`: any value).
    OneOf(Option<BTreeSet<&'a str>>),
    /// The key does not exist.
    Absent,
    /// The key is absent or its value is not in the set.
    NoneOf(BTreeSet<&'a str>),
}

fn set(values: &BTreeSet<String>) -> BTreeSet<&str> {
    values.iter().map(String::as_str).collect()
}

fn constraint(e: &Expression) -> (&str, Constraint<'_>) {
    match e {
        Expression::In(k, v) => (k, Constraint::OneOf(Some(set(v)))),
        Expression::Equal(k, v) => (k, Constraint::OneOf(Some(BTreeSet::from([v.as_str()])))),
        Expression::Exists(k) => (k, Constraint::OneOf(None)),
        Expression::DoesNotExist(k) => (k, Constraint::Absent),
        Expression::NotIn(k, v) => (k, Constraint::NoneOf(set(v))),
        Expression::NotEqual(k, v) => (k, Constraint::NoneOf(BTreeSet::from([v.as_str()]))),
    }
}

/// Whether `a` and `b` can never hold together (checked in one direction).
fn conflict(a: &Expression, b: &Expression) -> bool {
    let ((ka, ca), (kb, cb)) = (constraint(a), constraint(b));
    if ka != kb {
        return false;
    }
    match (ca, cb) {
        (Constraint::OneOf(_), Constraint::Absent) => true,
        (Constraint::OneOf(Some(x)), Constraint::OneOf(Some(y))) => x.is_disjoint(&y),
        (Constraint::OneOf(Some(x)), Constraint::NoneOf(y)) => x.is_subset(&y),
        _ => false,
    }
}

/// Splits on commas outside parentheses.
fn split_top_level(text: &str) -> Vec<&str> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0i32, 0);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

fn parse_requirement(req: &str) -> Result<Expression, SelectorError> {
    let syntax = || SelectorError::Syntax(req.to_owned());
    let expr = if let Some(key) = req.strip_prefix('!') {
        Expression::DoesNotExist(key.trim().to_owned())
    } else if let Some((key, value)) = req.split_once("!=") {
        Expression::NotEqual(key.trim().to_owned(), value.trim().to_owned())
    } else if let Some((key, value)) = req.split_once("==").or_else(|| req.split_once('=')) {
        Expression::Equal(key.trim().to_owned(), value.trim().to_owned())
    } else if let Some(open) = req.find('(') {
        let list = req[open + 1..].strip_suffix(')').ok_or_else(syntax)?;
        let mut words = req[..open].split_whitespace();
        let (key, op) = (words.next().ok_or_else(syntax)?, words.next().ok_or_else(syntax)?);
        if words.next().is_some() {
            return Err(syntax());
        }
        let values: BTreeSet<String> =
            list.split(',').map(str::trim).filter(|v| !v.is_empty()).map(str::to_owned).collect();
        if values.is_empty() {
            return Err(syntax());
        }
        match op {
            "in" => Expression::In(key.to_owned(), values),
            "notin" => Expression::NotIn(key.to_owned(), values),
            _ => return Err(syntax()),
        }
    } else if req.split_whitespace().count() == 1 {
        Expression::Exists(req.to_owned())
    } else {
        return Err(syntax());
    };
    validate(&expr)?;
    Ok(expr)
}

fn validate(expr: &Expression) -> Result<(), SelectorError> {
    let (key, values): (&String, Vec<&String>) = match expr {
        Expression::In(k, v) | Expression::NotIn(k, v) => (k, v.iter().collect()),
        Expression::Equal(k, v) | Expression::NotEqual(k, v) => (k, vec![v]),
        Expression::Exists(k) | Expression::DoesNotExist(k) => (k, vec![]),
    };
    if !crate::names::is_label_key(key) {
        return Err(SelectorError::Key(key.clone()));
    }
    match values.into_iter().find(|v| !v.is_empty() && !crate::names::is_label_name(v)) {
        Some(bad) => Err(SelectorError::Value(bad.clone())),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn parses_kubectl_syntax_and_matches() {
        let blue = labels(&[("team", "blue"), ("env", "prod")]);
        let bare = labels(&[]);
        let cases = [
            ("", "", true, true),
            ("team=blue", "team=blue", true, false),
            ("team==blue", "team=blue", true, false),
            ("team = blue", "team=blue", true, false),
            ("team!=blue", "team!=blue", false, true),
            ("team in (blue, green)", "team in (blue,green)", true, false),
            ("team notin (blue)", "team notin (blue)", false, true),
            ("team", "team", true, false),
            ("!team", "!team", false, true),
            ("team=blue,env=prod", "team=blue,env=prod", true, false),
            ("team=blue,env=dev", "team=blue,env=dev", false, false),
            ("app.kubernetes.io/name=ingress-nginx", "app.kubernetes.io/name=ingress-nginx", false, false),
            ("team=", "team=", false, false),
        ];
        for (text, shown, on_blue, on_bare) in cases {
            let s = LabelSelector::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(s.to_string(), shown, "{text}");
            assert_eq!(s.matches(&blue), on_blue, "{text} on blue");
            assert_eq!(s.matches(&bare), on_bare, "{text} on no labels");
        }
    }

    #[test]
    fn bad_selectors_name_the_requirement() {
        let cases = [
            ("team in blue", "\"team in blue\": expected"),
            ("team in ()", "\"team in ()\": expected"),
            ("team oneof (a)", "expected"),
            ("a b", "expected"),
            ("team=blue,", "expected"),
            ("Team_=x", "not a valid label key"),
            ("UPPER/x=y", "not a valid label key"),
            ("team=blue green", "not a valid label value"),
            ("team=-x", "not a valid label value"),
            ("team in (a,b c)", "not a valid label value"),
        ];
        for (text, want) in cases {
            let err = LabelSelector::parse(text).unwrap_err().to_string();
            assert!(err.contains(want), "{text}: {err}");
        }
        assert_eq!(LabelSelector::parse(&"a".repeat(5000)).unwrap_err(), SelectorError::TooLong);
    }

    #[test]
    fn from_kube_label_selector() {
        let s: KubeLabelSelector = serde_json::from_value(serde_json::json!({
            "matchLabels": {"team": "blue"},
            "matchExpressions": [{"key": "env", "operator": "NotIn", "values": ["dev"]}]
        }))
        .unwrap();
        let s = LabelSelector::from_kube(s).unwrap();
        assert_eq!(s.to_string(), "team=blue,env notin (dev)");
        for (json, want) in [
            (serde_json::json!({"matchExpressions": [{"key": "a", "operator": "Has"}]}), "operator \"Has\""),
            (serde_json::json!({"matchExpressions": [{"key": "a", "operator": "In"}]}), "need values"),
            (
                serde_json::json!({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}),
                "take none",
            ),
            (serde_json::json!({"matchLabels": {"a": "b c"}}), "label value"),
        ] {
            let err = LabelSelector::from_kube(serde_json::from_value(json).unwrap()).unwrap_err().to_string();
            assert!(err.contains(want), "{err}");
        }
    }

    #[test]
    fn disjointness() {
        let cases = [
            ("team=a", "team=b", true),
            ("team=a", "team=a", false),
            ("team=a", "team!=a", true),
            ("team in (a,b)", "team notin (a,b,c)", true),
            ("team in (a,b)", "team notin (a)", false),
            ("team in (a,b)", "team in (c)", true),
            ("team in (a,b)", "team in (b,c)", false),
            ("team", "!team", true),
            ("team=a", "!team", true),
            ("team!=a", "!team", false),
            ("team=a", "env=prod", false),
            ("", "team=a", false),
            ("x=1,team=a", "team=b", true),
        ];
        for (a, b, want) in cases {
            let (sa, sb) = (LabelSelector::parse(a).unwrap(), LabelSelector::parse(b).unwrap());
            assert_eq!(sa.disjoint(&sb), want, "{a} vs {b}");
            assert_eq!(sb.disjoint(&sa), want, "{b} vs {a}");
        }
    }
}
