//! The Kubernetes Event the lifecycle reaper posts on a RayCluster when it
//! warns or acts, so `kubectl describe raycluster` and every tool reading
//! events tell the owner too.

use serde_json::{Value, json};

use super::{KUBERAY_API_VERSION, RAYCLUSTER_KIND};
use crate::domain::ObservedCluster;

/// The component events name as their source.
pub const LIFECYCLE_COMPONENT: &str = "krayne-lifecycle";

/// A core/v1 Event on `cluster`: `kind` `Normal` or `Warning`, a
/// CamelCase `reason` (`LifecycleWarning`, `LifecycleSuspended`,
/// `LifecycleDeleted`), and the message, at `now` (RFC 3339).
pub fn lifecycle_event(cluster: &ObservedCluster, kind: &str, reason: &str, message: &str, now: &str) -> Value {
    let name = cluster.metadata.name.as_str();
    json!({
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": format!("{name}."), "namespace": cluster.metadata.namespace.as_str()},
        "involvedObject": {
            "apiVersion": KUBERAY_API_VERSION,
            "kind": RAYCLUSTER_KIND,
            "name": name,
            "namespace": cluster.metadata.namespace.as_str(),
            "uid": cluster.metadata.uid,
            "resourceVersion": cluster.metadata.resource_version.as_deref(),
        },
        "type": kind,
        "reason": reason,
        "message": message,
        "count": 1,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "source": {"component": LIFECYCLE_COMPONENT},
        "reportingComponent": LIFECYCLE_COMPONENT,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_event_names_the_raycluster_it_is_about() {
        let cluster: ObservedCluster = serde_json::from_value(json!({
            "metadata": {"name": "c", "namespace": "ml", "uid": "u-1", "resourceVersion": "9"},
            "spec": {"headGroupSpec": {"template": {"spec": {"containers": []}}}}
        }))
        .unwrap();
        let e = lifecycle_event(
            &cluster,
            "Warning",
            "LifecycleWarning",
            "suspend at …",
            "2026-11-26T10:00:00Z",
        );
        assert_eq!(e["involvedObject"]["kind"], "RayCluster");
        assert_eq!(e["involvedObject"]["uid"], "u-1");
        assert_eq!(e["metadata"]["generateName"], "c.");
        assert_eq!(e["source"]["component"], "krayne-lifecycle");
    }
}
