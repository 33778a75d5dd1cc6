//! The Kubernetes Event the lifecycle reaper posts on a RayCluster when it
//! warns or acts, so `kubectl describe raycluster` and every tool reading
//! events tell the owner too.

use serde_json::{Value, json};

use super::{KUBERAY_API_VERSION, RAYCLUSTER_KIND, RAYJOB_KIND};
use crate::domain::{ObjectMeta, ObservedCluster, ObservedRayJob};

/// The component events name as their source.
pub const LIFECYCLE_COMPONENT: &str = "krayne-lifecycle";

/// A core/v1 Event on `cluster`: `kind` `Normal` or `Warning`, a
/// CamelCase `reason` (`LifecycleWarning`, `LifecycleSuspended`,
/// `LifecycleDeleted`), and the message, at `now` (RFC 3339).
pub fn lifecycle_event(cluster: &ObservedCluster, kind: &str, reason: &str, message: &str, now: &str) -> Value {
    event_on(RAYCLUSTER_KIND, &cluster.metadata, kind, reason, message, now)
}

/// As [`lifecycle_event`], on a RayJob (the queue's admission of one).
pub fn rayjob_event(job: &ObservedRayJob, kind: &str, reason: &str, message: &str, now: &str) -> Value {
    event_on(RAYJOB_KIND, &job.metadata, kind, reason, message, now)
}

fn event_on(object_kind: &str, meta: &ObjectMeta, kind: &str, reason: &str, message: &str, now: &str) -> Value {
    let name = meta.name.as_str();
    json!({
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": format!("{name}."), "namespace": meta.namespace.as_str()},
        "involvedObject": {
            "apiVersion": KUBERAY_API_VERSION,
            "kind": object_kind,
            "name": name,
            "namespace": meta.namespace.as_str(),
            "uid": meta.uid,
            "resourceVersion": meta.resource_version.as_deref(),
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
