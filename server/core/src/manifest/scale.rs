//! Scaling one worker group: the request, its checks, and the conditional
//! patch of the RayCluster's `workerGroupSpecs` that carries it out.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::domain::{
    ClusterPatch, Error, ObservedCluster, Violations, check_worker_counts, limits,
    quota::{self, Usage},
};

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

/// What a scale will write: the counts one worker group of a cluster will
/// have. Admission charges [`ScalePlan::applied`] and the write sends
/// [`ScalePlan::patch`]: both come from this one value, so a cluster is
/// never written with more than it was charged for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScalePlan {
    index: usize,
    replicas: u32,
    min: u32,
    max: u32,
}

/// The counts `input` gives its group of `cluster`. A cluster with
/// autoscaling changes only the counts given; a fixed-size one pins min
/// and max to replicas, as Krayne does. The result obeys create's rules
/// (`max_replicas` raised to `replicas`).
pub fn plan_scale(cluster: &ObservedCluster, input: &ScaleInput) -> Result<ScalePlan, Error> {
    let groups = &cluster.spec.worker_group_specs;
    let (index, group) = groups
        .iter()
        .enumerate()
        .find(|(_, g)| g.group_name == input.worker_group)
        .ok_or_else(|| {
            // The choices, since the caller guessed (`worker` is the usual guess).
            let names: Vec<String> = groups.iter().map(|g| format!("{:?}", g.group_name.as_str())).collect();
            let has = match names.as_slice() {
                [] => "it has no worker groups".to_owned(),
                [one] => format!("its worker group is {one}"),
                many => format!("its worker groups are {}", many.join(", ")),
            };
            Error::invalid(
                "worker_group",
                format!("no worker group {:?} in this cluster: {has}", input.worker_group),
            )
        })?;
    let current = |n: Option<i64>| n.and_then(|n| u32::try_from(n).ok()).unwrap_or(0);
    let (mut replicas, mut min, mut max) = (
        current(group.replicas),
        current(group.min_replicas),
        current(group.max_replicas),
    );
    replicas = input.replicas.unwrap_or(replicas);
    if cluster.spec.enable_in_tree_autoscaling == Some(true) {
        min = input.min_replicas.unwrap_or(min);
        max = input.max_replicas.unwrap_or(max);
    } else {
        (min, max) = (replicas, replicas);
    }
    let (replicas, min, max) = check_worker_counts(index, replicas, min, max)?;
    Ok(ScalePlan {
        index,
        replicas,
        min,
        max,
    })
}

impl ScalePlan {
    /// `cluster` as it will be once the plan is written.
    pub fn applied(&self, cluster: &ObservedCluster) -> ObservedCluster {
        let mut scaled = cluster.clone();
        if let Some(g) = scaled.spec.worker_group_specs.get_mut(self.index) {
            g.replicas = Some(i64::from(self.replicas));
            g.min_replicas = Some(i64::from(self.min));
            g.max_replicas = Some(i64::from(self.max));
        }
        scaled
    }

    /// What the scale adds to `cluster`'s quota charge (nothing for a
    /// scale-down).
    pub fn growth(&self, cluster: &ObservedCluster) -> Usage {
        quota::charge(&self.applied(cluster)).minus(quota::charge(cluster))
    }

    /// What the plan asks of the namespace's quota: its growth, and what
    /// the cluster holds after it.
    pub fn request(&self, cluster: &ObservedCluster) -> quota::Request {
        let after = quota::charge(&self.applied(cluster));
        quota::Request {
            growth: after.minus(quota::charge(cluster)),
            cluster_after: after,
            site: Some(cluster.site.clone()),
        }
    }

    /// The JSON patch that writes the plan, conditional on `cluster`'s
    /// resourceVersion (the version the plan was made from).
    pub fn patch(&self, cluster: &ObservedCluster) -> ClusterPatch {
        let rv = cluster.metadata.resource_version.clone().unwrap_or_default();
        let path = |f: &str| format!("/spec/workerGroupSpecs/{}/{f}", self.index);
        let mut ops = BTreeMap::new();
        ops.insert("replicas", self.replicas);
        ops.insert("minReplicas", self.min);
        ops.insert("maxReplicas", self.max);
        let mut patch = vec![json!({"op": "replace", "path": "/metadata/resourceVersion", "value": rv})];
        patch.extend(
            ops.into_iter()
                .map(|(f, v)| json!({"op": "add", "path": path(f), "value": v})),
        );
        ClusterPatch::new(Value::Array(patch))
    }
}

/// The conditional JSON patch that scales one group of `cluster`.
pub fn scale_patch(cluster: &ObservedCluster, input: &ScaleInput) -> Result<ClusterPatch, Error> {
    plan_scale(cluster, input).map(|plan| plan.patch(cluster))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

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
        let refused = scale_patch(&cluster(true), &missing).unwrap_err().to_string();
        assert!(
            refused.contains("worker_group: no worker group \"zz\" in this cluster: its worker group"),
            "{refused}"
        );
    }

    /// A RayCluster as KubeRay stores it: a head and two worker groups
    /// (one with a GPU), requests equal to limits.
    fn stored(autoscaling: bool, counts: [(u32, u32, u32); 2]) -> Value {
        let resources = |cpu: &str, memory: &str, gpus: u32| {
            let mut amounts = json!({"cpu": cpu, "memory": memory});
            if gpus > 0 {
                amounts["nvidia.com/gpu"] = json!(gpus.to_string());
            }
            json!({"requests": amounts, "limits": amounts})
        };
        let group = |name: &str, (replicas, min, max): (u32, u32, u32), gpus: u32| {
            json!({
                "groupName": name, "replicas": replicas, "minReplicas": min, "maxReplicas": max,
                "rayStartParams": {},
                "template": {"spec": {"containers": [{
                    "name": "ray-worker", "image": "rayproject/ray:2.43.0",
                    "resources": resources("2", "8Gi", gpus),
                }]}},
            })
        };
        json!({
            "apiVersion": "ray.io/v1", "kind": "RayCluster",
            "metadata": {"name": "c", "namespace": "ml", "resourceVersion": "41"},
            "spec": {
                "enableInTreeAutoscaling": autoscaling,
                "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [{
                    "name": "ray-head", "image": "rayproject/ray:2.43.0",
                    "resources": resources("1", "4Gi", 0),
                }]}}},
                "workerGroupSpecs": [group("cpu", counts[0], 0), group("gpu", counts[1], 1)],
            },
        })
    }

    #[test]
    fn a_scale_is_charged_with_its_new_counts() {
        let c: ObservedCluster = serde_json::from_value(stored(true, [(0, 0, 1), (1, 0, 2)])).unwrap();
        let up = ScaleInput {
            worker_group: "gpu".into(),
            replicas: Some(3),
            max_replicas: Some(6),
            ..ScaleInput::default()
        };
        let growth = plan_scale(&c, &up).unwrap().growth(&c);
        assert_eq!(
            quota::display(quota::QuotaResource::Gpus, growth.gpu_nanos),
            "4",
            "max 2 → 6"
        );
        let down = ScaleInput {
            worker_group: "gpu".into(),
            replicas: Some(0),
            max_replicas: Some(1),
            ..ScaleInput::default()
        };
        assert_eq!(plan_scale(&c, &down).unwrap().growth(&c), Usage::default());
    }

    #[test]
    fn replicas_past_max_are_charged_as_the_max_they_raise() {
        // The review's finding: `replicas: 16` on an autoscaling group
        // whose max is 2 writes maxReplicas 16, so it is charged 16 GPUs.
        let c: ObservedCluster = serde_json::from_value(stored(true, [(0, 0, 1), (1, 0, 2)])).unwrap();
        let input = ScaleInput {
            worker_group: "gpu".into(),
            replicas: Some(16),
            ..ScaleInput::default()
        };
        let growth = plan_scale(&c, &input).unwrap().growth(&c);
        assert_eq!(
            quota::display(quota::QuotaResource::Gpus, growth.gpu_nanos),
            "14",
            "max 2 → 16"
        );
    }

    fn counts() -> impl Strategy<Value = (u32, u32, u32)> {
        (0u32..40, 0u32..40, 0u32..40).prop_map(|(a, b, c)| {
            let mut v = [a, b, c];
            v.sort_unstable();
            (v[1], v[0], v[2])
        })
    }

    proptest! {
        /// For any scale, what admission charges is the charge of the
        /// cluster the written patch produces.
        #[test]
        fn the_charge_is_the_charge_of_what_the_patch_writes(
            autoscaling in any::<bool>(),
            cpu in counts(),
            gpu in counts(),
            group in prop_oneof![Just("cpu"), Just("gpu"), Just("none")],
            replicas in proptest::option::of(0u32..80),
            min_replicas in proptest::option::of(0u32..80),
            max_replicas in proptest::option::of(0u32..80),
        ) {
            let mut object = stored(autoscaling, [cpu, gpu]);
            let cluster: ObservedCluster = serde_json::from_value(object.clone()).unwrap();
            let input = ScaleInput { worker_group: group.into(), replicas, min_replicas, max_replicas };
            let Ok(plan) = plan_scale(&cluster, &input) else {
                prop_assert!(scale_patch(&cluster, &input).is_err());
                return Ok(());
            };
            let patch: json_patch::Patch = serde_json::from_value(plan.patch(&cluster).as_json().clone()).unwrap();
            json_patch::patch(&mut object, &patch).unwrap();
            let written: ObservedCluster = serde_json::from_value(object).unwrap();
            prop_assert_eq!(quota::charge(&plan.applied(&cluster)), quota::charge(&written));
            let before = quota::charge(&cluster);
            prop_assert_eq!(plan.growth(&cluster), quota::charge(&written).minus(before));
        }
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
