//! A Ray pod as KubeRay v1.7 builds it from a RayCluster
//! (`ray-operator/controllers/ray/common/pod.go`: `DefaultHeadPodTemplate`,
//! `DefaultWorkerPodTemplate`, `BuildPod`), as the kubelet reports it once
//! running, and as the API server stores it. The simulated operator creates
//! its pods with [`build`]; the scale benchmark also uses [`running`] and
//! [`stored`], so its objects carry every byte a real cluster's do: the
//! generated `ray start` command, KubeRay's environment, probes and
//! `/dev/shm`, the autoscaler sidecar, the workers' `wait-gcs-ready` init
//! container, the API server's defaults and `managedFields`.

use serde_json::{Map, Value, json};

use std::sync::Arc;

use super::{kuberay_status, nodes, store::meta_str};

/// Port of the head's GCS, as KubeRay defaults it.
const HEAD_PORT: &str = "6379";
/// Ray's metrics port, added to the Ray container when missing.
const METRICS_PORT: u16 = 8080;
/// The dashboard agent's port, which the probes ask.
const AGENT_PORT: u16 = 52365;

/// The pod KubeRay creates for `rc`'s head (`group` `None`) or for a
/// replica of worker group `group`, named `name`: labels, owner reference,
/// and the template's spec with KubeRay's additions.
pub fn build(rc: &Value, group: Option<&Value>, name: &str) -> Value {
    let (ns, cluster) = (meta_str(rc, "namespace"), meta_str(rc, "name"));
    let spec_of = |g: &Value| (g["template"].clone(), g["rayStartParams"].clone());
    let (node_type, group_name, (template, params)) = match group {
        None => ("head", "headgroup", spec_of(&rc["spec"]["headGroupSpec"])),
        Some(g) => ("worker", g["groupName"].as_str().unwrap_or(""), spec_of(g)),
    };
    let mut labels = template["metadata"]["labels"].as_object().cloned().unwrap_or_default();
    for (k, v) in [
        ("ray.io/cluster", cluster),
        ("ray.io/node-type", node_type),
        ("ray.io/group", group_name),
        ("ray.io/is-ray-node", "yes"),
        ("app.kubernetes.io/created-by", "kuberay-operator"),
        ("app.kubernetes.io/name", "kuberay"),
    ] {
        labels.insert(k.into(), json!(v));
    }
    let annotations = template["metadata"]["annotations"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    let mut spec = template["spec"].clone();
    if !spec["containers"].is_array() || spec["containers"].as_array().is_some_and(Vec::is_empty) {
        spec["containers"] = json!([{"name": "ray", "image": "rayproject/ray"}]);
    }
    spec["restartPolicy"] = json!("Always");
    let fqdn = format!("{cluster}-head-svc.{ns}.svc.cluster.local");
    let autoscaling = rc["spec"]["enableInTreeAutoscaling"] == true;
    let mut params: Map<String, Value> = params.as_object().cloned().unwrap_or_default();
    if group.is_none() {
        params.entry("dashboard-host").or_insert_with(|| json!("0.0.0.0"));
        if autoscaling {
            params.insert("no-monitor".into(), json!("true"));
            spec["serviceAccountName"] = json!(cluster);
        }
    } else {
        params
            .entry("address")
            .or_insert_with(|| json!(format!("{fqdn}:{HEAD_PORT}")));
    }
    params
        .entry("metrics-export-port")
        .or_insert_with(|| json!(METRICS_PORT.to_string()));
    params.insert("block".into(), json!("true"));
    params
        .entry("dashboard-agent-listen-port")
        .or_insert_with(|| json!(AGENT_PORT.to_string()));
    let ray = &mut spec["containers"][0];
    let start = ray_start(group.is_none(), &mut params, &ray["resources"]);
    ray["command"] = json!(["/bin/bash", "-lc", "--"]);
    ray["args"] = json!([format!("ulimit -n ${{RAY_START_ULIMIT_OPEN_FILES:-65536}}; {start}")]);
    let mut ports = ray["ports"].as_array().cloned().unwrap_or_default();
    if !ports.iter().any(|p| p["name"] == "metrics") {
        ports.push(json!({"name": "metrics", "containerPort": METRICS_PORT}));
    }
    ray["ports"] = json!(ports);
    ray["env"] = json!(ray_env(ray, group.is_none(), &fqdn, &start));
    let memory = ray["resources"]["requests"]["memory"].clone();
    let memory = if memory.is_null() {
        ray["resources"]["limits"]["memory"].clone()
    } else {
        memory
    };
    let mut mounts = ray["volumeMounts"].as_array().cloned().unwrap_or_default();
    mounts.push(json!({"name": "shared-mem", "mountPath": "/dev/shm"}));
    ray["volumeMounts"] = json!(mounts);
    probes(ray, group.is_none());
    let mut volumes = spec["volumes"].as_array().cloned().unwrap_or_default();
    let mut shm = json!({"medium": "Memory"});
    if !memory.is_null() {
        shm["sizeLimit"] = memory;
    }
    volumes.push(json!({"name": "shared-mem", "emptyDir": shm}));
    if group.is_none() && autoscaling {
        volumes.push(json!({"name": "ray-logs", "emptyDir": {}}));
        let logs = json!({"name": "ray-logs", "mountPath": "/tmp/ray"});
        if let Some(m) = spec["containers"][0]["volumeMounts"].as_array_mut() {
            m.push(logs.clone());
        }
        let image = spec["containers"][0]["image"].clone();
        let mut sidecar = autoscaler(&image);
        sidecar["volumeMounts"] = json!([logs]);
        if let Some(c) = spec["containers"].as_array_mut() {
            c.push(sidecar);
        }
    }
    spec["volumes"] = json!(volumes);
    if group.is_some() {
        let init = wait_gcs_ready(&spec["containers"][0], &fqdn);
        let mut inits = spec["initContainers"].as_array().cloned().unwrap_or_default();
        inits.push(init);
        spec["initContainers"] = json!(inits);
    }
    json!({
        "metadata": {"name": name, "namespace": ns, "labels": labels, "annotations": annotations,
                     "ownerReferences": [{
                        "apiVersion": "ray.io/v1", "kind": "RayCluster", "name": cluster,
                        "uid": meta_str(rc, "uid"), "controller": true, "blockOwnerDeletion": true}]},
        "spec": spec,
        "status": {"phase": "Pending", "qosClass": "Guaranteed"},
    })
}

/// `rc` with the status KubeRay writes for it once it has `pods`.
pub fn with_status(rc: &mut Value, pods: &[Value]) {
    let pods: Vec<Arc<Value>> = pods.iter().cloned().map(Arc::new).collect();
    kuberay_status::apply(rc, &pods, None);
}

/// `ray start [--head] --k=v …`, with `num-cpus`, `memory` and `num-gpus`
/// from the container's limits when `rayStartParams` does not say.
fn ray_start(head: bool, params: &mut Map<String, Value>, resources: &Value) -> String {
    let limit = |k: &str| {
        let l = &resources["limits"][k];
        if l.is_null() {
            resources["requests"][k].clone()
        } else {
            l.clone()
        }
    };
    let text = |v: &Value| match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    if !params.contains_key("num-cpus") && !limit("cpu").is_null() {
        params.insert("num-cpus".into(), json!(text(&limit("cpu"))));
    }
    let memory = nodes::amount(&limit("memory")) / 1_000_000_000;
    if !params.contains_key("memory") && memory > 0 {
        params.insert("memory".into(), json!(memory.to_string()));
    }
    if !params.contains_key("num-gpus") && !limit("nvidia.com/gpu").is_null() {
        params.insert("num-gpus".into(), json!(text(&limit("nvidia.com/gpu"))));
    }
    let mut cmd = String::from(if head { "ray start --head " } else { "ray start " });
    for (k, v) in params.iter() {
        let v = text(v);
        if v == "true" {
            cmd.push_str(&format!(" --{k} "));
        } else {
            cmd.push_str(&format!(" --{k}={v} "));
        }
    }
    cmd
}

/// The Ray container's environment after `setContainerEnvVars`.
fn ray_env(ray: &Value, head: bool, fqdn: &str, start: &str) -> Vec<Value> {
    let mut env = ray["env"].as_array().cloned().unwrap_or_default();
    let field = |path: &str| json!({"fieldRef": {"apiVersion": "v1", "fieldPath": path}});
    let ip = if head { "127.0.0.1" } else { fqdn };
    if !head {
        env.push(json!({"name": "FQ_RAY_IP", "value": fqdn}));
        env.push(json!({"name": "RAY_IP", "value": fqdn.split('.').next().unwrap_or(fqdn)}));
    }
    env.extend([
        json!({"name": "RAY_CLUSTER_NAME", "valueFrom": field("metadata.labels['ray.io/cluster']")}),
        json!({"name": "RAY_CLUSTER_NAMESPACE", "valueFrom": field("metadata.namespace")}),
        json!({"name": "RAY_CLOUD_INSTANCE_ID", "valueFrom": field("metadata.name")}),
        json!({"name": "RAY_NODE_TYPE_NAME", "valueFrom": field("metadata.labels['ray.io/group']")}),
        json!({"name": "KUBERAY_GEN_RAY_START_CMD", "value": start}),
        json!({"name": "RAY_PORT", "value": HEAD_PORT}),
        json!({"name": "RAY_ADDRESS", "value": format!("{ip}:{HEAD_PORT}")}),
        json!({"name": "RAY_USAGE_STATS_KUBERAY_IN_USE", "value": "1"}),
    ]);
    if head {
        env.push(json!({"name": "RAY_USAGE_STATS_EXTRA_TAGS",
                        "value": "kuberay_version=v1.7.0;kuberay_crd=RayCluster"}));
    }
    env.push(json!({"name": "RAY_DASHBOARD_ENABLE_K8S_DISK_USAGE", "value": "1"}));
    env
}

/// KubeRay's liveness and readiness probes (Ray ≥ 2.53: one HTTP check of
/// the dashboard agent), unless the template has its own.
fn probes(ray: &mut Value, head: bool) {
    let timeout = if head { 5 } else { 2 };
    let check = json!({"path": "/api/healthz", "port": AGENT_PORT, "scheme": "HTTP"});
    if ray["livenessProbe"].is_null() {
        ray["livenessProbe"] = json!({"httpGet": check, "initialDelaySeconds": 30, "timeoutSeconds": timeout,
                                      "periodSeconds": 5, "successThreshold": 1, "failureThreshold": 120});
    }
    if ray["readinessProbe"].is_null() {
        ray["readinessProbe"] = json!({"httpGet": check, "initialDelaySeconds": 10, "timeoutSeconds": timeout,
                                       "periodSeconds": 5, "successThreshold": 1, "failureThreshold": 10});
    }
}

/// The head's autoscaler sidecar (`BuildAutoscalerContainer`).
fn autoscaler(image: &Value) -> Value {
    let start =
        "ray kuberay-autoscaler --cluster-name $(RAY_CLUSTER_NAME) --cluster-namespace $(RAY_CLUSTER_NAMESPACE)";
    let field = |path: &str| json!({"fieldRef": {"apiVersion": "v1", "fieldPath": path}});
    json!({
        "name": "autoscaler", "image": image, "imagePullPolicy": "IfNotPresent",
        "command": ["/bin/bash", "-lc", "--"], "args": [start],
        "env": [
            {"name": "RAY_CLUSTER_NAME", "valueFrom": field("metadata.labels['ray.io/cluster']")},
            {"name": "RAY_CLUSTER_NAMESPACE", "valueFrom": field("metadata.namespace")},
            {"name": "RAY_HEAD_POD_NAME", "valueFrom": field("metadata.name")},
            {"name": "KUBERAY_CRD_VER", "value": "v1"},
            {"name": "KUBERAY_GEN_AUTOSCALER_START_CMD", "value": start},
        ],
        "resources": {"limits": {"cpu": "500m", "memory": "512Mi"}, "requests": {"cpu": "500m", "memory": "512Mi"}},
    })
}

/// The worker's `wait-gcs-ready` init container.
fn wait_gcs_ready(ray: &Value, fqdn: &str) -> Value {
    let script = format!(
        "\n\t\t\t\t\tSECONDS=0\n\t\t\t\t\twhile true; do\n\t\t\t\t\t\tif (( SECONDS <= 120 )); then\n\t\t\t\t\t\t\tif ray health-check --address {fqdn}:{HEAD_PORT} > /dev/null 2>&1; then\n\t\t\t\t\t\t\t\techo \"GCS is ready.\"\n\t\t\t\t\t\t\t\tbreak\n\t\t\t\t\t\t\tfi\n\t\t\t\t\t\t\techo \"$SECONDS seconds elapsed: Waiting for GCS to be ready.\"\n\t\t\t\t\t\telse\n\t\t\t\t\t\t\tif ray health-check --address {fqdn}:{HEAD_PORT}; then\n\t\t\t\t\t\t\t\techo \"GCS is ready. Any error messages above can be safely ignored.\"\n\t\t\t\t\t\t\t\tbreak\n\t\t\t\t\t\t\tfi\n\t\t\t\t\t\t\techo \"$SECONDS seconds elapsed: Still waiting for GCS to be ready. For troubleshooting, refer to the FAQ at https://docs.ray.io/en/master/cluster/kubernetes/troubleshooting.html.\"\n\t\t\t\t\t\tfi\n\t\t\t\t\t\tsleep 5\n\t\t\t\t\tdone\n\t\t\t\t"
    );
    let mut env = ray["env"].as_array().cloned().unwrap_or_default();
    env.push(json!({"name": "FQ_RAY_IP", "value": fqdn}));
    env.push(json!({"name": "RAY_IP", "value": fqdn.split('.').next().unwrap_or(fqdn)}));
    json!({
        "name": "wait-gcs-ready", "image": ray["image"], "command": ["/bin/bash", "-lc", "--"], "args": [script],
        "env": env, "volumeMounts": ray["volumeMounts"],
        "resources": {"limits": {"cpu": "200m", "memory": "256Mi"}, "requests": {"cpu": "200m", "memory": "256Mi"}},
    })
}

/// `pod` as the kubelet reports it once its containers run on `node`
/// at `ip`, since `at` (RFC 3339).
pub fn running(pod: &mut Value, node: &str, ip: &str, at: &str) {
    pod["spec"]["nodeName"] = json!(node);
    let statuses = |key: &str, state: &dyn Fn(&str) -> Value| -> Vec<Value> {
        pod["spec"][key]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| {
                let name = c["name"].as_str().unwrap_or_default();
                let image = c["image"].as_str().unwrap_or_default();
                json!({"name": name, "image": image, "imageID": format!("docker.io/{image}@sha256:{:064x}", image.len()),
                       "containerID": format!("containerd://{:064x}", name.len() * 7919 + ip.len()),
                       "ready": key == "containers", "started": key == "containers", "restartCount": 0,
                       "state": state(at)})
            })
            .collect()
    };
    let containers = statuses("containers", &|at| json!({"running": {"startedAt": at}}));
    let inits = statuses("initContainers", &|at| {
        json!({"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": at, "finishedAt": at,
                              "containerID": "containerd://0"}})
    });
    let condition = |t: &str| json!({"type": t, "status": "True", "lastProbeTime": null, "lastTransitionTime": at});
    let conditions = [
        "PodReadyToStartContainers",
        "Initialized",
        "Ready",
        "ContainersReady",
        "PodScheduled",
    ]
    .map(condition);
    let mut status = json!({
        "phase": "Running", "hostIP": "10.0.0.1", "hostIPs": [{"ip": "10.0.0.1"}],
        "podIP": ip, "podIPs": [{"ip": ip}], "qosClass": "Guaranteed", "startTime": at,
        "conditions": conditions,
        "containerStatuses": containers,
    });
    if !inits.is_empty() {
        status["initContainerStatuses"] = json!(inits);
    }
    pod["status"] = status;
}

/// `pod` with what the API server adds when it stores one: its defaults
/// (DNS, scheduler, tolerations, the ServiceAccount token volume, each
/// container's termination message) and `managedFields` for the
/// operator's create and the kubelet's status.
pub fn stored(pod: &mut Value, at: &str) {
    let spec = &mut pod["spec"];
    for (k, v) in [
        ("dnsPolicy", json!("ClusterFirst")),
        ("enableServiceLinks", json!(true)),
        ("preemptionPolicy", json!("PreemptLowerPriority")),
        ("priority", json!(0)),
        ("schedulerName", json!("default-scheduler")),
        ("securityContext", json!({})),
        (
            "serviceAccount",
            spec["serviceAccountName"]
                .as_str()
                .map_or(json!("default"), |s| json!(s)),
        ),
        ("terminationGracePeriodSeconds", json!(30)),
        (
            "tolerations",
            json!([
                {"effect": "NoExecute", "key": "node.kubernetes.io/not-ready", "operator": "Exists", "tolerationSeconds": 300},
                {"effect": "NoExecute", "key": "node.kubernetes.io/unreachable", "operator": "Exists", "tolerationSeconds": 300},
            ]),
        ),
    ] {
        if spec[k].is_null() {
            spec[k] = v;
        }
    }
    if spec["serviceAccountName"].is_null() {
        spec["serviceAccountName"] = json!("default");
    }
    let token = "kube-api-access-x7q2p";
    let mut volumes = spec["volumes"].as_array().cloned().unwrap_or_default();
    volumes.push(json!({"name": token, "projected": {"defaultMode": 420, "sources": [
        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
    ]}}));
    spec["volumes"] = json!(volumes);
    for key in ["initContainers", "containers"] {
        for c in spec[key].as_array_mut().into_iter().flatten() {
            c["terminationMessagePath"] = json!("/dev/termination-log");
            c["terminationMessagePolicy"] = json!("File");
            if c["imagePullPolicy"].is_null() {
                c["imagePullPolicy"] = json!("IfNotPresent");
            }
            let mut mounts = c["volumeMounts"].as_array().cloned().unwrap_or_default();
            mounts.push(json!({"name": token, "readOnly": true,
                               "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}));
            c["volumeMounts"] = json!(mounts);
        }
    }
    let entry = |manager: &str, subresource: Option<&str>, fields: Value| {
        let mut e = json!({"manager": manager, "operation": "Update", "apiVersion": "v1", "time": at,
                           "fieldsType": "FieldsV1", "fieldsV1": fields});
        if let Some(s) = subresource {
            e["subresource"] = json!(s);
        }
        e
    };
    let operator = json!({
        "f:metadata": {"f:labels": fields_of(&pod["metadata"]["labels"]),
                       "f:ownerReferences": fields_of(&pod["metadata"]["ownerReferences"])},
        "f:spec": fields_of(&pod["spec"]),
    });
    let kubelet = json!({"f:status": fields_of(&pod["status"])});
    pod["metadata"]["managedFields"] = json!([
        entry("kuberay-operator", None, operator),
        entry("kubelet", Some("status"), kubelet),
    ]);
}

/// A `fieldsV1` tree of `v`: `f:<key>` for map keys, `k:{"name":…}` (or
/// `type`, `uid`) for list items keyed so, `.` for the item itself.
fn fields_of(v: &Value) -> Value {
    match v {
        Value::Object(map) => Value::Object(map.iter().map(|(k, v)| (format!("f:{k}"), fields_of(v))).collect()),
        Value::Array(items) => {
            let mut tree = Map::new();
            for (i, item) in items.iter().enumerate() {
                let named = ["name", "type", "uid"]
                    .into_iter()
                    .find_map(|k| item.get(k).map(|v| (k, v)));
                let key = match named {
                    Some((k, v)) => format!("k:{{\"{k}\":{v}}}"),
                    None => format!("i:{i}"),
                };
                let mut child = fields_of(item);
                if let Value::Object(m) = &mut child {
                    m.insert(".".into(), json!({}));
                }
                tree.insert(key, child);
            }
            Value::Object(tree)
        }
        _ => json!({}),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster() -> Value {
        json!({"metadata": {"name": "c", "namespace": "ns", "uid": "u-1"},
               "spec": {"enableInTreeAutoscaling": true,
                        "headGroupSpec": {"rayStartParams": {"num-cpus": "0"}, "template": {"spec": {"containers": [
                            {"name": "ray-head", "image": "rayproject/ray:2.43.0",
                             "resources": {"limits": {"cpu": "1", "memory": "4Gi"}, "requests": {"cpu": "1", "memory": "4Gi"}}}]}}},
                        "workerGroupSpecs": [{"groupName": "gpu", "rayStartParams": {}, "template": {"spec": {"containers": [
                            {"name": "ray-worker", "image": "rayproject/ray:2.43.0-gpu",
                             "resources": {"limits": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": 2},
                                           "requests": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": 2}}}]}}}]}})
    }

    #[test]
    fn the_head_gets_kuberays_command_environment_probes_and_autoscaler() {
        let pod = build(&cluster(), None, "c-head-abc");
        let ray = &pod["spec"]["containers"][0];
        let args = ray["args"][0].as_str().unwrap_or_default();
        assert!(
            args.starts_with("ulimit -n ${RAY_START_ULIMIT_OPEN_FILES:-65536}; ray start --head "),
            "{args}"
        );
        assert!(args.contains(" --num-cpus=0 ") && args.contains(" --no-monitor ") && args.contains(" --block "));
        assert!(args.contains(&format!(" --memory={} ", 4u64 << 30)), "{args}");
        assert_eq!(ray["livenessProbe"]["httpGet"]["port"], AGENT_PORT);
        assert!(ray["env"].as_array().is_some_and(|e| {
            e.iter()
                .any(|v| v["name"] == "RAY_ADDRESS" && v["value"] == "127.0.0.1:6379")
        }));
        assert_eq!(pod["spec"]["containers"][1]["name"], "autoscaler");
        assert_eq!(pod["spec"]["volumes"][0]["emptyDir"]["sizeLimit"], "4Gi");
        assert_eq!(pod["metadata"]["ownerReferences"][0]["uid"], "u-1");
    }

    #[test]
    fn a_worker_waits_for_the_gcs_and_points_at_the_head_service() {
        let rc = cluster();
        let pod = build(&rc, Some(&rc["spec"]["workerGroupSpecs"][0]), "c-gpu-worker-x");
        let args = pod["spec"]["containers"][0]["args"][0].as_str().unwrap_or_default();
        assert!(
            args.contains(" --address=c-head-svc.ns.svc.cluster.local:6379 "),
            "{args}"
        );
        assert!(args.contains(" --num-gpus=2 "), "{args}");
        assert_eq!(pod["spec"]["initContainers"][0]["name"], "wait-gcs-ready");
        assert_eq!(pod["spec"]["containers"].as_array().map(Vec::len), Some(1));
    }

    #[test]
    fn stored_and_running_pods_are_as_large_as_real_ones() {
        let rc = cluster();
        for (group, at_least) in [(None, 8_000), (Some(&rc["spec"]["workerGroupSpecs"][0]), 6_500)] {
            let mut pod = build(&rc, group, "c-x");
            running(&mut pod, "node-1", "10.1.2.3", "2026-11-28T00:00:00Z");
            stored(&mut pod, "2026-11-28T00:00:00Z");
            let bytes = serde_json::to_vec(&pod).map(|b| b.len()).unwrap_or(0);
            assert!(bytes >= at_least, "{bytes} bytes");
            assert_eq!(pod["status"]["phase"], "Running");
        }
    }
}
