//! Suspend and resume: KubeRay's `spec.suspend`. While it is true the
//! operator deletes every pod of the cluster and keeps the RayCluster
//! (conditions `RayClusterSuspending`, then `RayClusterSuspended`); set
//! false, it creates them again.

use serde_json::{Value, json};

use super::{ANNOTATION_LIFECYCLE, ANNOTATION_WARNED_AT};
use crate::domain::{ClusterPatch, ObservedCluster};

/// The JSON patch that sets `spec.suspend`, conditional on the version of
/// `cluster` it was decided on (a resume admitted under a quota writes
/// onto exactly what was admitted). A lifecycle warning goes with it: what
/// it warned of is moot.
pub fn suspend_patch(cluster: &ObservedCluster, suspend: bool) -> ClusterPatch {
    let mut ops = vec![
        precondition(cluster),
        json!({"op": "add", "path": "/spec/suspend", "value": suspend}),
    ];
    ops.extend(clear_ops(cluster));
    ClusterPatch::new(Value::Array(ops))
}

/// The patch recording a lifecycle warning on the cluster: when its owner
/// was warned, and of what. `None` for a cluster without annotations (one
/// krayne did not create): adding the whole map could drop others' keys,
/// so such a cluster is not warned, and so never acted on.
pub fn lifecycle_warning_patch(cluster: &ObservedCluster, warned_at: &str, plan: &str) -> Option<ClusterPatch> {
    if cluster.metadata.annotations.is_empty() {
        return None;
    }
    Some(ClusterPatch::new(Value::Array(vec![
        precondition(cluster),
        json!({"op": "add", "path": annotation(ANNOTATION_WARNED_AT), "value": warned_at}),
        json!({"op": "add", "path": annotation(ANNOTATION_LIFECYCLE), "value": plan}),
    ])))
}

/// The patch taking back a warning that no longer holds (the cluster was
/// used again, kept, or the policy changed); `None` when there is none.
pub fn lifecycle_clear_patch(cluster: &ObservedCluster) -> Option<ClusterPatch> {
    let ops = clear_ops(cluster);
    (!ops.is_empty()).then(|| {
        let mut all = vec![precondition(cluster)];
        all.extend(ops);
        ClusterPatch::new(Value::Array(all))
    })
}

fn precondition(cluster: &ObservedCluster) -> Value {
    let rv = cluster.metadata.resource_version.clone().unwrap_or_default();
    json!({"op": "replace", "path": "/metadata/resourceVersion", "value": rv})
}

fn clear_ops(cluster: &ObservedCluster) -> Vec<Value> {
    [ANNOTATION_WARNED_AT, ANNOTATION_LIFECYCLE]
        .into_iter()
        .filter(|key| cluster.metadata.annotations.get(key).is_some())
        .map(|key| json!({"op": "remove", "path": annotation(key)}))
        .collect()
}

/// A JSON pointer to an annotation (`/` in its key escaped as `~1`).
fn annotation(key: &str) -> String {
    format!("/metadata/annotations/{}", key.replace('~', "~0").replace('/', "~1"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_patch_is_conditional_on_the_version_read() {
        let cluster: ObservedCluster = serde_json::from_value(json!({
            "metadata": {"name": "c", "namespace": "ml", "resourceVersion": "42"},
            "spec": {"headGroupSpec": {"template": {"spec": {"containers": []}}}}
        }))
        .unwrap();
        let patch = suspend_patch(&cluster, true);
        assert_eq!(patch.as_json()[0]["value"], "42");
        assert_eq!(
            patch.as_json()[1],
            json!({"op": "add", "path": "/spec/suspend", "value": true})
        );
    }
}
