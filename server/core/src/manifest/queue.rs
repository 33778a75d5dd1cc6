//! A cluster in its namespace's line (docs/quotas.md) is a suspended
//! RayCluster carrying `krayne.dev/queued-since` (its place),
//! `krayne.dev/queue-position` and `krayne.dev/queue-reason` (what the
//! admitter last found). Admitted, it is resumed, loses them and gains
//! `krayne.dev/admitted-at`, from which its lifetime counts.

use serde_json::{Value, json};

use super::{
    ANNOTATION_ADMITTED_AT, ANNOTATION_QUEUE_POSITION, ANNOTATION_QUEUE_REASON, ANNOTATION_QUEUE_STATE,
    ANNOTATION_QUEUED_SINCE, annotations_patch,
    suspend::{annotation, annotations_patch_of, clear_ops, precondition, removals},
};
use crate::domain::{ClusterPatch, ObjectMeta, ObservedCluster, RenderedCluster};

/// Where a cluster joins the line: when, at which place, and why.
#[derive(Debug, Clone, Copy)]
pub struct Place<'a> {
    /// When it joined (RFC 3339).
    pub since: &'a str,
    /// Its place (1-based).
    pub position: u32,
    /// Why it waits.
    pub reason: &'a str,
}

/// `rendered` made to wait in line: created suspended, with its place.
pub fn queued(rendered: RenderedCluster, place: Place<'_>) -> RenderedCluster {
    suspended_with(rendered, &[], &place_annotations(place))
}

/// A RayJob manifest made to wait in line: created suspended (KubeRay
/// makes no cluster for it until it is resumed), with its place. KubeRay
/// copies a RayJob's annotations onto the cluster it makes, so admitting
/// it takes the place off first (see [`admit_patch`]).
pub fn queued_rayjob(mut manifest: Value, place: Place<'_>) -> Value {
    suspend_with(&mut manifest, &[], &place_annotations(place));
    manifest
}

/// A RayJob manifest for Kueue to admit through LocalQueue `queue`, as
/// [`for_kueue`] makes a cluster's (Kueue's RayJob integration: the RayJob
/// is the workload, its cluster made once Kueue un-suspends it).
pub fn rayjob_for_kueue(mut manifest: Value, queue: &str, since: &str) -> Value {
    let (labels, annotations) = kueue_marks(queue, since);
    suspend_with(&mut manifest, &labels, &annotations);
    manifest
}

/// `rendered` for Kueue to admit through LocalQueue `queue`: labelled
/// with it, created suspended (as Kueue's webhook would make it), waiting
/// since `since` until Kueue admits it.
pub fn for_kueue(rendered: RenderedCluster, queue: &str, since: &str) -> RenderedCluster {
    let (labels, annotations) = kueue_marks(queue, since);
    suspended_with(rendered, &labels, &annotations)
}

/// A label's or an annotation's key and value.
type Mark = (&'static str, String);

/// The label and annotations of what waits for Kueue.
fn kueue_marks(queue: &str, since: &str) -> ([Mark; 1], [Mark; 2]) {
    (
        [(super::LABEL_KUEUE_QUEUE, queue.to_owned())],
        [
            (ANNOTATION_QUEUED_SINCE, since.to_owned()),
            (ANNOTATION_QUEUE_REASON, "waiting for Kueue to admit it".to_owned()),
        ],
    )
}

/// `rendered` created suspended, with `labels` and `annotations` added.
fn suspended_with(
    rendered: RenderedCluster,
    labels: &[(&str, String)],
    annotations: &[(&str, String)],
) -> RenderedCluster {
    let (namespace, name) = (rendered.namespace().to_owned(), rendered.name().to_owned());
    let mut manifest = rendered.into_manifest();
    suspend_with(&mut manifest, labels, annotations);
    RenderedCluster::new(namespace, name, manifest)
}

/// Sets a manifest's `spec.suspend` and adds `labels` and `annotations`
/// (a RayCluster's and a RayJob's alike).
fn suspend_with(manifest: &mut Value, labels: &[(&str, String)], annotations: &[(&str, String)]) {
    if let Some(spec) = manifest.get_mut("spec").and_then(Value::as_object_mut) {
        spec.insert("suspend".into(), json!(true));
    }
    if let Some(metadata) = manifest.get_mut("metadata").and_then(Value::as_object_mut) {
        for (field, added) in [("labels", labels), ("annotations", annotations)] {
            let map = metadata.entry(field).or_insert_with(|| json!({}));
            if let Some(map) = map.as_object_mut() {
                for (key, value) in added {
                    map.insert((*key).into(), json!(value));
                }
            }
        }
    }
}

fn place_annotations(place: Place<'_>) -> [(&'static str, String); 3] {
    [
        (ANNOTATION_QUEUED_SINCE, place.since.to_owned()),
        (ANNOTATION_QUEUE_POSITION, place.position.to_string()),
        (ANNOTATION_QUEUE_REASON, place.reason.to_owned()),
    ]
}

/// The patch putting a suspended `cluster` in line at `place` (a resume
/// that waits). `None` for a cluster without krayne's annotations, whose
/// others could be lost.
pub fn enqueue_patch(cluster: &ObservedCluster, place: Place<'_>) -> Option<ClusterPatch> {
    let values = place_annotations(place);
    let wanted: Vec<(&str, Option<&str>)> = values.iter().map(|(k, v)| (*k, Some(v.as_str()))).collect();
    annotations_patch(cluster, &wanted)
}

/// The patch bringing a waiting cluster's (or RayJob's) place and reason
/// up to date: `None` when nothing changed.
pub fn place_patch(meta: &ObjectMeta, position: u32, reason: &str) -> Option<ClusterPatch> {
    let position = position.to_string();
    annotations_patch_of(
        meta,
        &[
            (ANNOTATION_QUEUE_POSITION, Some(position.as_str())),
            (ANNOTATION_QUEUE_REASON, Some(reason)),
        ],
    )
}

/// The annotations that hold a cluster's place in line.
pub(super) const PLACE_KEYS: [&str; 4] = [
    ANNOTATION_QUEUED_SINCE,
    ANNOTATION_QUEUE_POSITION,
    ANNOTATION_QUEUE_REASON,
    ANNOTATION_QUEUE_STATE,
];

/// The patch admitting a waiting cluster (or RayJob) at `now` (RFC
/// 3339): resumed, out of the line, its lifetime starting; conditional on
/// the version the admission was decided on. Both are `spec.suspend`.
pub fn admit_patch(meta: &ObjectMeta, now: &str) -> ClusterPatch {
    let mut ops = vec![
        precondition(meta),
        json!({"op": "add", "path": "/spec/suspend", "value": false}),
        json!({"op": "add", "path": annotation(ANNOTATION_ADMITTED_AT), "value": now}),
    ];
    ops.extend(clear_ops(meta));
    ClusterPatch::new(Value::Array(ops))
}

/// The patch taking a waiting cluster (or RayJob) out of the line, left
/// suspended.
pub fn leave_line_patch(meta: &ObjectMeta) -> ClusterPatch {
    let mut ops = vec![precondition(meta)];
    ops.extend(removals(meta, &PLACE_KEYS));
    ClusterPatch::new(Value::Array(ops))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::ClusterStatus;

    fn observed(manifest: &Value) -> ObservedCluster {
        serde_json::from_value(manifest.clone()).unwrap()
    }

    fn rendered() -> RenderedCluster {
        RenderedCluster::new(
            "ml".into(),
            "c".into(),
            json!({
                "metadata": {"name": "c", "namespace": "ml", "resourceVersion": "5",
                             "annotations": {"krayne.dev/created-by": "alice"}},
                "spec": {"headGroupSpec": {"template": {"spec": {"containers": []}}}}
            }),
        )
    }

    const PLACE: Place<'static> = Place {
        since: "2026-11-29T06:00:00Z",
        position: 2,
        reason: "gpus: needs 4, 0 of 8 free",
    };

    #[test]
    fn a_queued_cluster_is_made_suspended_with_its_place_and_reads_as_queued() {
        let cluster = observed(queued(rendered(), PLACE).manifest());
        assert_eq!(cluster.spec.suspend, Some(true));
        assert!(cluster.queued_since().is_some());
        let info = super::super::cluster_info(&cluster, Some(&[]));
        assert_eq!(info.status, ClusterStatus::Queued);
        assert_eq!(info.queue_position, Some(2));
        assert_eq!(info.queued_since.as_deref(), Some("2026-11-29T06:00:00Z"));
        assert_eq!(info.queue_reason.as_deref(), Some("gpus: needs 4, 0 of 8 free"));
        assert_eq!(
            crate::domain::quota::charge(&cluster),
            crate::domain::quota::Usage::default()
        );
    }

    #[test]
    fn admitting_resumes_it_out_of_the_line_on_the_version_decided() {
        let cluster = observed(queued(rendered(), PLACE).manifest());
        let patch = admit_patch(&cluster.metadata, "2026-11-29T07:00:00Z");
        let ops = patch.as_json().as_array().unwrap();
        assert_eq!(ops[0]["value"], "5");
        assert_eq!(ops[1], json!({"op": "add", "path": "/spec/suspend", "value": false}));
        assert_eq!(ops[2]["path"], "/metadata/annotations/krayne.dev~1admitted-at");
        let removed: Vec<&str> = ops[3..].iter().map(|o| o["path"].as_str().unwrap()).collect();
        assert_eq!(
            removed,
            [
                "/metadata/annotations/krayne.dev~1queued-since",
                "/metadata/annotations/krayne.dev~1queue-position",
                "/metadata/annotations/krayne.dev~1queue-reason"
            ]
        );
        assert!(
            place_patch(&cluster.metadata, 2, PLACE.reason).is_none(),
            "nothing moved"
        );
        assert!(place_patch(&cluster.metadata, 1, PLACE.reason).is_some());
        assert_eq!(
            leave_line_patch(&cluster.metadata).as_json().as_array().unwrap().len(),
            4
        );
    }

    #[test]
    fn a_queued_rayjob_is_made_suspended_with_its_place_and_reads_as_queued() {
        let manifest = json!({
            "apiVersion": "ray.io/v1", "kind": "RayJob",
            "metadata": {"name": "train", "namespace": "ml", "resourceVersion": "9",
                         "annotations": {"krayne.dev/created-by": "alice"}},
            "spec": {"entrypoint": "python train.py", "shutdownAfterJobFinishes": true,
                     "rayClusterSpec": {"headGroupSpec": {"template": {"spec": {"containers": []}}}}},
        });
        let queued = queued_rayjob(manifest, PLACE);
        assert_eq!(queued["spec"]["suspend"], true);
        let job: crate::domain::ObservedRayJob = serde_json::from_value(queued).unwrap();
        let info = crate::domain::RayJobInfo::of(&job, None, None);
        assert_eq!(info.state, crate::domain::RunState::Queued);
        assert_eq!(
            (info.queue_position, info.queue_reason.as_deref()),
            (Some(2), Some(PLACE.reason))
        );
        let ops = admit_patch(&job.metadata, "2026-11-29T07:00:00Z");
        let ops = ops.as_json().as_array().unwrap();
        assert_eq!(ops[1], json!({"op": "add", "path": "/spec/suspend", "value": false}));
        assert_eq!(ops.len(), 6, "admitted-at set, the place taken off: {ops:?}");
    }
}
