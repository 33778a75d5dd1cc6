//! Suspend and resume: KubeRay's `spec.suspend`. While it is true the
//! operator deletes every pod of the cluster and keeps the RayCluster
//! (conditions `RayClusterSuspending`, then `RayClusterSuspended`); set
//! false, it creates them again.

use serde_json::{Value, json};

use crate::domain::{ClusterPatch, ObservedCluster};

/// The JSON patch that sets `spec.suspend`, conditional on the version of
/// `cluster` it was decided on (a resume admitted under a quota writes
/// onto exactly what was admitted).
pub fn suspend_patch(cluster: &ObservedCluster, suspend: bool) -> ClusterPatch {
    let rv = cluster.metadata.resource_version.clone().unwrap_or_default();
    ClusterPatch::new(Value::Array(vec![
        json!({"op": "replace", "path": "/metadata/resourceVersion", "value": rv}),
        json!({"op": "add", "path": "/spec/suspend", "value": suspend}),
    ]))
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
