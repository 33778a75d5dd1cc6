//! KubeRay v1.7's RayJob controller, for the submission modes a job can
//! run in without a submitter pod: `InteractiveMode` (the caller submits
//! the job to the head with the RayJob's `spec.jobId`; the controller
//! waits for it) and `HTTPMode` (the controller submits it). The
//! transitions, names, reasons and messages are KubeRay's
//! (`rayjob_controller.go` at v1.7.0):
//!
//! - `""` → `Initializing`: `status.rayClusterName` `<name>-<5 chars>`,
//!   `startTime`; the RayCluster is made from `spec.rayClusterSpec`, owned
//!   by the RayJob, with its labels and annotations and
//!   `ray.io/originated-from-*`.
//! - `Initializing` → once the cluster is `ready`, `dashboardURL` is set
//!   and the job goes to `Waiting` (interactive) or `Running` (HTTP).
//! - `Waiting` → `Running` once `spec.jobId` is set (`status.jobId`).
//! - `Running`: the head's `GET /api/jobs/{jobId}` is polled; a job not
//!   there yet keeps it `Running` (HTTP mode submits it); a terminal job
//!   makes it `Complete` (`SUCCEEDED`, `STOPPED`) or `Failed` (`FAILED`,
//!   reason `AppFailed`), with `endTime`.
//! - `activeDeadlineSeconds` (from `startTime`, while `Initializing` or
//!   `Running`) fails it with `DeadlineExceeded`;
//!   `preRunningDeadlineSeconds` (while `Initializing` or `Waiting`) with
//!   `PreRunningDeadlineExceeded`.
//! - Once ended, with `shutdownAfterJobFinishes`, the RayCluster is
//!   deleted `ttlSecondsAfterFinished` after `endTime`; the RayJob stays.
//! - A spec KubeRay refuses goes to `ValidationFailed` with a Warning
//!   Event, and stays there.
//! - `spec.suspend` (krayne's line, Kueue): `Initializing` or `Running` →
//!   `Suspending` (the cluster deleted) → `Suspended` (cluster name, job
//!   id and Ray status reset); a RayJob created suspended goes this way
//!   before any cluster is made. Resumed, `Suspended` → `New`, and on as
//!   a new RayJob, its cluster under a new name and `startTime` (so
//!   `activeDeadlineSeconds` counts from the admission).
//!
//! Deleting a RayJob deletes its cluster with it (ownership); the job's
//! processes end with its head pod, which is what KubeRay's finalizer
//! (stopping the job first) comes to in the sandbox. `K8sJobMode` and
//! `SidecarMode` need a submitter the sandbox does not run: such RayJobs
//! fail validation, saying so.

use std::{sync::Arc, time::Duration};

use http_body_util::{BodyExt as _, Full};
use hyper::body::Bytes;
use serde_json::{Value, json};
use tokio::sync::{broadcast::error::RecvError, watch};

use super::{
    Resource,
    operator::{Emitted, emit_event},
    standins::{Standins, ray_token},
    store::{Change, ChangeKind, Store, WriteOpts, meta_str, now, random_suffix},
};

/// KubeRay's limit: the cluster's name adds `-` and five characters.
const MAX_RAYJOB_NAME_LEN: usize = 47;
/// The component KubeRay's Events name.
const COMPONENT: &str = "rayjob-controller";
/// How long a call to a head's dashboard may take.
const DASHBOARD_TIMEOUT: Duration = Duration::from_secs(2);

/// Runs the controller until `stop` changes: every RayJob change, and
/// every `poll` (KubeRay requeues every 3 s) for the jobs that wait on
/// something.
pub(super) async fn run(store: Arc<Store>, standins: Arc<Standins>, poll: Duration, mut stop: watch::Receiver<bool>) {
    let mut changes = store.subscribe();
    let mut ticks = tokio::time::interval(poll.max(Duration::from_millis(20)));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut c = Controller {
        store,
        standins,
        emitted: Emitted::new(),
    };
    loop {
        tokio::select! {
            change = changes.recv() => match change {
                Ok(change) => {
                    if let Some((ns, name)) = owning_rayjob(&change) {
                        c.reconcile(&ns, &name).await;
                    }
                }
                Err(RecvError::Lagged(_)) => c.reconcile_all().await,
                Err(RecvError::Closed) => return,
            },
            _ = ticks.tick() => c.reconcile_all().await,
            _ = stop.changed() => return,
        }
    }
}

/// The RayJob a change concerns: a RayJob's own, or its cluster's.
fn owning_rayjob(change: &Change) -> Option<(String, String)> {
    let ns = change.namespace().to_owned();
    match (change.resource, change.kind) {
        (Resource::RayJob, ChangeKind::Deleted) => None,
        (Resource::RayJob, _) => Some((ns, meta_str(&change.object, "name").to_owned())),
        (Resource::RayCluster, _) => {
            let labels = &change.object["metadata"]["labels"];
            (labels[ORIGIN_CRD] == "RayJob")
                .then(|| labels[ORIGIN_NAME].as_str().map(|n| (ns, n.to_owned())))
                .flatten()
        }
        _ => None,
    }
}

const ORIGIN_CRD: &str = "ray.io/originated-from-crd";
const ORIGIN_NAME: &str = "ray.io/originated-from-cr-name";

struct Controller {
    store: Arc<Store>,
    standins: Arc<Standins>,
    emitted: Emitted,
}

/// What a reconcile decides for the status.
enum Next {
    /// Leave the status as it is.
    Stay,
    /// Write this status.
    Write(Value),
}

impl Controller {
    async fn reconcile_all(&mut self) {
        let (jobs, _) = self.store.list(Resource::RayJob, None, |_| true);
        for job in jobs {
            self.reconcile(meta_str(&job, "namespace"), meta_str(&job, "name"))
                .await;
        }
    }

    async fn reconcile(&mut self, ns: &str, name: &str) {
        let Ok(job) = self.store.get(Resource::RayJob, ns, name) else {
            return;
        };
        if job["spec"]["managedBy"]
            .as_str()
            .is_some_and(|m| m != "ray.io/kuberay-operator")
        {
            return;
        }
        let old = job["status"].clone();
        let next = match validate(&job) {
            Err(why) => self.invalid(&job, &why),
            Ok(()) => self.step(&job).await,
        };
        if let Next::Write(mut status) = next
            && status != old
        {
            let ended = is_terminal(&status) && !is_terminal(&old);
            if ended {
                status["endTime"] = json!(now());
                let counter = if status["jobDeploymentStatus"] == "Failed" {
                    "failed"
                } else {
                    "succeeded"
                };
                if counter == "failed" || status["jobStatus"] == "SUCCEEDED" {
                    status[counter] = json!(status[counter].as_i64().unwrap_or(0) + 1);
                }
            }
            self.store.update(Resource::RayJob, ns, name, |o| o["status"] = status);
        }
    }

    fn invalid(&mut self, job: &Value, why: &str) -> Next {
        let note = format!("{}/{}: {why}", meta_str(job, "namespace"), meta_str(job, "name"));
        emit_event(
            &self.store,
            &mut self.emitted,
            job,
            "Warning",
            "InvalidRayJobSpec",
            &note,
            COMPONENT,
        );
        let mut status = job["status"].clone();
        if status["jobDeploymentStatus"] == "ValidationFailed" {
            return Next::Stay;
        }
        status["jobDeploymentStatus"] = json!("ValidationFailed");
        status["reason"] = json!("ValidationFailed");
        status["message"] = json!(why);
        Next::Write(status)
    }

    async fn step(&mut self, job: &Value) -> Next {
        let mut status = if job["status"].is_object() {
            job["status"].clone()
        } else {
            json!({})
        };
        let spec = &job["spec"];
        let interactive = spec["submissionMode"] == "InteractiveMode";
        match status["jobDeploymentStatus"].as_str().unwrap_or("") {
            "" | "New" => {
                let name = meta_str(job, "name");
                if !interactive && status["jobId"].as_str().is_none_or(str::is_empty) {
                    let id = spec["jobId"]
                        .as_str()
                        .map_or_else(|| format!("{name}-{}", random_suffix()), str::to_owned);
                    status["jobId"] = json!(id);
                }
                status["rayClusterName"] = json!(format!("{name}-{}", random_suffix()));
                status["jobStatus"] = json!("");
                status["jobDeploymentStatus"] = json!("Initializing");
                status["startTime"] = json!(now());
                status["failed"] = json!(status["failed"].as_i64().unwrap_or(0));
                status["succeeded"] = json!(status["succeeded"].as_i64().unwrap_or(0));
                Next::Write(status)
            }
            "Initializing" | "Running" if spec["suspend"] == true => {
                status["jobDeploymentStatus"] = json!("Suspending");
                Next::Write(status)
            }
            "Suspending" => self.suspend(job, status),
            "Suspended" if spec["suspend"] != true => {
                status["jobStatus"] = json!("");
                status["jobDeploymentStatus"] = json!("New");
                Next::Write(status)
            }
            "Initializing" => {
                if let Some(failed) = past_deadlines(spec, &status, true, true) {
                    return Next::Write(failed);
                }
                let Some(cluster) = self.cluster(job, &status) else {
                    return Next::Stay;
                };
                if cluster["status"]["state"] != "ready" {
                    status["rayClusterStatus"] = cluster["status"].clone();
                    return Next::Write(status);
                }
                status["dashboardURL"] = json!(self.dashboard_url(&cluster));
                status["rayClusterStatus"] = cluster["status"].clone();
                status["jobDeploymentStatus"] = json!(if interactive { "Waiting" } else { "Running" });
                Next::Write(status)
            }
            "Waiting" => {
                if let Some(failed) = past_deadlines(spec, &status, false, true) {
                    return Next::Write(failed);
                }
                match spec["jobId"].as_str().filter(|id| !id.is_empty()) {
                    Some(id) => {
                        status["jobId"] = json!(id);
                        status["jobDeploymentStatus"] = json!("Running");
                        Next::Write(status)
                    }
                    None => Next::Stay,
                }
            }
            "Running" => {
                if let Some(failed) = past_deadlines(spec, &status, true, false) {
                    return Next::Write(failed);
                }
                let Some(cluster) = self.cluster(job, &status) else {
                    return Next::Stay;
                };
                self.poll(job, &cluster, status, interactive).await
            }
            "Complete" | "Failed" => {
                self.tear_down(job, &status);
                Next::Stay
            }
            _ => Next::Stay,
        }
    }

    /// `Suspending`: the cluster is deleted, and once it is gone the job's
    /// cluster and Ray status are reset and the RayJob is `Suspended`
    /// (made again, with a new name, once resumed).
    fn suspend(&mut self, job: &Value, mut status: Value) -> Next {
        let ns = meta_str(job, "namespace");
        if let Some(cluster) = status["rayClusterName"].as_str().filter(|n| !n.is_empty())
            && self.store.get(Resource::RayCluster, ns, cluster).is_ok()
        {
            self.delete_cluster(job, cluster);
            return Next::Stay;
        }
        if let Some(fields) = status.as_object_mut() {
            fields.remove("jobStatusCheckFailureStartTime");
        }
        for (field, reset) in [
            ("rayClusterStatus", json!({})),
            ("rayClusterName", json!("")),
            ("dashboardURL", json!("")),
            ("jobId", json!("")),
            ("message", json!("")),
            ("reason", json!("")),
            ("rayJobInfo", json!({})),
            ("jobStatus", json!("")),
            ("jobDeploymentStatus", json!("Suspended")),
        ] {
            status[field] = reset;
        }
        Next::Write(status)
    }

    /// The job's cluster, made from `spec.rayClusterSpec` when missing
    /// (later changes to that spec are disregarded, as KubeRay does).
    fn cluster(&mut self, job: &Value, status: &Value) -> Option<Arc<Value>> {
        let ns = meta_str(job, "namespace");
        let name = status["rayClusterName"].as_str()?;
        if let Ok(cluster) = self.store.get(Resource::RayCluster, ns, name) {
            return Some(cluster);
        }
        let mut labels = job["metadata"]["labels"].as_object().cloned().unwrap_or_default();
        labels.insert(ORIGIN_NAME.into(), json!(meta_str(job, "name")));
        labels.insert(ORIGIN_CRD.into(), json!("RayJob"));
        labels.insert(
            "ray.io/job-submission-mode".into(),
            json!(job["spec"]["submissionMode"].as_str().unwrap_or("K8sJobMode")),
        );
        let cluster = json!({
            "apiVersion": "ray.io/v1", "kind": "RayCluster",
            "metadata": {
                "name": name, "labels": labels,
                "annotations": job["metadata"]["annotations"].as_object().cloned().unwrap_or_default(),
                "ownerReferences": [{
                    "apiVersion": "ray.io/v1", "kind": "RayJob", "name": meta_str(job, "name"),
                    "uid": meta_str(job, "uid"), "controller": true, "blockOwnerDeletion": true,
                }],
            },
            "spec": job["spec"]["rayClusterSpec"],
        });
        match self
            .store
            .create(Resource::RayCluster, ns, cluster, WriteOpts::default())
        {
            Ok(made) => {
                let note = format!("Created RayCluster {ns}/{name}");
                emit_event(
                    &self.store,
                    &mut self.emitted,
                    job,
                    "Normal",
                    "CreatedRayCluster",
                    &note,
                    COMPONENT,
                );
                Some(made)
            }
            Err(e) => {
                let note = format!("Failed to create RayCluster {ns}/{name}: {}", e.message);
                emit_event(
                    &self.store,
                    &mut self.emitted,
                    job,
                    "Warning",
                    "FailedToCreateRayCluster",
                    &note,
                    COMPONENT,
                );
                None
            }
        }
    }

    /// `<head service>.<ns>.svc.cluster.local:<dashboard port>`, as
    /// KubeRay's `FetchHeadServiceURL` makes it.
    fn dashboard_url(&self, cluster: &Value) -> String {
        let (ns, name) = (meta_str(cluster, "namespace"), meta_str(cluster, "name"));
        let service = format!("{name}-head-svc");
        let port = self
            .store
            .get(Resource::Service, ns, &service)
            .ok()
            .and_then(|s| {
                s["spec"]["ports"]
                    .as_array()?
                    .iter()
                    .find(|p| p["name"] == "dashboard")?["port"]
                    .as_u64()
            })
            .unwrap_or(8265);
        format!("{service}.{ns}.svc.cluster.local:{port}")
    }

    /// Asks the head about the job and moves the status on from its
    /// answer.
    async fn poll(&mut self, job: &Value, cluster: &Value, mut status: Value, interactive: bool) -> Next {
        let id = status["jobId"].as_str().unwrap_or_default().to_owned();
        let head = Head::of(&self.store, &self.standins, cluster, &status);
        let answer = match &head {
            Some(head) => head.call("GET", &format!("/api/jobs/{id}"), None).await,
            None => Err("the head does not serve".to_owned()),
        };
        match answer {
            Ok((200, info)) => {
                status
                    .as_object_mut()
                    .map(|s| s.remove("jobStatusCheckFailureStartTime"));
                let ray_status = info["status"].as_str().unwrap_or("").to_owned();
                let terminal = matches!(ray_status.as_str(), "SUCCEEDED" | "FAILED" | "STOPPED");
                let failed = ray_status == "FAILED";
                status["jobStatus"] = json!(ray_status);
                status["message"] = info["message"].clone();
                status["reason"] = json!(if terminal && failed { "AppFailed" } else { "" });
                status["rayClusterStatus"] = cluster["status"].clone();
                if terminal {
                    status["jobDeploymentStatus"] = json!(if failed { "Failed" } else { "Complete" });
                }
                for (ms, field) in [("start_time", "startTime"), ("end_time", "endTime")] {
                    if let Some(at) = info[ms].as_i64().filter(|t| *t > 0).and_then(rfc3339_of_millis) {
                        status["rayJobInfo"][field] = json!(at);
                    }
                }
                Next::Write(status)
            }
            Ok((404, _)) if interactive => Next::Stay,
            Ok((404, _)) => {
                if let Some(head) = head {
                    let _ = head.call("POST", "/api/jobs/", Some(submission(job, &id))).await;
                }
                Next::Stay
            }
            Ok(_) | Err(_) => {
                if status["jobStatusCheckFailureStartTime"].is_string() {
                    return Next::Stay;
                }
                status["jobStatusCheckFailureStartTime"] = json!(now());
                Next::Write(status)
            }
        }
    }

    /// With `shutdownAfterJobFinishes`, deletes the cluster once
    /// `ttlSecondsAfterFinished` has passed since the end.
    fn tear_down(&mut self, job: &Value, status: &Value) {
        let spec = &job["spec"];
        if spec["shutdownAfterJobFinishes"] != true {
            return;
        }
        let ttl = spec["ttlSecondsAfterFinished"].as_i64().unwrap_or(0).max(0);
        let Some(end) = status["endTime"]
            .as_str()
            .and_then(|t| t.parse::<jiff::Timestamp>().ok())
        else {
            return;
        };
        if jiff::Timestamp::now() < end + jiff::SignedDuration::from_secs(ttl) {
            return;
        }
        self.delete_cluster(job, status["rayClusterName"].as_str().unwrap_or(""));
    }

    /// Deletes the job's cluster, with KubeRay's Event when it was there.
    fn delete_cluster(&mut self, job: &Value, cluster: &str) {
        let ns = meta_str(job, "namespace");
        if self.store.delete(Resource::RayCluster, ns, cluster).is_ok() {
            let note = format!("Deleted RayCluster {ns}/{cluster}");
            emit_event(
                &self.store,
                &mut self.emitted,
                job,
                "Normal",
                "DeletedRayCluster",
                &note,
                COMPONENT,
            );
        }
    }
}

/// Whether a deployment status is one KubeRay counts as ended.
fn is_terminal(status: &Value) -> bool {
    matches!(status["jobDeploymentStatus"].as_str(), Some("Complete" | "Failed"))
}

/// The status failed by the deadline that has passed, if one has:
/// `activeDeadlineSeconds` when `active`, `preRunningDeadlineSeconds` when
/// `pre_running`, both from `startTime`.
fn past_deadlines(spec: &Value, status: &Value, active: bool, pre_running: bool) -> Option<Value> {
    let start = status["startTime"].as_str()?.parse::<jiff::Timestamp>().ok()?;
    let passed = |field: &str| {
        spec[field]
            .as_i64()
            .is_some_and(|s| jiff::Timestamp::now() >= start + jiff::SignedDuration::from_secs(s))
    };
    let (reason, message) = if active && passed("activeDeadlineSeconds") {
        (
            "DeadlineExceeded",
            format!(
                "The RayJob has passed the activeDeadlineSeconds. StartTime: {start}. ActiveDeadlineSeconds: {}",
                spec["activeDeadlineSeconds"]
            ),
        )
    } else if pre_running && passed("preRunningDeadlineSeconds") {
        (
            "PreRunningDeadlineExceeded",
            format!(
                "The RayJob has passed the preRunningDeadlineSeconds. StartTime: {start}. PreRunningDeadlineSeconds: {}",
                spec["preRunningDeadlineSeconds"]
            ),
        )
    } else {
        return None;
    };
    let mut failed = status.clone();
    failed["jobDeploymentStatus"] = json!("Failed");
    failed["reason"] = json!(reason);
    failed["message"] = json!(message);
    Some(failed)
}

fn rfc3339_of_millis(ms: i64) -> Option<String> {
    jiff::Timestamp::from_millisecond(ms).ok().map(|t| t.to_string())
}

/// What HTTP mode submits: the RayJob's entrypoint and runtime env with
/// its job id as the submission id.
fn submission(job: &Value, id: &str) -> Value {
    let spec = &job["spec"];
    let runtime_env = spec["runtimeEnvYAML"]
        .as_str()
        .and_then(|y| serde_saphyr::from_str::<Value>(y).ok())
        .unwrap_or_else(|| json!({}));
    let mut body = json!({"entrypoint": spec["entrypoint"], "submission_id": id, "runtime_env": runtime_env});
    for (field, key) in [
        ("entrypointNumCpus", "entrypoint_num_cpus"),
        ("entrypointNumGpus", "entrypoint_num_gpus"),
    ] {
        if spec[field].is_number() {
            body[key] = spec[field].clone();
        }
    }
    if spec["metadata"].is_object() {
        body["metadata"] = spec["metadata"].clone();
    }
    body
}

/// KubeRay's checks of a RayJob (`ValidateRayJobMetadata`,
/// `ValidateRayJobSpec`), first failure first, for what the sandbox runs.
fn validate(job: &Value) -> Result<(), String> {
    let name = meta_str(job, "name");
    if name.len() > MAX_RAYJOB_NAME_LEN {
        return Err(format!(
            "RayJob name should be no more than {MAX_RAYJOB_NAME_LEN} characters"
        ));
    }
    if crate::domain::check_dns1035_label(name, MAX_RAYJOB_NAME_LEN).is_err() {
        return Err(format!("RayJob name should be a valid DNS1035 label: {name}"));
    }
    let spec = &job["spec"];
    let shutdown = spec["shutdownAfterJobFinishes"] == true;
    let ttl = spec["ttlSecondsAfterFinished"].as_i64().unwrap_or(0);
    if spec["suspend"] == true && !shutdown {
        return Err("a RayJob with shutdownAfterJobFinishes set to false is not allowed to be suspended".into());
    }
    if ttl < 0 {
        return Err("TTLSecondsAfterFinished must be a non-negative integer".into());
    }
    if !shutdown && ttl > 0 {
        return Err("a RayJob with shutdownAfterJobFinishes set to false cannot have TTLSecondsAfterFinished".into());
    }
    if spec["rayClusterSpec"].is_null() && spec["clusterSelector"].is_null() {
        return Err("one of RayClusterSpec or ClusterSelector must be set".into());
    }
    let mode = spec["submissionMode"].as_str().unwrap_or("K8sJobMode");
    if mode == "InteractiveMode" && spec["backoffLimit"].as_i64().unwrap_or(0) > 0 {
        return Err("BackoffLimit is incompatible with InteractiveMode".into());
    }
    if let Some(yaml) = spec["runtimeEnvYAML"].as_str()
        && let Err(e) = serde_saphyr::from_str::<Value>(yaml)
    {
        return Err(format!("failed to unmarshal RuntimeEnvYAML: {e}"));
    }
    for field in ["activeDeadlineSeconds", "preRunningDeadlineSeconds"] {
        if spec[field].as_i64().is_some_and(|s| s <= 0) {
            return Err(format!("{field} must be a positive integer"));
        }
    }
    if !spec["clusterSelector"].is_null() {
        return Err("the sandbox's KubeRay makes a cluster per RayJob: clusterSelector is not simulated".into());
    }
    if !matches!(mode, "InteractiveMode" | "HTTPMode") {
        return Err(format!(
            "the sandbox's KubeRay runs RayJobs in InteractiveMode and HTTPMode; {mode} needs a submitter it does not run"
        ));
    }
    Ok(())
}

/// A head's dashboard, reached in process as KubeRay reaches it over the
/// network, with the cluster's Ray token when it requires one.
struct Head {
    uid: String,
    port: u16,
    host: String,
    token: Option<String>,
    standins: Arc<Standins>,
}

impl Head {
    fn of(store: &Store, standins: &Arc<Standins>, cluster: &Value, status: &Value) -> Option<Self> {
        let (ns, name) = (meta_str(cluster, "namespace"), meta_str(cluster, "name"));
        let (pods, _) = store.list(Resource::Pod, Some(ns), |p| {
            p["metadata"]["labels"]["ray.io/cluster"] == name && p["metadata"]["labels"]["ray.io/node-type"] == "head"
        });
        let pod = pods.iter().find(|p| p["status"]["phase"] == "Running")?;
        let host = status["dashboardURL"].as_str().unwrap_or_default().to_owned();
        let port = host.rsplit_once(':').and_then(|(_, p)| p.parse().ok()).unwrap_or(8265);
        Some(Self {
            uid: meta_str(pod, "uid").to_owned(),
            port,
            host,
            token: ray_token(store, pod),
            standins: standins.clone(),
        })
    }

    /// `method path` with a JSON `body`; the status and the JSON answer
    /// (`null` when it is not JSON).
    async fn call(&self, method: &str, path: &str, body: Option<Value>) -> Result<(u16, Value), String> {
        tokio::time::timeout(DASHBOARD_TIMEOUT, self.call_now(method, path, body))
            .await
            .map_err(|_| "the dashboard did not answer in time".to_owned())?
    }

    async fn call_now(&self, method: &str, path: &str, body: Option<Value>) -> Result<(u16, Value), String> {
        let stream = self
            .standins
            .open(&self.uid, self.port)
            .await
            .ok_or("nothing serves the dashboard")?;
        let (mut sender, connection) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .map_err(|e| e.to_string())?;
        tokio::spawn(connection);
        let mut request = hyper::Request::builder()
            .method(method)
            .uri(path)
            .header("host", &self.host)
            .header("user-agent", "kuberay-operator/v1.7.0")
            .header("content-type", "application/json");
        if let Some(token) = &self.token {
            request = request.header("x-ray-authorization", format!("Bearer {token}"));
        }
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        let request = request.body(Full::new(Bytes::from(body))).map_err(|e| e.to_string())?;
        let response = sender.send_request(request).await.map_err(|e| e.to_string())?;
        let status = response.status().as_u16();
        let bytes = response
            .into_body()
            .collect()
            .await
            .map_err(|e| e.to_string())?
            .to_bytes();
        Ok((status, serde_json::from_slice(&bytes).unwrap_or(Value::Null)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(spec: Value) -> Value {
        json!({"metadata": {"name": "train", "namespace": "ml"}, "spec": spec})
    }

    #[test]
    fn kuberays_checks_come_first_failure_first() {
        let ok = json!({"submissionMode": "InteractiveMode", "rayClusterSpec": {}, "shutdownAfterJobFinishes": true,
                        "ttlSecondsAfterFinished": 60});
        assert_eq!(validate(&job(ok.clone())), Ok(()));
        let mut long = job(ok.clone());
        long["metadata"]["name"] = json!("a".repeat(48));
        assert!(validate(&long).unwrap_err().contains("no more than 47"));
        let mut keep = ok.clone();
        keep["shutdownAfterJobFinishes"] = json!(false);
        assert!(
            validate(&job(keep))
                .unwrap_err()
                .contains("cannot have TTLSecondsAfterFinished")
        );
        let mut retry = ok.clone();
        retry["backoffLimit"] = json!(2);
        assert_eq!(
            validate(&job(retry)).unwrap_err(),
            "BackoffLimit is incompatible with InteractiveMode"
        );
        let mut submitter = ok.clone();
        submitter.as_object_mut().unwrap().remove("submissionMode");
        assert!(
            validate(&job(submitter))
                .unwrap_err()
                .contains("K8sJobMode needs a submitter")
        );
        let mut none = ok;
        none.as_object_mut().unwrap().remove("rayClusterSpec");
        assert_eq!(
            validate(&job(none)).unwrap_err(),
            "one of RayClusterSpec or ClusterSelector must be set"
        );
    }

    #[test]
    fn deadlines_count_from_the_start() {
        let start = (jiff::Timestamp::now() - jiff::SignedDuration::from_secs(30)).to_string();
        let status = json!({"startTime": start, "jobDeploymentStatus": "Running"});
        let spec = json!({"activeDeadlineSeconds": 20, "preRunningDeadlineSeconds": 10});
        let failed = past_deadlines(&spec, &status, true, true).unwrap();
        assert_eq!(
            (&failed["jobDeploymentStatus"], &failed["reason"]),
            (&json!("Failed"), &json!("DeadlineExceeded"))
        );
        let waiting = past_deadlines(&spec, &status, false, true).unwrap();
        assert_eq!(waiting["reason"], "PreRunningDeadlineExceeded");
        assert!(past_deadlines(&json!({"activeDeadlineSeconds": 60}), &status, true, true).is_none());
    }

    #[test]
    fn http_mode_submits_the_runtime_env_of_its_yaml() {
        let j = job(json!({"entrypoint": "python x.py", "entrypointNumCpus": 1,
                           "runtimeEnvYAML": "env_vars:\n  A: b\npip: [numpy]\n"}));
        assert_eq!(
            submission(&j, "train-abcde"),
            json!({"entrypoint": "python x.py", "submission_id": "train-abcde", "entrypoint_num_cpus": 1,
                   "runtime_env": {"env_vars": {"A": "b"}, "pip": ["numpy"]}})
        );
    }
}
