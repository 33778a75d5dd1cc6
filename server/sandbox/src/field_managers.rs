//! Field ownership, as server-side apply keeps it in
//! `metadata.managedFields` (`fieldsV1`: `{"f:spec": {"f:holderIdentity":
//! {}}}`), for writes that name a `fieldManager`. An apply that would change
//! a field another manager owns is refused with 409 unless forced; a
//! patch (`operation: Update`) takes the fields it sets. Lease libraries
//! (kube-lease-manager) elect a leader on exactly this: two candidates
//! applying `holderIdentity` at once, the second is refused. (krayne's
//! own election uses updates carrying the `resourceVersion` read.)
//!
//! Kept simple where the sandbox's clients do not look: only the fields
//! under `spec` are tracked (by path, lists as whole values), and an apply
//! does not remove the fields its manager applied before and left out.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

/// A field's path under the object's root, e.g. `["spec", "holderIdentity"]`.
type FieldPath = Vec<String>;

/// The fields `patch` sets (non-null) and removes (null) under `spec`.
fn fields(patch: &Value) -> (Vec<(FieldPath, &Value)>, Vec<FieldPath>) {
    fn walk<'a>(
        v: &'a Value,
        path: &mut FieldPath,
        set: &mut Vec<(FieldPath, &'a Value)>,
        removed: &mut Vec<FieldPath>,
    ) {
        match v {
            Value::Object(map) if !map.is_empty() => {
                for (k, child) in map {
                    path.push(k.clone());
                    walk(child, path, set, removed);
                    path.pop();
                }
            }
            Value::Null => removed.push(path.clone()),
            other => set.push((path.clone(), other)),
        }
    }
    let (mut set, mut removed) = (Vec::new(), Vec::new());
    if let Some(spec) = patch.get("spec") {
        walk(spec, &mut vec!["spec".to_owned()], &mut set, &mut removed);
    }
    (set, removed)
}

fn value_at<'a>(doc: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(doc, |v, k| v.get(k))
}

/// Each manager's entry: (manager, operation, its fields).
fn entries(doc: &Value) -> Vec<(String, String, BTreeSet<FieldPath>)> {
    fn walk(v: &Value, path: &mut FieldPath, out: &mut BTreeSet<FieldPath>) {
        let Some(map) = v.as_object() else { return };
        if map.is_empty() && !path.is_empty() {
            out.insert(path.clone());
        }
        for (k, child) in map {
            if let Some(name) = k.strip_prefix("f:") {
                path.push(name.to_owned());
                walk(child, path, out);
                path.pop();
            }
        }
    }
    let list = doc["metadata"]["managedFields"].as_array().cloned().unwrap_or_default();
    list.iter()
        .map(|e| {
            let mut owned = BTreeSet::new();
            walk(&e["fieldsV1"], &mut Vec::new(), &mut owned);
            let text = |k: &str| e[k].as_str().unwrap_or_default().to_owned();
            (text("manager"), text("operation"), owned)
        })
        .collect()
}

fn set_entries(doc: &mut Value, entries: &[(String, String, BTreeSet<FieldPath>)], api_version: &str) {
    let now = jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
    let list: Vec<Value> = entries
        .iter()
        .filter(|(_, _, owned)| !owned.is_empty())
        .map(|(manager, operation, owned)| {
            let mut tree = Map::new();
            for path in owned {
                insert(&mut tree, path);
            }
            json!({"manager": manager, "operation": operation, "apiVersion": api_version,
                   "time": now, "fieldsType": "FieldsV1", "fieldsV1": Value::Object(tree)})
        })
        .collect();
    doc["metadata"]["managedFields"] = Value::Array(list);
}

fn insert(tree: &mut Map<String, Value>, path: &[String]) {
    let Some((first, rest)) = path.split_first() else {
        return;
    };
    if let Value::Object(child) = tree.entry(format!("f:{first}")).or_insert_with(|| json!({})) {
        insert(child, rest);
    }
}

/// The fields of `patch` another manager owns with a different value now:
/// `conflict with "m": .spec.holderIdentity`, one each.
pub(super) fn conflicts(current: &Value, patch: &Value, manager: &str) -> Vec<String> {
    let owners = entries(current);
    let (set, _) = fields(patch);
    let mut found = Vec::new();
    for (path, value) in set {
        if value_at(current, &path) == Some(value) {
            continue;
        }
        for (other, _, owned) in &owners {
            if other != manager && owned.contains(&path) {
                found.push(format!("conflict with {other:?}: .{}", path.join(".")));
            }
        }
    }
    found
}

/// Records that `manager` set what `patch` sets (`Apply` or `Update`):
/// the fields become its own; a field it changed, or one it removed, is no
/// longer anybody else's. An apply that changed nothing of another's
/// shares it, as server-side apply does.
pub(super) fn record(before: &Value, doc: &mut Value, patch: &Value, manager: &str, operation: &str) {
    let mut owners = entries(before);
    let (set, removed) = fields(patch);
    let changed: Vec<&FieldPath> = set
        .iter()
        .filter(|(path, value)| value_at(before, path) != Some(*value))
        .map(|(path, _)| path)
        .chain(removed.iter())
        .collect();
    // A field changed or removed belongs to no other entry any more (the
    // writer's own entry of the other operation included: a manager that
    // applied a field and then patched it away owns it nowhere).
    for (_, _, owned) in owners
        .iter_mut()
        .filter(|(m, op, _)| (m.as_str(), op.as_str()) != (manager, operation))
    {
        owned.retain(|p| !changed.contains(&p));
    }
    let mine = match owners.iter().position(|(m, op, _)| m == manager && op == operation) {
        Some(i) => i,
        None => {
            owners.push((manager.to_owned(), operation.to_owned(), BTreeSet::new()));
            owners.len() - 1
        }
    };
    let owned = &mut owners[mine].2;
    for (path, _) in set {
        owned.insert(path);
    }
    for path in &removed {
        owned.remove(path);
    }
    let api_version = doc["apiVersion"].as_str().unwrap_or("v1").to_owned();
    set_entries(doc, &owners, &api_version);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease() -> Value {
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l"}, "spec": {}})
    }

    fn apply(doc: &Value, patch: &Value, manager: &str) -> Result<Value, Vec<String>> {
        let found = conflicts(doc, patch, manager);
        if !found.is_empty() {
            return Err(found);
        }
        let mut next = doc.clone();
        json_patch::merge(&mut next, patch);
        record(doc, &mut next, patch, manager, "Apply");
        Ok(next)
    }

    #[test]
    fn the_second_of_two_candidates_is_refused_until_the_field_is_released() {
        let take = |who: &str| json!({"spec": {"holderIdentity": who, "leaseDurationSeconds": 15}});
        let held = apply(&lease(), &take("a"), "kube-lease-a").unwrap();
        assert_eq!(
            held["metadata"]["managedFields"][0]["fieldsV1"]["f:spec"]["f:holderIdentity"],
            json!({})
        );
        let refused = apply(&held, &take("b"), "kube-lease-b").unwrap_err();
        assert_eq!(refused, [r#"conflict with "kube-lease-a": .spec.holderIdentity"#]);
        // The same value is shared, not a conflict.
        assert!(apply(&held, &json!({"spec": {"leaseDurationSeconds": 15}}), "kube-lease-b").is_ok());
        // A forced release (a patch setting nulls) frees the fields.
        let release = json!({"spec": {"holderIdentity": null, "leaseDurationSeconds": null}});
        let mut released = held.clone();
        json_patch::merge(&mut released, &release);
        record(&held, &mut released, &release, "kube-lease-b", "Update");
        assert!(released["spec"].get("holderIdentity").is_none());
        assert!(apply(&released, &take("b"), "kube-lease-b").is_ok());
        // The holder giving it back itself (a patch of nulls): its applied
        // fields are nobody's, and another may take them.
        let mut given_back = held.clone();
        json_patch::merge(&mut given_back, &release);
        record(&held, &mut given_back, &release, "kube-lease-a", "Update");
        assert!(
            conflicts(&given_back, &take("b"), "kube-lease-b").is_empty(),
            "{given_back:#}"
        );
    }

    #[test]
    fn an_update_takes_the_fields_it_changes() {
        let held = apply(&lease(), &json!({"spec": {"holderIdentity": "a"}}), "kube-lease-a").unwrap();
        let force = json!({"spec": {"holderIdentity": "b"}});
        let mut taken = held.clone();
        json_patch::merge(&mut taken, &force);
        record(&held, &mut taken, &force, "kube-lease-b", "Update");
        let owners = entries(&taken);
        assert_eq!(owners.len(), 1, "a's entry is empty, so gone: {owners:?}");
        assert_eq!(owners[0].0, "kube-lease-b");
        assert!(conflicts(&taken, &json!({"spec": {"holderIdentity": "a"}}), "kube-lease-a").len() == 1);
    }
}
