//! Suspend and resume: KubeRay's `spec.suspend`. While it is true the
//! operator deletes every pod of the cluster and keeps the RayCluster
//! (conditions `RayClusterSuspending`, then `RayClusterSuspended`); set
//! false, it creates them again.

use serde_json::{Value, json};

use super::{ANNOTATION_IDLE_SINCE, ANNOTATION_KEEP_UNTIL, ANNOTATION_LIFECYCLE, ANNOTATION_WARNED_AT};
use crate::domain::{ClusterPatch, ObjectMeta, ObservedCluster};

/// The JSON patch that sets `spec.suspend`, conditional on the version of
/// `cluster` it was decided on (a resume admitted under a quota writes
/// onto exactly what was admitted). A lifecycle warning goes with it: what
/// it warned of is moot.
pub fn suspend_patch(cluster: &ObservedCluster, suspend: bool) -> ClusterPatch {
    let mut ops = vec![
        precondition(&cluster.metadata),
        json!({"op": "add", "path": "/spec/suspend", "value": suspend}),
    ];
    ops.extend(clear_ops(&cluster.metadata));
    ClusterPatch::new(Value::Array(ops))
}

/// The patch setting (`Some`) or removing (`None`) each of `wanted`'s
/// annotations, only those that differ; `None` when nothing differs, and
/// for a cluster without annotations (one krayne did not create): adding
/// the whole map could drop others' keys, so such a cluster is not
/// annotated, so never warned, so never acted on.
pub fn annotations_patch(cluster: &ObservedCluster, wanted: &[(&str, Option<&str>)]) -> Option<ClusterPatch> {
    annotations_patch_of(&cluster.metadata, wanted)
}

/// [`annotations_patch`] for any object krayne annotates (a RayJob too).
pub fn annotations_patch_of(meta: &ObjectMeta, wanted: &[(&str, Option<&str>)]) -> Option<ClusterPatch> {
    let annotations = &meta.annotations;
    if annotations.is_empty() {
        return None;
    }
    let ops: Vec<Value> = wanted
        .iter()
        .filter(|(key, value)| annotations.get(key).map(|v| v.as_str()) != *value)
        .map(|(key, value)| match value {
            Some(value) => json!({"op": "add", "path": annotation(key), "value": value}),
            None => json!({"op": "remove", "path": annotation(key)}),
        })
        .collect();
    (!ops.is_empty()).then(|| {
        let mut all = vec![precondition(meta)];
        all.extend(ops);
        ClusterPatch::new(Value::Array(all))
    })
}

/// The patch keeping the cluster from its lifecycle policy until `until`
/// (RFC 3339): the warning and the plan go with it (the reaper plans
/// again). `None` for a cluster without annotations.
pub fn keep_patch(cluster: &ObservedCluster, until: &str) -> Option<ClusterPatch> {
    annotations_patch(
        cluster,
        &[
            (ANNOTATION_KEEP_UNTIL, Some(until)),
            (ANNOTATION_WARNED_AT, None),
            (ANNOTATION_LIFECYCLE, None),
        ],
    )
}

/// The operation that makes a patch conditional on the object's version.
pub(super) fn precondition(meta: &ObjectMeta) -> Value {
    let rv = meta.resource_version.clone().unwrap_or_default();
    json!({"op": "replace", "path": "/metadata/resourceVersion", "value": rv})
}

/// Suspended or resumed, a cluster starts its lifecycle over: the
/// warning, the plan and its idle time go; so does any place in line (a
/// cluster suspended or resumed outright waits in none).
pub(super) fn clear_ops(meta: &ObjectMeta) -> Vec<Value> {
    let lifecycle = [ANNOTATION_WARNED_AT, ANNOTATION_LIFECYCLE, ANNOTATION_IDLE_SINCE];
    removals(meta, &lifecycle)
        .into_iter()
        .chain(removals(meta, &super::queue::PLACE_KEYS))
        .collect()
}

/// Removals of those of `keys` the object has among its annotations.
pub(super) fn removals(meta: &ObjectMeta, keys: &[&str]) -> Vec<Value> {
    keys.iter()
        .copied()
        .filter(|key| meta.annotations.get(key).is_some())
        .map(|key| json!({"op": "remove", "path": annotation(key)}))
        .collect()
}

/// A JSON pointer to an annotation (`/` in its key escaped as `~1`).
pub(super) fn annotation(key: &str) -> String {
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

    #[test]
    fn annotations_are_patched_only_where_they_differ() {
        let cluster: ObservedCluster = serde_json::from_value(json!({
            "metadata": {"name": "c", "namespace": "ml", "resourceVersion": "7", "annotations": {
                "krayne.dev/created-by": "alice", "krayne.dev/idle-since": "2026-11-26T10:00:00Z"
            }},
            "spec": {"headGroupSpec": {"template": {"spec": {"containers": []}}}}
        }))
        .unwrap();
        let same = [
            (ANNOTATION_IDLE_SINCE, Some("2026-11-26T10:00:00Z")),
            (ANNOTATION_WARNED_AT, None),
        ];
        assert!(annotations_patch(&cluster, &same).is_none());
        let patch = annotations_patch(
            &cluster,
            &[(ANNOTATION_IDLE_SINCE, None), (ANNOTATION_LIFECYCLE, Some("x"))],
        )
        .unwrap();
        assert_eq!(
            patch.as_json(),
            &json!([
                {"op": "replace", "path": "/metadata/resourceVersion", "value": "7"},
                {"op": "remove", "path": "/metadata/annotations/krayne.dev~1idle-since"},
                {"op": "add", "path": "/metadata/annotations/krayne.dev~1lifecycle", "value": "x"},
            ])
        );
        let foreign: ObservedCluster = serde_json::from_value(json!({
            "metadata": {"name": "c", "namespace": "ml", "annotations": {"someone.else/key": "v"}},
            "spec": {"headGroupSpec": {"template": {"spec": {"containers": []}}}}
        }))
        .unwrap();
        assert!(
            keep_patch(&foreign, "2026-11-27T00:00:00Z").is_none(),
            "not krayne's: not annotated"
        );
    }
}
