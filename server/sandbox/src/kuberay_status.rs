//! A RayCluster's `status`, as KubeRay 1.7 fills it.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::store::{meta_str, now};

fn is_ready(pod: &Value) -> bool {
    pod["status"]["conditions"]
        .as_array()
        .is_some_and(|cs| cs.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"))
}

fn is_head(pod: &Value) -> bool {
    pod["metadata"]["labels"]["ray.io/node-type"] == "head"
}

/// Sets `rc.status` from its pods and head service. Leaves it untouched
/// (so nothing is written) when nothing but the time would change.
pub(super) fn apply(rc: &mut Value, pods: &[Arc<Value>], service: Option<&Value>) {
    let old = rc["status"].clone();
    let spec = &rc["spec"];
    let suspended = spec["suspend"] == true;
    let groups = spec["workerGroupSpecs"].as_array().cloned().unwrap_or_default();
    let sum = |key: &str| groups.iter().map(|g| g[key].as_i64().unwrap_or(0).max(0)).sum::<i64>();
    let desired = if suspended { 0 } else { sum("replicas") };
    let head = pods.iter().find(|p| is_head(p));
    let head_ready = head.is_some_and(|p| is_ready(p));
    let workers: Vec<&Arc<Value>> = pods.iter().filter(|p| !is_head(p)).collect();
    let ready_workers = i64::try_from(workers.iter().filter(|p| is_ready(p)).count()).unwrap_or(i64::MAX);
    let running_workers =
        i64::try_from(workers.iter().filter(|p| p["status"]["phase"] == "Running").count()).unwrap_or(i64::MAX);
    let all_ready = !suspended && head_ready && ready_workers >= desired;

    let mut head_status = Map::new();
    if let Some(h) = head {
        head_status.insert("podName".into(), json!(meta_str(h, "name")));
        if let Some(ip) = h["status"]["podIP"].as_str() {
            head_status.insert("podIP".into(), json!(ip));
        }
    }
    if let Some(s) = service {
        head_status.insert("serviceName".into(), json!(meta_str(s, "name")));
        head_status.insert("serviceIP".into(), s["spec"]["clusterIP"].clone());
    }
    let mut endpoints = Map::new();
    for p in spec["headGroupSpec"]["template"]["spec"]["containers"][0]["ports"]
        .as_array()
        .into_iter()
        .flatten()
    {
        if let Some(name) = p["name"].as_str() {
            endpoints.insert(name.into(), json!(p["containerPort"].to_string()));
        }
    }
    let was_provisioned = condition_true(&old, "RayClusterProvisioned");
    let mut conditions = vec![
        condition(
            &old,
            "HeadPodReady",
            head_ready,
            if head_ready {
                "HeadPodRunningAndReady"
            } else if head.is_some() {
                "HeadPodNotReady"
            } else {
                "HeadPodNotFound"
            },
        ),
        condition(
            &old,
            "RayClusterProvisioned",
            all_ready || was_provisioned,
            if all_ready || was_provisioned {
                "AllPodRunningAndReadyFirstTime"
            } else {
                "RayClusterPodsProvisioning"
            },
        ),
    ];
    if suspended {
        conditions.push(condition(&old, "RayClusterSuspended", true, "RayClusterSuspended"));
    }
    let mut status = json!({
        "desiredWorkerReplicas": desired,
        "minWorkerReplicas": sum("minReplicas"),
        "maxWorkerReplicas": sum("maxReplicas"),
        "readyWorkerReplicas": ready_workers,
        "availableWorkerReplicas": running_workers,
        "head": head_status,
        "endpoints": endpoints,
        "conditions": conditions,
        "observedGeneration": rc["metadata"]["generation"],
    });
    if suspended {
        status["state"] = json!("suspended");
    } else if all_ready {
        status["state"] = json!("ready");
    }
    let mut old_without_time = old;
    if let Some(o) = old_without_time.as_object_mut() {
        o.remove("lastUpdateTime");
    }
    if status != old_without_time {
        status["lastUpdateTime"] = json!(now());
        rc["status"] = status;
    }
}

fn condition_true(status: &Value, kind: &str) -> bool {
    status["conditions"]
        .as_array()
        .is_some_and(|cs| cs.iter().any(|c| c["type"] == kind && c["status"] == "True"))
}

/// A condition, keeping the old transition time when its status holds.
fn condition(old: &Value, kind: &str, holds: bool, reason: &str) -> Value {
    let status = if holds { "True" } else { "False" };
    let previous = old["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == kind && c["status"] == status));
    let since = previous.map_or_else(|| json!(now()), |c| c["lastTransitionTime"].clone());
    json!({"type": kind, "status": status, "reason": reason, "message": "", "lastTransitionTime": since})
}
