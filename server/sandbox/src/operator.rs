//! A simulated KubeRay operator, with just enough scheduler and kubelet to
//! move its pods through their lives.
//!
//! For each RayCluster it keeps a head pod `<name>-head-<suffix>`, worker
//! pods `<name>-<group>-worker-<suffix>` per replica and a head Service
//! `<name>-head-svc`, all owned by the cluster, and fills the cluster's
//! status as KubeRay 1.7 does. One task handles every change in order, so the
//! simulation is deterministic for a given sequence of API calls.

use std::{collections::HashMap, sync::Arc, time::Duration};

use serde_json::{Value, json};
use sha2::Digest as _;
use tokio::sync::{broadcast::error::RecvError, mpsc, watch};

use super::{
    NodeCapacity, Resource,
    addresses::PodAddresses,
    kuberay_pod, kuberay_status,
    nodes::{first_fit, insufficient, pod_request},
    store::{Change, ChangeKind, Store, WriteOpts, meta_str, now, random_suffix},
};

/// Annotation on a RayCluster that makes its pods crash-loop.
pub const FAULT_ANNOTATION: &str = "sandbox.krayne.dev/fault";

/// How the simulated operator and kubelet behave.
#[derive(Debug, Clone)]
pub struct OperatorOptions {
    /// From pod creation to its scheduling attempt.
    pub schedule_delay: Duration,
    /// From scheduling to containers running (or failing to pull).
    pub start_delay: Duration,
    /// From `ErrImagePull` to `ImagePullBackOff`; also between crash-loop
    /// restarts.
    pub backoff_delay: Duration,
    /// Multiplies every delay (0.0 makes everything immediate).
    pub time_scale: f64,
    /// The nodes pods are scheduled on.
    pub nodes: Vec<NodeCapacity>,
    /// Images containing any of these fail to pull.
    pub bad_image_patterns: Vec<String>,
    /// Images containing any of these pull, and their container exits at
    /// once, again and again (a bad entrypoint): a crash loop anyone can
    /// cause with krayne alone.
    pub crash_image_patterns: Vec<String>,
}

impl Default for OperatorOptions {
    fn default() -> Self {
        Self {
            schedule_delay: Duration::from_millis(200),
            start_delay: Duration::from_secs(2),
            backoff_delay: Duration::from_secs(3),
            time_scale: 1.0,
            nodes: NodeCapacity::uniform(4, 16, "64Gi", 2),
            bad_image_patterns: vec!["doesnotexist".into(), ":invalid".into()],
            crash_image_patterns: vec!["crash-loop".into()],
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Step {
    Schedule,
    Start,
    BackOff,
    Crash,
    Restart,
}

#[derive(Debug)]
struct Tick {
    ns: String,
    pod: String,
    uid: String,
    step: Step,
}

struct Operator {
    store: Arc<Store>,
    opts: OperatorOptions,
    ticks: mpsc::UnboundedSender<Tick>,
    pod_ips: PodAddresses,
    service_ips: u32,
    /// Events made, so repeats bump `count`.
    events: Emitted,
}

/// Runs the operator until `stop` changes.
pub(super) async fn run(store: Arc<Store>, opts: OperatorOptions, mut stop: watch::Receiver<bool>) {
    let (ticks, mut tick_rx) = mpsc::unbounded_channel();
    let mut changes = store.subscribe();
    let mut op = Operator {
        store,
        opts,
        ticks,
        pod_ips: PodAddresses::claim(),
        service_ips: 0,
        events: HashMap::new(),
    };
    op.resync();
    loop {
        tokio::select! {
            change = changes.recv() => match change {
                Ok(c) => op.on_change(&c),
                Err(RecvError::Lagged(_)) => op.resync(),
                Err(RecvError::Closed) => return,
            },
            Some(tick) = tick_rx.recv() => op.on_tick(tick),
            _ = stop.changed() => return,
        }
    }
}

fn label<'a>(o: &'a Value, key: &str) -> &'a str {
    o["metadata"]["labels"][key].as_str().unwrap_or("")
}

fn is_head(pod: &Value) -> bool {
    label(pod, "ray.io/node-type") == "head"
}

impl Operator {
    fn later(&self, pod: &Value, step: Step, delay: Duration) {
        let tick = Tick {
            ns: meta_str(pod, "namespace").to_owned(),
            pod: meta_str(pod, "name").to_owned(),
            uid: meta_str(pod, "uid").to_owned(),
            step,
        };
        let delay = delay.mul_f64(self.opts.time_scale.max(0.0));
        let ticks = self.ticks.clone();
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            let _ = ticks.send(tick);
        });
    }

    fn resync(&mut self) {
        let (clusters, _) = self.store.list(Resource::RayCluster, None, |_| true);
        for c in clusters {
            self.reconcile(meta_str(&c, "namespace"), meta_str(&c, "name"));
        }
        self.schedule_pending();
    }

    fn on_change(&mut self, c: &Change) {
        let ns = c.namespace().to_owned();
        match (c.resource, c.kind) {
            (Resource::RayCluster, ChangeKind::Deleted) => self.schedule_pending(),
            (Resource::RayCluster, _) => self.reconcile(&ns, meta_str(&c.object, "name")),
            (Resource::Pod, kind) => {
                if kind == ChangeKind::Deleted {
                    self.schedule_pending();
                }
                let cluster = label(&c.object, "ray.io/cluster").to_owned();
                if !cluster.is_empty() {
                    self.reconcile(&ns, &cluster);
                }
            }
            _ => {}
        }
    }

    fn cluster_pods(&self, ns: &str, cluster: &str) -> Vec<Arc<Value>> {
        self.store
            .list(Resource::Pod, Some(ns), |p| label(p, "ray.io/cluster") == cluster)
            .0
    }

    fn reconcile(&mut self, ns: &str, name: &str) {
        let Ok(rc) = self.store.get(Resource::RayCluster, ns, name) else {
            return;
        };
        let pods = self.cluster_pods(ns, name);
        if rc["spec"]["suspend"] == true {
            for p in &pods {
                let _ = self.store.delete(Resource::Pod, ns, meta_str(p, "name"));
            }
        } else {
            self.ensure_service(&rc);
            if !pods.iter().any(|p| is_head(p)) {
                self.create_pod(&rc, None);
            }
            let groups = rc["spec"]["workerGroupSpecs"].as_array().cloned().unwrap_or_default();
            for g in &groups {
                let group = g["groupName"].as_str().unwrap_or("");
                let desired = usize::try_from(g["replicas"].as_i64().unwrap_or(0).max(0)).unwrap_or(0);
                let mut have: Vec<&Arc<Value>> = pods
                    .iter()
                    .filter(|p| !is_head(p) && label(p, "ray.io/group") == group)
                    .collect();
                for _ in have.len()..desired {
                    self.create_pod(&rc, Some(g));
                }
                // Scale down removes the newest workers first.
                have.sort_by(|a, b| {
                    (meta_str(b, "creationTimestamp"), meta_str(b, "name"))
                        .cmp(&(meta_str(a, "creationTimestamp"), meta_str(a, "name")))
                });
                for p in have.iter().take(have.len().saturating_sub(desired)) {
                    let _ = self.store.delete(Resource::Pod, ns, meta_str(p, "name"));
                }
            }
            let known = |g: &str| groups.iter().any(|s| s["groupName"] == g);
            for p in pods.iter().filter(|p| !is_head(p) && !known(label(p, "ray.io/group"))) {
                let _ = self.store.delete(Resource::Pod, ns, meta_str(p, "name"));
            }
        }
        let pods = self.cluster_pods(ns, name);
        let service = self.store.get(Resource::Service, ns, &format!("{name}-head-svc")).ok();
        self.store.update(Resource::RayCluster, ns, name, |rc| {
            kuberay_status::apply(rc, &pods, service.as_deref());
        });
    }

    fn owner_reference(rc: &Value) -> Value {
        json!([{
            "apiVersion": "ray.io/v1", "kind": "RayCluster", "name": meta_str(rc, "name"),
            "uid": meta_str(rc, "uid"), "controller": true, "blockOwnerDeletion": true,
        }])
    }

    fn ensure_service(&mut self, rc: &Value) {
        let (ns, cluster) = (meta_str(rc, "namespace"), meta_str(rc, "name"));
        let name = format!("{cluster}-head-svc");
        if self.store.get(Resource::Service, ns, &name).is_ok() {
            return;
        }
        let head = &rc["spec"]["headGroupSpec"];
        let mut ports: Vec<Value> = Vec::new();
        let container_ports = head["template"]["spec"]["containers"][0]["ports"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        for p in container_ports {
            ports.push(json!({"name": p["name"], "port": p["containerPort"], "targetPort": p["containerPort"], "protocol": "TCP"}));
        }
        for p in head["headService"]["spec"]["ports"]
            .as_array()
            .cloned()
            .unwrap_or_default()
        {
            if !ports.iter().any(|q| q["name"] == p["name"]) {
                ports.push(p);
            }
        }
        self.service_ips += 1;
        let ip = format!("10.96.{}.{}", self.service_ips / 250, self.service_ips % 250 + 1);
        let service = json!({
            "metadata": {"name": name, "labels": {"ray.io/cluster": cluster, "ray.io/node-type": "head"},
                         "ownerReferences": Self::owner_reference(rc)},
            "spec": {"type": "ClusterIP", "clusterIP": ip, "ports": ports,
                     "selector": {"ray.io/cluster": cluster, "ray.io/node-type": "head"}},
        });
        let _ = self.store.create(Resource::Service, ns, service, WriteOpts::default());
    }

    fn create_pod(&mut self, rc: &Value, group: Option<&Value>) {
        let (ns, cluster) = (meta_str(rc, "namespace"), meta_str(rc, "name"));
        let name = match group {
            None => format!("{cluster}-head-{}", random_suffix()),
            Some(g) => format!(
                "{cluster}-{}-worker-{}",
                g["groupName"].as_str().unwrap_or(""),
                random_suffix()
            ),
        };
        let mut pod = kuberay_pod::build(rc, group, &name);
        if let Some(fault) = rc["metadata"]["annotations"][FAULT_ANNOTATION].as_str() {
            pod["metadata"]["annotations"][FAULT_ANNOTATION] = json!(fault);
        }
        add_ray_auth_env(rc, &mut pod["spec"]);
        let opts = WriteOpts {
            dry_run: false,
            keep_status: true,
            packed: false,
        };
        if let Ok(pod) = self.store.create(Resource::Pod, ns, pod, opts) {
            self.later(&pod, Step::Schedule, self.opts.schedule_delay);
        }
    }

    fn on_tick(&mut self, t: Tick) {
        let Ok(pod) = self.store.get(Resource::Pod, &t.ns, &t.pod) else {
            return;
        };
        if meta_str(&pod, "uid") != t.uid {
            return;
        }
        match t.step {
            Step::Schedule => self.try_schedule(&pod),
            Step::Start => self.start(&pod),
            Step::BackOff => self.image_backoff(&pod),
            Step::Crash => self.crash(&pod),
            Step::Restart => self.restart(&pod),
        }
    }

    fn bound_pods(&self) -> Vec<(String, super::nodes::Request)> {
        self.store
            .list(Resource::Pod, None, |p| p["spec"]["nodeName"].is_string())
            .0
            .iter()
            .map(|p| (p["spec"]["nodeName"].as_str().unwrap_or("").to_owned(), pod_request(p)))
            .collect()
    }

    fn try_schedule(&mut self, pod: &Value) {
        if pod["spec"]["nodeName"].is_string() {
            return;
        }
        let (ns, name) = (meta_str(pod, "namespace").to_owned(), meta_str(pod, "name").to_owned());
        let bound = self.bound_pods();
        let want = pod_request(pod);
        let Some(node) = first_fit(&self.opts.nodes, &bound, want).map(|n| n.name.clone()) else {
            let message = insufficient(&self.opts.nodes, &bound, want);
            let m = message.clone();
            self.store.update(Resource::Pod, &ns, &name, |p| {
                p["status"]["conditions"] = json!([{"type": "PodScheduled", "status": "False",
                    "reason": "Unschedulable", "message": m, "lastTransitionTime": now()}]);
            });
            self.event(pod, "Warning", "FailedScheduling", &message, "default-scheduler");
            return;
        };
        let updated = self.store.update(Resource::Pod, &ns, &name, |p| {
            p["spec"]["nodeName"] = json!(node);
            p["status"]["hostIP"] = json!("192.168.0.10");
            p["status"]["conditions"] =
                json!([{"type": "PodScheduled", "status": "True", "lastTransitionTime": now()}]);
            p["status"]["containerStatuses"] =
                container_statuses(p, |_| json!({"waiting": {"reason": "ContainerCreating"}}), false);
        });
        self.event(
            pod,
            "Normal",
            "Scheduled",
            &format!("Successfully assigned {ns}/{name} to {node}"),
            "default-scheduler",
        );
        if let Some(p) = updated {
            self.later(&p, Step::Start, self.opts.start_delay);
        }
    }

    /// Retries every pod that did not fit, oldest first.
    fn schedule_pending(&mut self) {
        let (mut pending, _) = self.store.list(Resource::Pod, None, |p| {
            !p["spec"]["nodeName"].is_string() && p["status"]["conditions"][0]["reason"] == "Unschedulable"
        });
        pending.sort_by(|a, b| meta_str(a, "creationTimestamp").cmp(meta_str(b, "creationTimestamp")));
        for p in pending {
            self.try_schedule(&p);
        }
    }

    fn start(&mut self, pod: &Value) {
        let (ns, name) = (meta_str(pod, "namespace").to_owned(), meta_str(pod, "name").to_owned());
        if let Some(message) = self.missing_secret(pod) {
            // As the kubelet: the container waits for its Secret.
            let m = message.clone();
            self.store.update(Resource::Pod, &ns, &name, |p| {
                p["status"]["containerStatuses"] = container_statuses(
                    p,
                    |_| json!({"waiting": {"reason": "CreateContainerConfigError", "message": m}}),
                    false,
                );
            });
            self.event(pod, "Warning", "Failed", &format!("Error: {message}"), "kubelet");
            self.later(pod, Step::Start, self.opts.backoff_delay);
            return;
        }
        let image = pod["spec"]["containers"][0]["image"].as_str().unwrap_or("").to_owned();
        if self.opts.bad_image_patterns.iter().any(|p| image.contains(p.as_str())) {
            let message = format!("failed to pull and unpack image \"{image}\": not found");
            let m = message.clone();
            self.store.update(Resource::Pod, &ns, &name, |p| {
                p["status"]["containerStatuses"] = container_statuses(
                    p,
                    |_| json!({"waiting": {"reason": "ErrImagePull", "message": m}}),
                    false,
                );
            });
            self.event(
                pod,
                "Warning",
                "Failed",
                &format!("Failed to pull image \"{image}\": {message}"),
                "kubelet",
            );
            self.later(pod, Step::BackOff, self.opts.backoff_delay);
            return;
        }
        let crash = pod["metadata"]["annotations"][FAULT_ANNOTATION] == "crash-loop"
            || self
                .opts
                .crash_image_patterns
                .iter()
                .any(|p| image.contains(p.as_str()));
        let (pods, _) = self
            .store
            .list(Resource::Pod, None, |p| p["status"]["podIP"].is_string());
        let taken = pods
            .iter()
            .filter_map(|p| p["status"]["podIP"].as_str().map(str::to_owned))
            .collect();
        let (ip, _) = self.pod_ips.next_free(&taken);
        self.store.update(Resource::Pod, &ns, &name, |p| {
            p["status"]["phase"] = json!("Running");
            p["status"]["podIP"] = json!(ip);
            p["status"]["startTime"] = json!(now());
            set_ready(p, !crash);
            p["status"]["containerStatuses"] =
                container_statuses(p, |_| json!({"running": {"startedAt": now()}}), !crash);
        });
        self.event(pod, "Normal", "Started", "Started container", "kubelet");
        if crash {
            self.later(pod, Step::Crash, self.opts.backoff_delay);
        }
    }

    fn image_backoff(&mut self, pod: &Value) {
        let (ns, name) = (meta_str(pod, "namespace"), meta_str(pod, "name"));
        let image = pod["spec"]["containers"][0]["image"].as_str().unwrap_or("").to_owned();
        let message = format!("Back-off pulling image \"{image}\"");
        let m = message.clone();
        self.store.update(Resource::Pod, ns, name, |p| {
            p["status"]["containerStatuses"] = container_statuses(
                p,
                |_| json!({"waiting": {"reason": "ImagePullBackOff", "message": m}}),
                false,
            );
        });
        self.event(pod, "Warning", "BackOff", &message, "kubelet");
    }

    fn crash(&mut self, pod: &Value) {
        let (ns, name) = (meta_str(pod, "namespace"), meta_str(pod, "name"));
        self.store.update(Resource::Pod, ns, name, |p| {
            set_ready(p, false);
            if let Some(statuses) = p["status"]["containerStatuses"].as_array_mut() {
                for cs in statuses {
                    let restarts = cs["restartCount"].as_i64().unwrap_or(0) + 1;
                    cs["restartCount"] = json!(restarts);
                    cs["ready"] = json!(false);
                    cs["lastState"] = json!({"terminated": {"exitCode": 1, "reason": "Error", "finishedAt": now()}});
                    cs["state"] = json!({"waiting": {"reason": "CrashLoopBackOff",
                        "message": format!("back-off restarting failed container {}", cs["name"].as_str().unwrap_or(""))}});
                }
            }
        });
        self.event(
            pod,
            "Warning",
            "BackOff",
            "Back-off restarting failed container",
            "kubelet",
        );
        self.later(pod, Step::Restart, self.opts.backoff_delay);
    }

    fn restart(&mut self, pod: &Value) {
        let (ns, name) = (meta_str(pod, "namespace"), meta_str(pod, "name"));
        self.store.update(Resource::Pod, ns, name, |p| {
            if let Some(statuses) = p["status"]["containerStatuses"].as_array_mut() {
                for cs in statuses {
                    cs["state"] = json!({"running": {"startedAt": now()}});
                }
            }
        });
        self.later(pod, Step::Crash, self.opts.backoff_delay);
    }

    /// Records an event about `object`; a repeat bumps the first's count.
    fn event(&mut self, object: &Value, kind: &str, reason: &'static str, message: &str, component: &str) {
        emit_event(&self.store, &mut self.events, object, kind, reason, message, component);
    }
}

/// Events already made: (object uid, reason) → the Event's name.
pub(super) type Emitted = HashMap<(String, &'static str), String>;

/// Records an Event about `object`, as a controller does: a repeat of the
/// same reason bumps the first one's `count`.
pub(super) fn emit_event(
    store: &Store,
    emitted: &mut Emitted,
    object: &Value,
    kind: &str,
    reason: &'static str,
    message: &str,
    component: &str,
) {
    let ns = meta_str(object, "namespace").to_owned();
    let uid = meta_str(object, "uid").to_owned();
    let key = (uid.clone(), reason);
    if let Some(existing) = emitted.get(&key) {
        let bumped = store.update(Resource::Event, &ns, existing, |e| {
            e["count"] = json!(e["count"].as_i64().unwrap_or(1) + 1);
            e["lastTimestamp"] = json!(now());
            e["message"] = json!(message);
        });
        if bumped.is_some() {
            return;
        }
    }
    let name = format!("{}.{:016x}", meta_str(object, "name"), fastrand::u64(..));
    let event = json!({
        "metadata": {"name": name},
        "involvedObject": {"kind": object["kind"], "apiVersion": object["apiVersion"], "name": meta_str(object, "name"),
                           "namespace": ns, "uid": uid},
        "type": kind, "reason": reason, "message": message, "count": 1,
        "firstTimestamp": now(), "lastTimestamp": now(),
        "source": {"component": component}, "reportingComponent": component,
    });
    if store.create(Resource::Event, &ns, event, WriteOpts::default()).is_ok() {
        emitted.insert(key, name);
    }
}

/// As KubeRay does for `spec.authOptions.mode: token`: every container
/// of the cluster gets `RAY_AUTH_MODE=token` and `RAY_AUTH_TOKEN` from the
/// Secret (`secretName`, key `auth_token`).
fn add_ray_auth_env(rc: &Value, spec: &mut Value) {
    let options = &rc["spec"]["authOptions"];
    if options["mode"] != "token" {
        return;
    }
    let secret = options["secretName"]
        .as_str()
        .unwrap_or(meta_str(rc, "name"))
        .to_owned();
    let Some(containers) = spec["containers"].as_array_mut() else {
        return;
    };
    for c in containers {
        let env = c["env"].as_array().cloned().unwrap_or_default();
        let mut env: Vec<Value> = env
            .into_iter()
            .filter(|e| e["name"] != "RAY_AUTH_MODE" && e["name"] != "RAY_AUTH_TOKEN")
            .collect();
        env.push(json!({"name": "RAY_AUTH_MODE", "value": "token"}));
        env.push(json!({"name": "RAY_AUTH_TOKEN",
                        "valueFrom": {"secretKeyRef": {"name": secret, "key": "auth_token"}}}));
        c["env"] = json!(env);
    }
}

impl Operator {
    /// What keeps `pod`'s containers from starting: a Secret (or key) its
    /// environment names that is not there, as the kubelet says it.
    fn missing_secret(&self, pod: &Value) -> Option<String> {
        let ns = meta_str(pod, "namespace");
        let refs = pod["spec"]["containers"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|c| c["env"].as_array().into_iter().flatten())
            .filter_map(|e| e["valueFrom"]["secretKeyRef"].as_object());
        for r in refs {
            let (name, key) = (
                r.get("name").and_then(Value::as_str).unwrap_or(""),
                r.get("key").and_then(Value::as_str).unwrap_or(""),
            );
            match self.store.get(Resource::Secret, ns, name) {
                Err(_) => return Some(format!("secret \"{name}\" not found")),
                Ok(s) if s["data"][key].is_null() => {
                    return Some(format!("couldn't find key {key} in Secret {ns}/{name}"));
                }
                Ok(_) => {}
            }
        }
        None
    }
}

fn set_ready(p: &mut Value, ready: bool) {
    let status = if ready { "True" } else { "False" };
    p["status"]["conditions"] = json!([
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": now()},
        {"type": "Initialized", "status": "True", "lastTransitionTime": now()},
        {"type": "ContainersReady", "status": status, "lastTransitionTime": now()},
        {"type": "Ready", "status": status, "lastTransitionTime": now()},
    ]);
}

fn container_statuses(pod: &Value, state: impl Fn(&Value) -> Value, ready: bool) -> Value {
    let previous = pod["status"]["containerStatuses"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    pod["spec"]["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(i, c)| {
            let restarts = previous.get(i).and_then(|p| p["restartCount"].as_i64()).unwrap_or(0);
            let state = state(c);
            let image = c["image"].as_str().unwrap_or_default();
            json!({"name": c["name"], "image": image, "imageID": image_id(image, &state), "ready": ready,
                   "started": ready, "restartCount": restarts, "state": state})
        })
        .collect()
}

/// A container status's `imageID`, as the kubelet reports it: empty until
/// the image is pulled, then `<image>@sha256:<digest>` (here a digest of the
/// name: the sandbox pulls nothing).
fn image_id(image: &str, state: &Value) -> String {
    let waiting = state["waiting"]["reason"].as_str();
    let pulled = !matches!(waiting, Some("ContainerCreating" | "ErrImagePull" | "ImagePullBackOff"));
    if !pulled || image.is_empty() {
        return String::new();
    }
    let digest = sha2::Sha256::digest(image.as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    let repository = image.split('@').next().unwrap_or(image);
    let repository = match repository.rsplit_once(':') {
        Some((name, tag)) if !tag.contains('/') => name,
        _ => repository,
    };
    format!("{repository}@sha256:{hex}")
}
