//! Every case of `krayne-reference/derivations/` through the read side gives
//! Krayne's status, ClusterInfo and ClusterDetails.

use krayne_core::manifest::{
    ManifestSettings, ObservedCluster, ObservedPod, cluster_details, cluster_info, derive_status,
};
use pretty_assertions::assert_eq;
use serde_json::{Map, Value};

use crate::read_json;

/// Fields krayne reports that Krayne does not.
const INFO_ADDITIONS: &[&str] = &[
    "ready_workers",
    "suspended",
    "created_by",
    "resource_version",
    "lifecycle",
    "lifecycle_warned_at",
    "idle_since",
    "suspends_at",
    "expires_at",
    "kept_until",
    "queue_position",
    "queued_since",
    "queue_reason",
    "site",
    "site_unavailable_since",
];
const GROUP_ADDITIONS: &[&str] = &["image"];

/// Asserts `ours` has every field of `krayne` with the same value, and no
/// field beyond them but `additions`.
#[track_caller]
fn assert_krayne_fields(case: &str, what: &str, ours: &Value, krayne: &Value, additions: &[&str]) {
    let (ours, krayne): (&Map<String, Value>, &Map<String, Value>) =
        (ours.as_object().unwrap(), krayne.as_object().unwrap());
    for (key, want) in krayne {
        assert_eq!(ours.get(key), Some(want), "{case}: {what}.{key}");
    }
    for key in ours.keys() {
        assert!(
            krayne.contains_key(key) || additions.contains(&key.as_str()),
            "{case}: {what}.{key} is neither Krayne's nor a known addition"
        );
    }
}

#[test]
fn every_derivation_matches_krayne() {
    let cases = read_json("krayne-reference/derivations/cases.json");
    let expected = read_json("krayne-reference/derivations/expected.json");
    let (cases, expected) = (cases.as_array().unwrap(), expected.as_array().unwrap());
    assert_eq!(cases.len(), expected.len());
    assert!(cases.len() >= 10);
    let settings = ManifestSettings::default();
    for (case, want) in cases.iter().zip(expected) {
        let name = case["name"].as_str().unwrap();
        assert_eq!(want["name"], name);
        let cluster: ObservedCluster = serde_json::from_value(case["obj"].clone()).unwrap();
        let pods: Option<Vec<ObservedPod>> = serde_json::from_value(case["pods"].clone()).unwrap();
        let pods: Option<Vec<&ObservedPod>> = pods.as_ref().map(|p| p.iter().collect());

        let status = derive_status(&cluster, pods.as_deref());
        assert_eq!(status.as_str(), want["status"], "{name}: status");

        let info = serde_json::to_value(cluster_info(&cluster, pods.as_deref())).unwrap();
        assert_krayne_fields(name, "info", &info, &want["info"], INFO_ADDITIONS);

        let details = cluster_details(&cluster, pods.as_deref().unwrap_or(&[]), &[], &settings);
        let d = serde_json::to_value(&details).unwrap();
        let w = &want["details"];
        assert_krayne_fields(name, "details.info", &d["info"], &w["info"], INFO_ADDITIONS);
        assert_eq!(d["head"], w["head"], "{name}: details.head");
        let (ours, theirs) = (
            d["worker_groups"].as_array().unwrap(),
            w["worker_groups"].as_array().unwrap(),
        );
        assert_eq!(ours.len(), theirs.len(), "{name}: worker group count");
        for (o, t) in ours.iter().zip(theirs) {
            assert_krayne_fields(name, "worker_groups[]", o, t, GROUP_ADDITIONS);
        }
        assert_eq!(d["ray_version"], w["ray_version"], "{name}: ray_version");
        assert_eq!(d["python_version"], w["python_version"], "{name}: python_version");
        assert_eq!(d["services"], want["services"], "{name}: services");
    }
}

#[test]
fn describe_reports_pods_events_and_conditions() {
    let cluster: ObservedCluster = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "c", "namespace": "ns", "resourceVersion": "42",
                     "annotations": {"krayne.dev/created-by": "alice"}},
        "spec": {"headGroupSpec": {"template": {"spec": {"containers": [{"image": "ray:2.9.1"}]}}},
                 "workerGroupSpecs": [{"groupName": "w", "replicas": 2}]},
        "status": {"readyWorkerReplicas": 1, "conditions": [
            {"type": "HeadPodReady", "status": "True", "reason": "HeadPodRunningAndReady"}]},
    }))
    .unwrap();
    let pods: Vec<ObservedPod> = serde_json::from_value(serde_json::json!([
        {"metadata": {"name": "c-w-worker-b", "labels": {"ray.io/node-type": "worker", "ray.io/group": "w"}},
         "status": {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/4 nodes"}]}},
        {"metadata": {"name": "c-head-a", "labels": {"ray.io/node-type": "head", "ray.io/group": "headgroup"}},
         "spec": {"nodeName": "node-1"},
         "status": {"phase": "Running", "podIP": "10.0.0.9",
                    "conditions": [{"type": "Ready", "status": "True"}],
                    "containerStatuses": [{"restartCount": 2, "state": {"running": {}}}]}},
    ]))
    .unwrap();
    let events: Vec<krayne_core::manifest::ObservedEvent> = serde_json::from_value(serde_json::json!([
        {"type": "Warning", "reason": "FailedScheduling", "message": "0/4 nodes", "count": 3,
         "involvedObject": {"kind": "Pod", "name": "c-w-worker-b"}, "lastTimestamp": "2025-01-01T00:00:02Z"},
        {"reason": "Created", "message": "created head", "eventTime": "2025-01-01T00:00:01Z",
         "involvedObject": {"kind": "RayCluster", "name": "c"}},
    ]))
    .unwrap();
    let (pods, events): (Vec<_>, Vec<_>) = (pods.iter().collect(), events.iter().collect());
    let d = cluster_details(&cluster, &pods, &events, &ManifestSettings::default());
    assert_eq!(d.info.status.as_str(), "running");
    assert_eq!(d.info.ready_workers, 1);
    assert_eq!(d.info.created_by.as_deref(), Some("alice"));
    assert_eq!(d.info.resource_version.as_deref(), Some("42"));
    assert_eq!(d.ray_version, "2.9.1");
    assert_eq!(d.conditions[0].type_, "HeadPodReady");
    let names: Vec<&str> = d.pods.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["c-head-a", "c-w-worker-b"], "head first");
    let head = &d.pods[0];
    assert!(head.ready && head.group.is_empty());
    assert_eq!(
        (head.restarts, head.pod_ip.as_deref(), head.node_name.as_deref()),
        (2, Some("10.0.0.9"), Some("node-1"))
    );
    let worker = &d.pods[1];
    assert_eq!(
        (worker.group.as_str(), worker.reason.as_deref()),
        ("w", Some("Unschedulable"))
    );
    assert_eq!(worker.message.as_deref(), Some("0/4 nodes"));
    let reasons: Vec<&str> = d.events.iter().map(|e| e.reason.as_str()).collect();
    assert_eq!(reasons, ["Created", "FailedScheduling"], "oldest first");
    assert_eq!((d.events[0].type_.as_str(), d.events[0].count), ("Normal", 1));
}
