//! Scaling one worker group: the request, its checks, and the conditional
//! patch of the RayCluster's `workerGroupSpecs` that carries it out.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::domain::{ClusterPatch, Error, ObservedCluster, ResourceKind, Violations, check_worker_counts, limits};

/// A scale request: one worker group, any of three counts.
#[derive(Debug, Clone, Default)]
pub struct ScaleInput {
    /// Worker group name.
    pub worker_group: String,
    /// New replicas.
    pub replicas: Option<u32>,
    /// New lower bound.
    pub min_replicas: Option<u32>,
    /// New upper bound.
    pub max_replicas: Option<u32>,
}

/// Refuses a scale request without a group, without a count or with a
/// count past the limit, naming each field.
pub fn check_scale_input(input: &ScaleInput) -> Result<(), Error> {
    let mut v = Violations::new();
    if input.worker_group.is_empty() {
        v.push("worker_group", "is required");
    }
    if input.replicas.is_none() && input.min_replicas.is_none() && input.max_replicas.is_none() {
        v.push(
            "replicas",
            "at least one of replicas, min_replicas or max_replicas is required",
        );
    }
    for (field, value) in [
        ("replicas", input.replicas),
        ("min_replicas", input.min_replicas),
        ("max_replicas", input.max_replicas),
    ] {
        if value.is_some_and(|n| n > limits::MAX_REPLICAS) {
            v.push(field, format!("must be at most {}", limits::MAX_REPLICAS));
        }
    }
    v.into_result(())
}

/// The conditional JSON patch that scales one group of `cluster`.
pub fn scale_patch(cluster: &ObservedCluster, input: &ScaleInput) -> Result<ClusterPatch, Error> {
    let groups = &cluster.spec.worker_group_specs;
    let (index, group) = groups
        .iter()
        .enumerate()
        .find(|(_, g)| g.group_name == input.worker_group)
        .ok_or_else(|| Error::NotFound {
            kind: ResourceKind::WorkerGroup,
            name: input.worker_group.clone(),
        })?;
    let current = |n: Option<i64>| n.and_then(|n| u32::try_from(n).ok()).unwrap_or(0);
    let (mut replicas, mut min, mut max) = (
        current(group.replicas),
        current(group.min_replicas),
        current(group.max_replicas),
    );
    if cluster.spec.enable_in_tree_autoscaling == Some(true) {
        replicas = input.replicas.unwrap_or(replicas);
        min = input.min_replicas.unwrap_or(min);
        max = input.max_replicas.unwrap_or(max);
    } else {
        replicas = input.replicas.unwrap_or(replicas);
        (min, max) = (replicas, replicas);
    }
    let (replicas, min, max) = check_worker_counts(index, replicas, min, max)?;
    let rv = cluster.metadata.resource_version.clone().unwrap_or_default();
    let path = |f: &str| format!("/spec/workerGroupSpecs/{index}/{f}");
    let mut ops = BTreeMap::new();
    ops.insert("replicas", replicas);
    ops.insert("minReplicas", min);
    ops.insert("maxReplicas", max);
    let mut patch = vec![json!({"op": "replace", "path": "/metadata/resourceVersion", "value": rv})];
    patch.extend(
        ops.into_iter()
            .map(|(f, v)| json!({"op": "add", "path": path(f), "value": v})),
    );
    Ok(ClusterPatch::new(Value::Array(patch)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(autoscaling: bool) -> ObservedCluster {
        serde_json::from_value(json!({
            "metadata": {"name": "c", "resourceVersion": "7"},
            "spec": {"enableInTreeAutoscaling": autoscaling, "workerGroupSpecs": [
                {"groupName": "a", "replicas": 1, "minReplicas": 0, "maxReplicas": 3},
                {"groupName": "b", "replicas": 2, "minReplicas": 1, "maxReplicas": 4},
            ]},
        }))
        .unwrap()
    }

    fn values(patch: ClusterPatch) -> Vec<(String, Value)> {
        patch
            .as_json()
            .as_array()
            .unwrap()
            .iter()
            .map(|op| (op["path"].as_str().unwrap().to_owned(), op["value"].clone()))
            .collect()
    }

    #[test]
    fn autoscaling_clusters_change_only_what_is_given() {
        let input = ScaleInput {
            worker_group: "b".into(),
            replicas: Some(3),
            ..ScaleInput::default()
        };
        let p = values(scale_patch(&cluster(true), &input).unwrap());
        assert_eq!(p[0], ("/metadata/resourceVersion".into(), json!("7")));
        assert!(p.contains(&("/spec/workerGroupSpecs/1/replicas".into(), json!(3))));
        assert!(p.contains(&("/spec/workerGroupSpecs/1/minReplicas".into(), json!(1))));
        assert!(p.contains(&("/spec/workerGroupSpecs/1/maxReplicas".into(), json!(4))));
    }

    #[test]
    fn fixed_size_clusters_pin_min_and_max() {
        let input = ScaleInput {
            worker_group: "a".into(),
            replicas: Some(5),
            min_replicas: Some(1),
            ..ScaleInput::default()
        };
        let p = values(scale_patch(&cluster(false), &input).unwrap());
        for f in ["replicas", "minReplicas", "maxReplicas"] {
            assert!(
                p.contains(&(format!("/spec/workerGroupSpecs/0/{f}"), json!(5))),
                "{f}: {p:?}"
            );
        }
    }

    #[test]
    fn the_result_obeys_creates_rules() {
        let input = ScaleInput {
            worker_group: "b".into(),
            replicas: Some(0),
            ..ScaleInput::default()
        };
        let e = scale_patch(&cluster(true), &input).unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid request: worker_groups[1].min_replicas: must be <= replicas (0)"
        );
        let raised = ScaleInput {
            worker_group: "a".into(),
            replicas: Some(9),
            ..ScaleInput::default()
        };
        let p = values(scale_patch(&cluster(true), &raised).unwrap());
        assert!(p.contains(&("/spec/workerGroupSpecs/0/maxReplicas".into(), json!(9))));
        let missing = ScaleInput {
            worker_group: "zz".into(),
            replicas: Some(1),
            ..ScaleInput::default()
        };
        assert!(matches!(
            scale_patch(&cluster(true), &missing),
            Err(Error::NotFound {
                kind: ResourceKind::WorkerGroup,
                ..
            })
        ));
    }

    #[test]
    fn scale_needs_a_group_and_a_count() {
        assert!(
            check_scale_input(&ScaleInput {
                worker_group: "a".into(),
                ..ScaleInput::default()
            })
            .is_err()
        );
        assert!(
            check_scale_input(&ScaleInput {
                replicas: Some(1),
                ..ScaleInput::default()
            })
            .is_err()
        );
        assert!(
            check_scale_input(&ScaleInput {
                worker_group: "a".into(),
                replicas: Some(10_001),
                ..ScaleInput::default()
            })
            .is_err()
        );
    }
}
