//! Krayne 0.3.8's pod-aware status rules, plus KubeRay 1.x's conditions and
//! `suspend`.
//!
//! In order: `suspend` (suspending until KubeRay says `suspended` or the
//! pods are gone: whatever the pods were doing no longer matters); a
//! problem of the head pod (or, without a labelled head, of any pod); then
//! KubeRay's `status.state`;
//! then a true `Ready` condition, or `HeadPodReady` and
//! `RayClusterProvisioned` both true; then the pods' phases.

use super::{LABEL_NODE_TYPE, ObservedCluster, ObservedPod};
use crate::domain::{Atom, ClusterStatus};

/// The cluster's status. `pods` is `None` when they were not looked at.
pub fn derive_status(cluster: &ObservedCluster, pods: Option<&[&ObservedPod]>) -> ClusterStatus {
    if cluster.queued_since().is_some() {
        let state = cluster.metadata.annotations.get(super::ANNOTATION_QUEUE_STATE);
        return match state.map(Atom::as_str) {
            Some("preempted") => ClusterStatus::Preempted,
            Some("evicted") => ClusterStatus::Evicted,
            _ => ClusterStatus::Queued,
        };
    }
    if cluster.spec.suspend == Some(true) {
        let state = cluster.status.state.as_deref().unwrap_or("");
        let pods_left = pods.map_or(!state.is_empty(), |p| !p.is_empty());
        return if state.eq_ignore_ascii_case("suspended") || !pods_left {
            ClusterStatus::Suspended
        } else {
            ClusterStatus::Suspending
        };
    }
    let from_pods = pods.map(status_from_pods);
    if let Some(status) = from_pods.as_ref().filter(|s| overrides_state(s)) {
        return status.clone();
    }
    // Just resumed, KubeRay may still say `suspended`: it is not.
    if let Some(state) = cluster
        .status
        .state
        .as_deref()
        .filter(|s| !s.is_empty() && !s.eq_ignore_ascii_case("suspended"))
    {
        return ClusterStatus::parse(&state.to_lowercase());
    }
    let conditions = &cluster.status.conditions;
    let holds = |t: &str| conditions.iter().any(|c| c.is_true(t));
    if holds("Ready") || (holds("HeadPodReady") && holds("RayClusterProvisioned")) {
        return ClusterStatus::Ready;
    }
    from_pods.unwrap_or(ClusterStatus::Unknown)
}

/// Pod findings that beat an optimistic `status.state`.
fn overrides_state(s: &ClusterStatus) -> bool {
    matches!(
        s,
        ClusterStatus::ContainersCreating
            | ClusterStatus::ImagePullError
            | ClusterStatus::CrashLoop
            | ClusterStatus::Unschedulable
            | ClusterStatus::PodsPending
            | ClusterStatus::PodsFailed
    )
}

/// Worker pods are ignored when a head exists: a worker waiting for
/// capacity while the autoscaler works is normal.
fn status_from_pods(pods: &[&ObservedPod]) -> ClusterStatus {
    if pods.is_empty() {
        return ClusterStatus::Creating;
    }
    let heads: Vec<&ObservedPod> = pods
        .iter()
        .copied()
        .filter(|p| p.metadata.labels.get(LABEL_NODE_TYPE).map(Atom::as_str) == Some("head"))
        .collect();
    let considered: Vec<&ObservedPod> = if heads.is_empty() { pods.to_vec() } else { heads };
    considered
        .iter()
        .find_map(|p| pod_problem(p))
        .unwrap_or_else(|| phase_summary(&considered))
}

/// What is wrong with one pod, if anything Krayne recognises.
pub(super) fn pod_problem(pod: &ObservedPod) -> Option<ClusterStatus> {
    let status = &pod.status;
    let unschedulable = status.phase.as_deref() == Some("Pending")
        && status
            .conditions
            .unscheduled
            .as_ref()
            .is_some_and(|u| u.reason.as_deref() == Some("Unschedulable"));
    if unschedulable {
        return Some(ClusterStatus::Unschedulable);
    }
    status
        .container_statuses
        .iter()
        .find_map(|cs| match cs.state.waiting.as_ref()?.reason.as_deref()? {
            "ContainerCreating" => Some(ClusterStatus::ContainersCreating),
            "ImagePullBackOff" | "ErrImagePull" => Some(ClusterStatus::ImagePullError),
            "CrashLoopBackOff" => Some(ClusterStatus::CrashLoop),
            _ => None,
        })
}

fn phase_summary(pods: &[&ObservedPod]) -> ClusterStatus {
    fn phase<'p>(p: &&'p ObservedPod) -> &'p str {
        p.status.phase.as_deref().unwrap_or("")
    }
    if pods.iter().all(|p| phase(p) == "Running") {
        ClusterStatus::Running
    } else if pods.iter().any(|p| phase(p) == "Pending") {
        ClusterStatus::PodsPending
    } else if pods.iter().any(|p| phase(p) == "Failed") {
        ClusterStatus::PodsFailed
    } else {
        ClusterStatus::Unknown
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn cluster(status: Value, spec: Value) -> ObservedCluster {
        serde_json::from_value(json!({"metadata": {"name": "c"}, "spec": spec, "status": status})).unwrap()
    }

    fn pod(node_type: &str, status: Value) -> ObservedPod {
        serde_json::from_value(json!({
            "metadata": {"name": "p", "labels": {"ray.io/node-type": node_type}},
            "status": status,
        }))
        .unwrap()
    }

    fn running() -> Value {
        json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]})
    }

    #[test]
    fn suspend_and_kuberay_conditions_count() {
        let c = cluster(json!(null), json!({"suspend": true}));
        assert_eq!(derive_status(&c, Some(&[])), ClusterStatus::Suspended);
        // Just asked: KubeRay still says ready and the pods are there.
        let c = cluster(json!({"state": "ready"}), json!({"suspend": true}));
        assert_eq!(derive_status(&c, None), ClusterStatus::Suspending);
        let c = cluster(json!({"state": "suspended"}), json!({"suspend": true}));
        assert_eq!(derive_status(&c, None), ClusterStatus::Suspended);
        let c = cluster(
            json!({"conditions": [
                {"type": "HeadPodReady", "status": "True"},
                {"type": "RayClusterProvisioned", "status": "True"},
            ]}),
            json!({}),
        );
        assert_eq!(derive_status(&c, None), ClusterStatus::Ready);
        let c = cluster(
            json!({"conditions": [{"type": "HeadPodReady", "status": "True"}]}),
            json!({}),
        );
        assert_eq!(derive_status(&c, None), ClusterStatus::Unknown);
    }

    #[test]
    fn a_cluster_just_resumed_is_not_suspended_while_kuberay_catches_up() {
        let c = cluster(json!({"state": "suspended"}), json!({"suspend": false}));
        assert_eq!(derive_status(&c, Some(&[])), ClusterStatus::Creating);
        assert_eq!(derive_status(&c, None), ClusterStatus::Unknown);
    }

    #[test]
    fn state_is_lowercased_and_kept() {
        let c = cluster(json!({"state": "Failed"}), json!({}));
        assert_eq!(derive_status(&c, None), ClusterStatus::Other("failed".into()));
    }

    #[test]
    fn phases_summarise_without_a_labelled_head() {
        let c = cluster(json!(null), json!({}));
        let failed = pod("", json!({"phase": "Failed"}));
        assert_eq!(derive_status(&c, Some(&[&failed])), ClusterStatus::PodsFailed);
        let odd = pod("", json!({"phase": "Succeeded"}));
        assert_eq!(derive_status(&c, Some(&[&odd])), ClusterStatus::Unknown);
        let worker = pod(
            "worker",
            json!({"phase": "Pending", "containerStatuses": [
                {"state": {"waiting": {"reason": "ErrImagePull"}}}
            ]}),
        );
        assert_eq!(derive_status(&c, Some(&[&worker])), ClusterStatus::ImagePullError);
        // With a head, the worker's problem does not count.
        let head = pod("head", running());
        assert_eq!(derive_status(&c, Some(&[&head, &worker])), ClusterStatus::Running);
    }
}
