//! Label and field selectors, as the Kubernetes API reads them.

use std::collections::BTreeMap;

use serde_json::Value;

/// One requirement of a label selector.
#[derive(Debug, Clone, PartialEq, Eq)]
enum LabelReq {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

/// A parsed `labelSelector`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector(Vec<LabelReq>);

impl LabelSelector {
    /// Whether it selects everything.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Parses `a=b,c!=d,e in (f,g),h notin (i),j,!k`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut reqs = Vec::new();
        for term in split_top_level(text) {
            let term = term.trim();
            if term.is_empty() {
                continue;
            }
            reqs.push(parse_label_req(term)?);
        }
        Ok(Self(reqs))
    }

    /// Whether `labels` satisfy every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0.iter().all(|r| match r {
            LabelReq::Equals(k, v) => labels.get(k) == Some(v),
            LabelReq::NotEquals(k, v) => labels.get(k) != Some(v),
            LabelReq::In(k, vs) => labels.get(k).is_some_and(|l| vs.contains(l)),
            LabelReq::NotIn(k, vs) => labels.get(k).is_none_or(|l| !vs.contains(l)),
            LabelReq::Exists(k) => labels.contains_key(k),
            LabelReq::NotExists(k) => !labels.contains_key(k),
        })
    }
}

/// Splits on commas outside parentheses.
fn split_top_level(text: &str) -> Vec<&str> {
    let (mut out, mut depth, mut start) = (Vec::new(), 0i32, 0);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&text[start..]);
    out
}

fn check_key(key: &str) -> Result<String, String> {
    let ok = !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c));
    if ok {
        Ok(key.to_owned())
    } else {
        Err(format!("invalid label key {key:?}"))
    }
}

fn parse_set(text: &str) -> Result<Vec<String>, String> {
    let inner = text
        .trim()
        .strip_prefix('(')
        .and_then(|t| t.strip_suffix(')'))
        .ok_or_else(|| format!("expected a parenthesised set, got {text:?}"))?;
    Ok(inner.split(',').map(|v| v.trim().to_owned()).collect())
}

fn parse_label_req(term: &str) -> Result<LabelReq, String> {
    if let Some(key) = term.strip_prefix('!') {
        return Ok(LabelReq::NotExists(check_key(key.trim())?));
    }
    if let Some((k, v)) = term.split_once("!=") {
        return Ok(LabelReq::NotEquals(check_key(k.trim())?, v.trim().to_owned()));
    }
    if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
        return Ok(LabelReq::Equals(check_key(k.trim())?, v.trim().to_owned()));
    }
    if let Some((k, set)) = term.split_once(" notin ") {
        return Ok(LabelReq::NotIn(check_key(k.trim())?, parse_set(set)?));
    }
    if let Some((k, set)) = term.split_once(" in ") {
        return Ok(LabelReq::In(check_key(k.trim())?, parse_set(set)?));
    }
    Ok(LabelReq::Exists(check_key(term)?))
}

/// A parsed `fieldSelector` over the fields the sandbox supports.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector(Vec<(String, bool, String)>);

/// Fields a `fieldSelector` may name, as JSON pointers into the object.
const FIELDS: &[(&str, &str)] = &[
    ("metadata.name", "/metadata/name"),
    ("metadata.namespace", "/metadata/namespace"),
    ("involvedObject.name", "/involvedObject/name"),
    ("involvedObject.kind", "/involvedObject/kind"),
    ("involvedObject.namespace", "/involvedObject/namespace"),
    ("involvedObject.uid", "/involvedObject/uid"),
    ("status.phase", "/status/phase"),
    ("spec.nodeName", "/spec/nodeName"),
];

impl FieldSelector {
    /// Whether it selects everything.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Parses `metadata.name=x,involvedObject.name!=y`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut out = Vec::new();
        for term in text.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let (field, equal, value) = if let Some((f, v)) = term.split_once("!=") {
                (f, false, v)
            } else if let Some((f, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
                (f, true, v)
            } else {
                return Err(format!("invalid field selector term {term:?}"));
            };
            let field = field.trim();
            if !FIELDS.iter().any(|(name, _)| *name == field) {
                return Err(format!("field label not supported: {field}"));
            }
            out.push((field.to_owned(), equal, value.trim().to_owned()));
        }
        Ok(Self(out))
    }

    /// Whether `object` satisfies every term.
    pub fn matches(&self, object: &Value) -> bool {
        self.0.iter().all(|(field, equal, value)| {
            let pointer = FIELDS.iter().find(|(name, _)| name == field).map_or("", |(_, p)| p);
            let actual = object.pointer(pointer).and_then(Value::as_str).unwrap_or("");
            (actual == value) == *equal
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn label_selectors_support_every_operator() {
        let l = labels(&[("ray.io/cluster", "c1"), ("ray.io/node-type", "worker")]);
        for (sel, want) in [
            ("ray.io/cluster=c1", true),
            ("ray.io/cluster==c1", true),
            ("ray.io/cluster=c2", false),
            ("ray.io/node-type!=head", true),
            ("ray.io/node-type in (head, worker)", true),
            ("ray.io/node-type in (head)", false),
            ("ray.io/node-type notin (head)", true),
            ("missing notin (x)", true),
            ("ray.io/cluster", true),
            ("!ray.io/cluster", false),
            ("!missing", true),
            ("ray.io/cluster=c1,ray.io/node-type in (worker,x),!missing", true),
            ("", true),
        ] {
            assert_eq!(LabelSelector::parse(sel).unwrap().matches(&l), want, "{sel}");
        }
    }

    #[test]
    fn bad_label_selectors_are_errors() {
        for bad in ["a in x", "a b", "=x", "a in (x"] {
            assert!(LabelSelector::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn field_selectors_read_supported_fields() {
        let ev = json!({"metadata": {"name": "e1", "namespace": "ns"}, "involvedObject": {"name": "p1"}});
        for (sel, want) in [
            ("metadata.name=e1", true),
            ("metadata.namespace=other", false),
            ("involvedObject.name=p1,metadata.name!=x", true),
            ("involvedObject.name!=p1", false),
        ] {
            assert_eq!(FieldSelector::parse(sel).unwrap().matches(&ev), want, "{sel}");
        }
        assert!(FieldSelector::parse("spec.foo=x").is_err());
        assert!(FieldSelector::parse("metadata.name").is_err());
    }
}
