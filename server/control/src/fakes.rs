//! In-memory ports for testing the use cases without processes (feature
//! `test-util`): a cluster store that keeps RayClusters as KubeRay objects
//! and applies the core's patches as Kubernetes does (resourceVersion
//! preconditions included), an audit sink that keeps its rows, heads
//! whose services echo what they are sent and whose Ray answers in memory
//! (jobs stay `PENDING` until a test ends them), and an admission lock
//! whose backend is down.
//!
//! They are not Kubernetes: no operator runs, so a cluster is `ready` only
//! when a test says so ([`MemoryStore::make_ready`]), and no watch cache
//! feeds live watches. The sandbox and the real server binary remain the
//! end-to-end tests; these make a use case's own rules quick to test.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "test support")]

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
};

use futures::{StreamExt as _, stream::BoxStream};
use serde_json::{Value, json};

use crate::domain::{
    AdmissionGuard, AdmissionLock, AuditSink, Authorized, ClusterChange, ClusterPatch, ClusterRef, ClusterStore,
    Companion, DeleteReply, Error, HeadLink, HeadUse, Job, JobStatus, JobSubmission, LogFileRead, LogStream,
    ObservedCluster, ObservedEvent, ObservedPod, PackageBody, Preconditions, RayHeads, RayJobs, RayLogListing, RayNode,
    RenderedCluster, RequestId, ResourceKind, ServiceStream, ServiceTarget, ServiceUpstream, SubmitReply,
    audit::{AuditEntry, AuditFilter},
};

/// Clusters and pods as KubeRay objects, in memory.
#[derive(Debug)]
pub struct MemoryStore {
    state: Mutex<Stored>,
}

#[derive(Debug, Default)]
struct Stored {
    namespaces: Vec<String>,
    clusters: BTreeMap<(String, String), Value>,
    pods: BTreeMap<(String, String), Vec<Value>>,
    /// Companions as applied, by kind, namespace and name.
    companions: BTreeMap<(&'static str, String, String), Value>,
    /// Events created (the lifecycle reaper's).
    created_events: Vec<Value>,
    version: u64,
    writes: usize,
}

impl MemoryStore {
    /// A store with these namespaces and no clusters.
    pub fn with_namespaces(namespaces: &[&str]) -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(Stored {
                namespaces: namespaces.iter().map(|n| (*n).to_owned()).collect(),
                ..Stored::default()
            }),
        })
    }

    /// Marks a cluster ready as KubeRay would once its pods run: its
    /// `status.state`, and a Running, ready head pod at `10.0.0.<n>` with
    /// the containers (and ports) of its head template.
    pub fn make_ready(&self, namespace: &str, name: &str) {
        let mut state = self.state.lock().unwrap();
        state.version += 1;
        let version = state.version;
        let key = (namespace.to_owned(), name.to_owned());
        let object = state.clusters.get_mut(&key).expect("a stored cluster");
        let ip = format!("10.0.0.{}", version % 250 + 1);
        object["status"] = json!({
            "state": "ready",
            "head": {"podIP": ip, "serviceIP": ip},
            "readyWorkerReplicas": 0,
        });
        object["metadata"]["resourceVersion"] = json!(version.to_string());
        let uid = object["metadata"]["uid"].clone();
        let template = object["spec"]["headGroupSpec"]["template"]["spec"].clone();
        let containers = template["containers"].clone();
        let statuses: Vec<Value> = containers
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| json!({"name": c["name"], "ready": true, "state": {"running": {}}}))
            .collect();
        let head = json!({
            "metadata": {
                "name": format!("{name}-head-x1"),
                "namespace": namespace,
                "uid": format!("pod-{version}"),
                "resourceVersion": version.to_string(),
                "labels": {"ray.io/cluster": name, "ray.io/node-type": "head", "ray.io/group": "headgroup"},
                "ownerReferences": [{"apiVersion": "ray.io/v1", "kind": "RayCluster", "name": name, "uid": uid,
                                     "controller": true, "blockOwnerDeletion": true}],
            },
            "spec": {"containers": containers},
            "status": {"phase": "Running", "podIP": ip, "containerStatuses": statuses,
                       "conditions": [{"type": "Ready", "status": "True"}]},
        });
        state.pods.insert(key, vec![head]);
    }

    /// The cluster deleted and created again under its name, as another
    /// caller might between a reader's look and its write: a new uid and
    /// version, the same spec and creator.
    pub fn recreate(&self, namespace: &str, name: &str) {
        let mut state = self.state.lock().unwrap();
        state.version += 1;
        let version = state.version;
        let key = (namespace.to_owned(), name.to_owned());
        let object = state.clusters.get_mut(&key).expect("a stored cluster");
        object["metadata"]["uid"] = json!(format!("uid-{version}"));
        object["metadata"]["resourceVersion"] = json!(version.to_string());
        for key in ["krayne.dev/lifecycle", "krayne.dev/warned-at", "krayne.dev/idle-since"] {
            if let Some(annotations) = object["metadata"]["annotations"].as_object_mut() {
                annotations.remove(key);
            }
        }
        state.writes += 1;
    }

    /// Writes that reached the store (creates, patches, deletes, policies).
    pub fn writes(&self) -> usize {
        self.state.lock().unwrap().writes
    }

    /// The stored object of a cluster, as Kubernetes would return it.
    pub fn object(&self, namespace: &str, name: &str) -> Option<Value> {
        let state = self.state.lock().unwrap();
        state.clusters.get(&(namespace.to_owned(), name.to_owned())).cloned()
    }

    /// The Events created (the lifecycle reaper's).
    pub fn created_events(&self) -> Vec<Value> {
        self.state.lock().unwrap().created_events.clone()
    }

    /// The NetworkPolicies applied (the last of each).
    pub fn policies(&self) -> Vec<Value> {
        self.companions(Companion::NetworkPolicy)
    }

    /// The companions of `kind` as last applied.
    pub fn companions(&self, kind: Companion) -> Vec<Value> {
        let state = self.state.lock().unwrap();
        state
            .companions
            .iter()
            .filter(|((k, _, _), _)| *k == kind.kind())
            .map(|(_, v)| v.clone())
            .collect()
    }

    fn observed(object: &Value) -> Result<ObservedCluster, Error> {
        serde_json::from_value(object.clone()).map_err(|e| Error::Internal(format!("a stored RayCluster: {e}")))
    }

    fn key(cluster: &ClusterRef) -> (String, String) {
        (cluster.namespace().to_owned(), cluster.name().to_owned())
    }

    fn pod(pod: &Value) -> Result<Arc<ObservedPod>, Error> {
        let pod = serde_json::from_value(pod.clone()).map_err(|e| Error::Internal(format!("a stored pod: {e}")))?;
        Ok(Arc::new(pod))
    }

    fn missing(name: &str) -> Error {
        Error::NotFound {
            kind: ResourceKind::Cluster,
            name: name.to_owned(),
            namespace: None,
        }
    }
}

#[async_trait::async_trait]
impl ClusterStore for MemoryStore {
    async fn namespaces(&self, _: &RequestId) -> Result<Vec<String>, Error> {
        Ok(self.state.lock().unwrap().namespaces.clone())
    }

    async fn create(
        &self,
        cluster: &Authorized<ClusterRef>,
        rendered: &RenderedCluster,
        dry_run: bool,
        _: &RequestId,
    ) -> Result<ObservedCluster, Error> {
        let mut state = self.state.lock().unwrap();
        let key = (rendered.namespace().to_owned(), rendered.name().to_owned());
        assert_eq!(
            (cluster.namespace(), cluster.name()),
            (&*key.0, &*key.1),
            "created as authorized"
        );
        if !state.namespaces.contains(&key.0) {
            return Err(Error::NotFound {
                kind: ResourceKind::Namespace,
                name: key.0,
                namespace: None,
            });
        }
        if state.clusters.contains_key(&key) {
            return Err(Error::AlreadyExists {
                kind: ResourceKind::Cluster,
                name: key.1,
            });
        }
        let mut object = rendered.manifest().clone();
        state.version += 1;
        object["metadata"]["uid"] = json!(format!("uid-{}", state.version));
        object["metadata"]["resourceVersion"] = json!(state.version.to_string());
        object["metadata"]["creationTimestamp"] = json!("2026-11-25T12:00:00Z");
        let observed = Self::observed(&object)?;
        if !dry_run {
            state.writes += 1;
            state.clusters.insert(key, object);
        }
        Ok(observed)
    }

    async fn get(&self, cluster: &ClusterRef, _: &RequestId) -> Result<Arc<ObservedCluster>, Error> {
        let state = self.state.lock().unwrap();
        let object = state
            .clusters
            .get(&Self::key(cluster))
            .ok_or_else(|| Self::missing(cluster.name()))?;
        Ok(Arc::new(Self::observed(object)?))
    }

    async fn list(&self, namespace: Option<&str>, _: &RequestId) -> Result<Vec<Arc<ObservedCluster>>, Error> {
        let state = self.state.lock().unwrap();
        state
            .clusters
            .iter()
            .filter(|((ns, _), _)| namespace.is_none_or(|n| n == ns))
            .map(|(_, object)| Self::observed(object).map(Arc::new))
            .collect()
    }

    async fn pods(&self, namespace: &str, _: &RequestId) -> Result<Vec<Arc<ObservedPod>>, Error> {
        let state = self.state.lock().unwrap();
        let of_namespace = state.pods.iter().filter(|((ns, _), _)| ns == namespace);
        of_namespace.flat_map(|(_, of)| of).map(Self::pod).collect()
    }

    async fn cluster_pods(&self, cluster: &ClusterRef, _: &RequestId) -> Result<Vec<Arc<ObservedPod>>, Error> {
        let state = self.state.lock().unwrap();
        let of = state.pods.get(&Self::key(cluster));
        of.into_iter().flatten().map(Self::pod).collect()
    }

    async fn cluster_events(
        &self,
        _: &ClusterRef,
        _: &[&str],
        _: &RequestId,
    ) -> Result<Vec<Arc<ObservedEvent>>, Error> {
        Ok(Vec::new())
    }

    async fn patch(
        &self,
        cluster: &Authorized<ClusterRef>,
        patch: &ClusterPatch,
        _: &RequestId,
    ) -> Result<ObservedCluster, Error> {
        let name = cluster.name();
        let mut state = self.state.lock().unwrap();
        state.version += 1;
        let version = state.version;
        let object = state
            .clusters
            .get_mut(&Self::key(cluster))
            .ok_or_else(|| Self::missing(name))?;
        let ops: json_patch::Patch = serde_json::from_value(patch.as_json().clone())
            .map_err(|e| Error::Internal(format!("a patch Kubernetes would refuse: {e}")))?;
        // A resourceVersion in the patch is a precondition, as Kubernetes
        // treats it.
        let expected = patch.as_json()[0]["value"].as_str().map(str::to_owned);
        let current = object["metadata"]["resourceVersion"].as_str().map(str::to_owned);
        if patch.as_json()[0]["path"] == "/metadata/resourceVersion" && expected != current {
            return Err(Error::Conflict(format!("{name} changed since it was read")));
        }
        let mut changed = object.clone();
        json_patch::patch(&mut changed, &ops).map_err(|e| Error::Internal(format!("applying a patch: {e}")))?;
        changed["metadata"]["resourceVersion"] = json!(version.to_string());
        let observed = Self::observed(&changed)?;
        *object = changed;
        state.writes += 1;
        Ok(observed)
    }

    async fn delete(
        &self,
        cluster: &Authorized<ClusterRef>,
        only_if: Option<&Preconditions>,
        _: &RequestId,
    ) -> Result<(), Error> {
        let name = cluster.name();
        let mut state = self.state.lock().unwrap();
        let key = Self::key(cluster);
        let current = state.clusters.get(&key).ok_or_else(|| Self::missing(name))?;
        if let Some(wanted) = only_if
            && (current["metadata"]["uid"] != wanted.uid.as_str()
                || current["metadata"]["resourceVersion"] != wanted.resource_version.as_str())
        {
            return Err(Error::Conflict(format!(
                "cluster {name:?} is no longer the one to delete"
            )));
        }
        state.clusters.remove(&key).ok_or_else(|| Self::missing(name))?;
        state.pods.remove(&key);
        state.writes += 1;
        Ok(())
    }

    async fn apply_companion(
        &self,
        cluster: &Authorized<ClusterRef>,
        kind: Companion,
        name: &str,
        object: &Value,
        _: &RequestId,
    ) -> Result<(), Error> {
        let mut state = self.state.lock().unwrap();
        let key = (kind.kind(), cluster.namespace().to_owned(), name.to_owned());
        state.companions.insert(key, object.clone());
        state.writes += 1;
        Ok(())
    }

    async fn network_policies(
        &self,
        namespace: &str,
        _: &RequestId,
    ) -> Result<std::collections::HashMap<String, crate::manifest::HeldPolicy>, Error> {
        let state = self.state.lock().unwrap();
        Ok(state
            .companions
            .iter()
            .filter(|((kind, ns, _), _)| *kind == Companion::NetworkPolicy.kind() && ns == namespace)
            .map(|((_, _, name), policy)| (name.clone(), crate::manifest::HeldPolicy::of(policy)))
            .collect())
    }

    async fn delete_companion(
        &self,
        cluster: &Authorized<ClusterRef>,
        kind: Companion,
        name: &str,
        _: &RequestId,
    ) -> Result<(), Error> {
        let mut state = self.state.lock().unwrap();
        let key = (kind.kind(), cluster.namespace().to_owned(), name.to_owned());
        state.companions.remove(&key);
        state.writes += 1;
        Ok(())
    }

    async fn create_event(&self, _: &Authorized<ClusterRef>, event: &Value, _: &RequestId) -> Result<(), Error> {
        let mut state = self.state.lock().unwrap();
        state.created_events.push(event.clone());
        state.writes += 1;
        Ok(())
    }

    async fn watch(
        &self,
        cluster: &ClusterRef,
        request_id: &RequestId,
    ) -> Result<BoxStream<'static, Result<ClusterChange, Error>>, Error> {
        // The state as it is, then nothing: no operator changes it here.
        let pods = self.cluster_pods(cluster, request_id).await?;
        let cluster = self.get(cluster, request_id).await?;
        let mut changes = vec![Ok(ClusterChange::Cluster(Box::new((*cluster).clone())))];
        changes.extend(pods.iter().map(|p| Ok(ClusterChange::Pod(Box::new((**p).clone())))));
        Ok(futures::stream::iter(changes).chain(futures::stream::pending()).boxed())
    }

    async fn ping(&self) -> Result<(), Error> {
        Ok(())
    }
}

/// Audit rows, in memory.
#[derive(Debug, Default)]
pub struct MemoryAudit {
    rows: Mutex<Vec<AuditEntry>>,
}

impl MemoryAudit {
    /// An empty audit log.
    pub fn new() -> Arc<Self> {
        Arc::default()
    }

    /// Every row so far, oldest first (a begun row as it was finished).
    pub fn rows(&self) -> Vec<AuditEntry> {
        self.rows.lock().unwrap().clone()
    }

    /// The rows of `action`, oldest first.
    pub fn of(&self, action: &str) -> Vec<AuditEntry> {
        self.rows().into_iter().filter(|r| r.action == action).collect()
    }
}

#[async_trait::async_trait]
impl AuditSink for MemoryAudit {
    async fn begin(&self, entry: &AuditEntry) -> Result<(), Error> {
        self.rows.lock().unwrap().push(entry.clone());
        Ok(())
    }

    async fn begin_unique(&self, entry: &AuditEntry) -> Result<bool, Error> {
        let mut rows = self.rows.lock().unwrap();
        if rows.iter().any(|r| r.id == entry.id) {
            return Ok(false);
        }
        rows.push(entry.clone());
        Ok(true)
    }

    async fn finish(&self, entry: &AuditEntry) {
        let mut rows = self.rows.lock().unwrap();
        // The row begun last is nearest the end.
        match rows.iter_mut().rev().find(|r| r.id == entry.id) {
            Some(row) => *row = entry.clone(),
            None => rows.push(entry.clone()),
        }
    }

    async fn record(&self, entry: &AuditEntry) {
        self.rows.lock().unwrap().push(entry.clone());
    }

    async fn ping(&self) -> Result<(), Error> {
        Ok(())
    }

    async fn query(&self, filter: &AuditFilter, limit: usize, _: Option<&str>) -> Result<Vec<AuditEntry>, Error> {
        let matches = |want: &Option<String>, have: Option<&str>| want.as_deref().is_none_or(|w| Some(w) == have);
        Ok(self
            .rows()
            .into_iter()
            .rev()
            .filter(|r| matches(&filter.namespace, r.namespace.as_deref()))
            .filter(|r| matches(&filter.action, Some(&r.action)))
            .filter(|r| matches(&filter.cluster, r.cluster.as_deref()))
            .filter(|r| matches(&filter.actor, Some(&r.subject)))
            .take(limit)
            .collect())
    }
}

/// Heads as an upstream sees them, and as Ray answers through them: every
/// service echoes what it is sent; Ray ([`RayHeads`]) answers from one
/// in-memory Ray per head pod, after dialling the head's dashboard as the
/// HTTP adapter does (so connections are counted, capped and audited as
/// in production). It records the targets it was asked for.
#[derive(Debug, Default)]
pub struct FakeHeads {
    dialled: Mutex<Vec<ServiceTarget>>,
    rays: Mutex<BTreeMap<String, Ray>>,
}

/// One head's Ray, as its Jobs API and cluster status show it.
#[derive(Debug, Default, Clone)]
pub struct Ray {
    /// Jobs by submission id.
    pub jobs: BTreeMap<String, Job>,
    /// What each job was submitted as, by submission id.
    pub submissions: BTreeMap<String, JobSubmission>,
    /// Packages kept, with their sizes.
    pub packages: BTreeMap<String, usize>,
    /// CPUs a task holds now.
    pub cpus_used: f64,
    /// Since when its node is idle (its idle seconds grow from it).
    pub idle_from: Option<std::time::Instant>,
    /// It takes requests and never answers.
    pub hangs: bool,
}

/// When the fake Ray's jobs start and end (as a recorded Ray 2.60 job).
const STARTED: &str = "2026-11-23T11:42:38.24Z";
const ENDED: &str = "2026-11-23T11:42:40.914Z";

impl FakeHeads {
    /// Heads that have been dialled by nobody yet.
    pub fn new() -> Arc<Self> {
        Arc::default()
    }

    /// The targets connected to, in order.
    pub fn dialled(&self) -> Vec<ServiceTarget> {
        self.dialled.lock().unwrap().clone()
    }

    /// How many connections were made (and forgets their targets: a
    /// benchmark's memory is krayne's, not this list's).
    pub fn take_dial_count(&self) -> usize {
        std::mem::take(&mut *self.dialled.lock().unwrap()).len()
    }

    /// The Ray of head pod `pod`, as it is now.
    pub fn ray(&self, pod: &str) -> Ray {
        self.rays.lock().unwrap().get(pod).cloned().unwrap_or_default()
    }

    /// Sets what head pod `pod`'s cluster status says: CPUs in use, and
    /// that its node has been idle for `idle_seconds` now (and counting,
    /// as Ray's `NodeIdleSeconds` does).
    pub fn set_use(&self, pod: &str, cpus_used: f64, idle_seconds: u64) {
        let mut rays = self.rays.lock().unwrap();
        let ray = rays.entry(pod.to_owned()).or_default();
        ray.cpus_used = cpus_used;
        ray.idle_from = std::time::Instant::now().checked_sub(std::time::Duration::from_secs(idle_seconds));
    }

    /// Makes head pod `pod` take every request and never answer.
    pub fn hang(&self, pod: &str) {
        self.rays.lock().unwrap().entry(pod.to_owned()).or_default().hangs = true;
    }

    /// Ends job `id` on head pod `pod` with `status`.
    pub fn end_job(&self, pod: &str, id: &str, status: JobStatus) {
        let mut rays = self.rays.lock().unwrap();
        let job = rays
            .get_mut(pod)
            .and_then(|r| r.jobs.get_mut(id))
            .expect("a submitted job");
        job.status = status;
        job.end_time = Some(ENDED.to_owned());
    }

    /// Dials `head`'s dashboard as the HTTP adapter would (then hangs up),
    /// and runs `answer` on its Ray; a hanging head never answers.
    async fn asked<T>(&self, head: &HeadLink, answer: impl FnOnce(&mut Ray) -> Result<T, Error>) -> Result<T, Error> {
        self.reached(head).await?;
        self.answer(head, answer)
    }

    /// Dials `head`'s dashboard and hangs up; a hanging head never
    /// returns.
    async fn reached(&self, head: &HeadLink) -> Result<(), Error> {
        drop(head.dial().await?);
        if self.ray(head.pod()).hangs {
            futures::future::pending::<()>().await;
        }
        Ok(())
    }

    /// `answer` run on `head`'s Ray.
    fn answer<T>(&self, head: &HeadLink, answer: impl FnOnce(&mut Ray) -> Result<T, Error>) -> Result<T, Error> {
        let mut rays = self.rays.lock().unwrap();
        answer(rays.entry(head.pod().to_owned()).or_default())
    }
}

/// Ray's answer about a job it does not have.
fn no_job(id: &str) -> Error {
    Error::NotFound {
        kind: ResourceKind::Job,
        name: id.to_owned(),
        namespace: None,
    }
}

#[async_trait::async_trait]
impl RayHeads for FakeHeads {
    async fn jobs(&self, head: &HeadLink) -> Result<RayJobs, Error> {
        self.asked(head, |ray| {
            Ok(RayJobs {
                jobs: ray.jobs.values().cloned().collect(),
                truncated: false,
            })
        })
        .await
    }

    async fn job(&self, head: &HeadLink, id: &str) -> Result<Job, Error> {
        self.asked(head, |ray| ray.jobs.get(id).cloned().ok_or_else(|| no_job(id)))
            .await
    }

    async fn submit(&self, head: &HeadLink, job: &JobSubmission) -> Result<SubmitReply, Error> {
        self.asked(head, |ray| {
            let id = job
                .submission_id
                .clone()
                .unwrap_or_else(|| format!("raysubmit_{:016}", ray.jobs.len() + 1));
            if ray.jobs.contains_key(&id) {
                return Ok(SubmitReply::Taken);
            }
            ray.submissions.insert(id.clone(), job.clone());
            ray.jobs.insert(
                id.clone(),
                Job {
                    id: id.clone(),
                    submission_id: Some(id.clone()),
                    ray_job_id: None,
                    kind: "SUBMISSION".into(),
                    entrypoint: job.entrypoint.clone(),
                    status: JobStatus::Pending,
                    message: Some("Job has not started yet.".into()),
                    error_type: None,
                    start_time: Some(STARTED.to_owned()),
                    end_time: None,
                    driver_exit_code: None,
                    metadata: job.metadata.clone(),
                },
            );
            Ok(SubmitReply::Accepted(id))
        })
        .await
    }

    async fn stop_job(&self, head: &HeadLink, id: &str) -> Result<bool, Error> {
        self.asked(head, |ray| {
            let job = ray.jobs.get_mut(id).ok_or_else(|| no_job(id))?;
            let running = matches!(job.status, JobStatus::Pending | JobStatus::Running);
            if running {
                job.status = JobStatus::Stopped;
            }
            Ok(running)
        })
        .await
    }

    async fn delete_job(&self, head: &HeadLink, id: &str) -> Result<DeleteReply, Error> {
        self.asked(head, |ray| {
            let job = ray.jobs.get(id).ok_or_else(|| no_job(id))?;
            if !job.status.is_terminal() {
                return Ok(DeleteReply::NotEnded);
            }
            ray.jobs.remove(id);
            Ok(DeleteReply::Deleted)
        })
        .await
    }

    async fn job_log(&self, head: &HeadLink, id: &str) -> Result<String, Error> {
        self.asked(head, |ray| {
            ray.jobs.get(id).map(|_| String::new()).ok_or_else(|| no_job(id))
        })
        .await
    }

    async fn follow_job_log(&self, head: &HeadLink, id: &str) -> Result<LogStream, Error> {
        self.asked(head, |ray| {
            ray.jobs
                .get(id)
                .map(|_| futures::stream::empty().boxed())
                .ok_or_else(|| no_job(id))
        })
        .await
    }

    async fn has_package(&self, head: &HeadLink, package: &str) -> Result<bool, Error> {
        self.asked(head, |ray| Ok(ray.packages.contains_key(package))).await
    }

    async fn upload_package(
        &self,
        head: &HeadLink,
        package: &str,
        _size: Option<u64>,
        mut body: PackageBody,
    ) -> Result<(), Error> {
        self.reached(head).await?;
        let mut bytes = 0;
        while let Some(chunk) = body.next().await {
            // A body cut short is no upload: Ray keeps nothing of it.
            let chunk = chunk.map_err(|e| Error::Unavailable(format!("the upload broke off: {e}")))?;
            bytes += chunk.len();
        }
        self.answer(head, |ray| {
            ray.packages.insert(package.to_owned(), bytes);
            Ok(())
        })
    }

    async fn cluster_use(&self, head: &HeadLink) -> Result<HeadUse, Error> {
        self.asked(head, |ray| {
            Ok(if ray.cpus_used > 0.0 {
                HeadUse::InUse
            } else {
                HeadUse::IdleFor(ray.idle_from.map_or(0, |from| from.elapsed().as_secs()))
            })
        })
        .await
    }

    async fn nodes(&self, head: &HeadLink) -> Result<Vec<RayNode>, Error> {
        self.asked(head, |_| {
            Ok(vec![RayNode {
                id: "a".repeat(56),
                ip: std::net::Ipv4Addr::new(10, 0, 0, 1).into(),
                head: true,
            }])
        })
        .await
    }

    async fn log_files(&self, head: &HeadLink, _node_id: &str) -> Result<RayLogListing, Error> {
        self.asked(head, |_| Ok(RayLogListing::default())).await
    }

    async fn log_file(&self, head: &HeadLink, read: &LogFileRead) -> Result<String, Error> {
        self.asked(head, |_| {
            Err(Error::NotFound {
                kind: ResourceKind::LogFile,
                name: read.file.clone(),
                namespace: None,
            })
        })
        .await
    }

    async fn follow_log_file(&self, head: &HeadLink, read: &LogFileRead) -> Result<LogStream, Error> {
        self.log_file(head, read)
            .await
            .map(|_| futures::stream::empty().boxed())
    }
}

#[async_trait::async_trait]
impl ServiceUpstream for FakeHeads {
    async fn connect(&self, target: &ServiceTarget) -> Result<Box<dyn ServiceStream>, Error> {
        use tokio_util::compat::TokioAsyncReadCompatExt as _;

        self.dialled.lock().unwrap().push(target.clone());
        let (ours, theirs) = tokio::io::duplex(64 * 1024);
        let hangs = self.rays.lock().unwrap().get(&target.pod).is_some_and(|r| r.hangs);
        if hangs {
            // Takes the request and never answers, until krayne hangs up.
            tokio::spawn(async move {
                let mut theirs = theirs;
                let _ = tokio::io::copy(&mut theirs, &mut tokio::io::sink()).await;
            });
        } else {
            tokio::spawn(async move {
                let (mut read, mut write) = tokio::io::split(theirs);
                let _ = tokio::io::copy(&mut read, &mut write).await;
            });
        }
        Ok(Box::new(ours.compat()))
    }

    fn half_close(&self, _: &ServiceTarget) -> bool {
        true
    }

    fn mode(&self, _: &ServiceTarget) -> &'static str {
        "direct"
    }
}

/// Uses of clusters, in memory, as every replica would record them.
#[derive(Debug, Default)]
pub struct MemoryLedger {
    uses: Mutex<BTreeMap<(String, String), jiff::Timestamp>>,
}

impl MemoryLedger {
    /// No use recorded yet.
    pub fn new() -> Arc<Self> {
        Arc::default()
    }
}

#[async_trait::async_trait]
impl crate::domain::ActivityLedger for MemoryLedger {
    async fn record(&self, uses: &[crate::domain::ClusterUse]) -> Result<(), Error> {
        let mut kept = self.uses.lock().unwrap();
        for u in uses {
            let at = kept.entry((u.namespace.clone(), u.name.clone())).or_insert(u.at);
            *at = (*at).max(u.at);
        }
        Ok(())
    }

    async fn last_uses(&self) -> Result<Vec<crate::domain::ClusterUse>, Error> {
        Ok(self
            .uses
            .lock()
            .unwrap()
            .iter()
            .map(|((namespace, name), at)| crate::domain::ClusterUse {
                namespace: namespace.clone(),
                name: name.clone(),
                at: *at,
            })
            .collect())
    }

    async fn forget(&self, before: jiff::Timestamp) -> Result<u64, Error> {
        let mut kept = self.uses.lock().unwrap();
        let was = kept.len();
        kept.retain(|_, at| *at >= before);
        Ok((was - kept.len()) as u64)
    }
}

/// A leader election with a fixed outcome: this replica holds the lease,
/// or never does.
#[derive(Debug, Clone, Copy)]
pub struct FixedLeadership(pub bool);

#[async_trait::async_trait]
impl crate::domain::Leadership for FixedLeadership {
    async fn leading(&self) {
        if !self.0 {
            std::future::pending::<()>().await;
        }
    }

    async fn holds(&self) -> bool {
        self.0
    }
}

/// A shared admission lock whose backend (the audit database) cannot be
/// reached: nothing may be admitted.
#[derive(Debug, Default)]
pub struct DownLock;

#[async_trait::async_trait]
impl AdmissionLock for DownLock {
    async fn lock(&self, _: &str) -> Result<AdmissionGuard, Error> {
        Err(Error::Unavailable(
            "quota admission cannot be serialized: the audit database is unreachable".into(),
        ))
    }
}
