//! Krayne's dot-notation overrides (`head.cpus=4`) on a config tree.
//!
//! Unlike Krayne, values are typed as YAML scalars (`3` is a number, `true`
//! a boolean, `4Gi` a string) and list items can be addressed by index
//! (`worker_groups.0.replicas=3` or `worker_groups[0].replicas=3`).

use serde_json::{Map, Value};

use super::ConfigError;

/// Applies each `path=value` assignment in order.
pub fn apply_overrides<S: AsRef<str>>(tree: &mut Value, assignments: &[S]) -> Result<(), ConfigError> {
    assignments.iter().try_for_each(|a| apply_override(tree, a.as_ref()))
}

/// Applies one `path=value` assignment. Missing mappings on the way are
/// created; an index one past the end of a list appends to it. An empty
/// value (`head.image=`) resets the field to its default.
pub fn apply_override(tree: &mut Value, assignment: &str) -> Result<(), ConfigError> {
    let fail = |reason: String| ConfigError::Override {
        assignment: assignment.to_owned(),
        reason,
    };
    let (path, raw) = assignment
        .split_once('=')
        .ok_or_else(|| fail("expected KEY=VALUE, e.g. head.cpus=4".into()))?;
    let segments = split_path(path.trim()).ok_or_else(|| fail(format!("bad key {path:?}")))?;
    let value = scalar(raw);
    let mut node = tree;
    let mut walked = String::new();
    for (i, seg) in segments.iter().enumerate() {
        let next_is_index = segments.get(i + 1).is_some_and(|s| s.parse::<usize>().is_ok());
        let last = i + 1 == segments.len();
        if node.is_null() {
            *node = if seg.parse::<usize>().is_ok() {
                Value::Array(Vec::new())
            } else {
                Value::Object(Map::new())
            };
        }
        let empty = || {
            if next_is_index {
                Value::Array(Vec::new())
            } else {
                Value::Object(Map::new())
            }
        };
        node = match node {
            Value::Object(map) => {
                if last {
                    map.insert((*seg).to_owned(), value);
                    return Ok(());
                }
                map.entry(*seg).or_insert_with(empty)
            }
            Value::Array(items) => {
                let index: usize = seg
                    .parse()
                    .map_err(|_| fail(format!("{walked} is a list; use an index, not {seg:?}")))?;
                if index == items.len() {
                    items.push(empty());
                }
                let len = items.len();
                let item = items
                    .get_mut(index)
                    .ok_or_else(|| fail(format!("{walked} has {len} items; index {index} is out of range")))?;
                if last {
                    *item = value;
                    return Ok(());
                }
                item
            }
            other => {
                return Err(fail(format!(
                    "{walked} is {}, so it has no field {seg:?}",
                    super::type_name(other)
                )));
            }
        };
        walked = if walked.is_empty() {
            (*seg).to_owned()
        } else {
            format!("{walked}.{seg}")
        };
    }
    Ok(())
}

/// `a.b[0].c` → `["a", "b", "0", "c"]`; `None` for empty segments.
fn split_path(path: &str) -> Option<Vec<&str>> {
    let mut out = Vec::new();
    for part in path.split('.') {
        let (key, mut rest) = part.split_at(part.find('[').unwrap_or(part.len()));
        if !key.is_empty() {
            out.push(key);
        } else if rest.is_empty() || out.is_empty() {
            return None;
        }
        while let Some(inner) = rest.strip_prefix('[') {
            let (index, after) = inner.split_once(']')?;
            if index.is_empty() {
                return None;
            }
            out.push(index);
            rest = after;
        }
        if !rest.is_empty() {
            return None;
        }
    }
    (!out.is_empty()).then_some(out)
}

/// The value typed as a YAML scalar in a file would be (so `off` is a
/// boolean, as PyYAML reads it); text YAML cannot read stays a string.
fn scalar(raw: &str) -> Value {
    if raw.trim().is_empty() {
        return Value::Null;
    }
    super::parse_yaml(raw).unwrap_or_else(|_| Value::String(raw.to_owned()))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn apply(mut tree: Value, a: &[&str]) -> Result<Value, String> {
        apply_overrides(&mut tree, a).map_err(|e| e.to_string())?;
        Ok(tree)
    }

    #[test]
    fn sets_nested_fields_creating_mappings() {
        let t = apply(json!({"name": "a"}), &["head.cpus=4", "services.ssh=false"]).unwrap();
        assert_eq!(t, json!({"name": "a", "head": {"cpus": 4}, "services": {"ssh": false}}));
    }

    #[test]
    fn types_values_as_yaml_scalars() {
        let t = apply(
            json!({}),
            &[
                "a=3", "b=true", "c=4Gi", "d=\"4\"", "e=500m", "f=1.5", "g=x=y", "h=off", "i='no'", "j=y", "k=010",
            ],
        )
        .unwrap();
        assert_eq!(
            t,
            json!({"a": 3, "b": true, "c": "4Gi", "d": "4", "e": "500m", "f": 1.5, "g": "x=y",
                   "h": false, "i": "no", "j": "y", "k": 8})
        );
    }

    #[test]
    fn addresses_list_items_both_ways() {
        let base = json!({"worker_groups": [{"name": "a"}, {"name": "b"}]});
        let t = apply(base, &["worker_groups.1.replicas=3", "worker_groups[0].gpus=1"]).unwrap();
        assert_eq!(
            t,
            json!({"worker_groups": [{"name": "a", "gpus": 1}, {"name": "b", "replicas": 3}]})
        );
    }

    #[test]
    fn creates_the_default_group_and_appends() {
        let t = apply(
            json!({"name": "x"}),
            &["worker_groups.0.replicas=2", "worker_groups[1].name=gpu"],
        )
        .unwrap();
        assert_eq!(
            t,
            json!({"name": "x", "worker_groups": [{"replicas": 2}, {"name": "gpu"}]})
        );
    }

    #[test]
    fn replaces_a_scalar_and_resets_with_an_empty_value() {
        let t = apply(json!({"head": {"image": "a"}}), &["head.image=", "name=b"]).unwrap();
        assert_eq!(t, json!({"head": {"image": null}, "name": "b"}));
    }

    #[test]
    fn reports_bad_assignments() {
        let cases = [
            ("head.cpus", "expected KEY=VALUE"),
            ("=3", "bad key"),
            ("a..b=1", "bad key"),
            ("worker_groups[=1", "bad key"),
            ("worker_groups.5.replicas=1", "index 5 is out of range"),
            ("worker_groups.x=1", "is a list; use an index"),
            ("name.first=x", "name is a string, so it has no field \"first\""),
        ];
        for (assignment, expected) in cases {
            let err = apply(json!({"name": "n", "worker_groups": [{}]}), &[assignment]).unwrap_err();
            assert!(err.contains(expected), "{assignment}: {err}");
            assert!(err.starts_with("override "), "{err}");
        }
    }
}
