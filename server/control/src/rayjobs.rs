//! Jobs with a cluster of their own (`krayne run`): KubeRay RayJobs made
//! from krayne's cluster model and a job submission, with the tenancy,
//! quota, lifecycle policy and audit of `create`. Editors create and
//! delete; viewers read. The job's cluster is charged to the namespace's
//! quota like any cluster while it exists, and before KubeRay has made it
//! (a RayJob not yet ended whose cluster is not there yet is charged its
//! `rayClusterSpec`).

use std::sync::Arc;

use serde_json::{Value, json};

use super::{
    Context, ControlPlane,
    queue::{Admission, LinePlace},
};
use crate::{
    domain::{
        ClusterRef, DEFAULT_TTL_SECONDS_AFTER_FINISHED, Error, FieldValidation, FieldViolation, KeptRun, LogStream,
        MIN_TTL_SECONDS_AFTER_FINISHED, ObservedCluster, ObservedRayJob, RayJobInfo, RayJobStore, RequestId, RunSpec,
        RunState, audit::AuditAction, quota,
    },
    manifest::{self, Provenance},
};

/// A run request: the body, and the namespace of the URL.
#[derive(Debug, Clone)]
pub struct RunInput {
    /// The request as JSON (`name`, `cluster`, `entrypoint`, …; see
    /// [`RunSpec::read`]).
    pub request: Value,
    /// Namespace from the path.
    pub namespace: String,
    /// Check and return the manifest only.
    pub dry_run: bool,
    /// What to do with unknown keys of the cluster config.
    pub field_validation: FieldValidation,
    /// Wait in the namespace's line when its cluster does not fit the
    /// quota (`None`: as the namespace's queueing policy says). The body
    /// may say it too, as a top-level `queue`.
    pub queue: Option<bool>,
}

/// What a run's create returns.
#[derive(Debug, Clone)]
pub struct Run {
    /// The RayJob (for a dry run, as it would be).
    pub rayjob: RayJobInfo,
    /// The RayJob manifest sent to Kubernetes.
    pub manifest: Value,
    /// Ignored keys and converted values of the cluster config.
    pub warnings: Vec<FieldViolation>,
}

impl ControlPlane {
    /// The lifecycle policy the team mapping gives `namespace`.
    fn lifecycle_policy(&self, namespace: &str) -> Option<crate::domain::lifecycle::LifecyclePolicy> {
        self.authenticator.as_ref()?.lifecycle(namespace)
    }

    pub(crate) fn rayjob_store(&self) -> Result<&Arc<dyn RayJobStore>, Error> {
        self.rayjobs.as_ref().ok_or_else(|| {
            Error::FailedPrecondition("this server does not run RayJobs (no KubeRay RayJob store configured)".into())
        })
    }

    /// Creates a RayJob (or, with `dry_run`, returns its checked manifest).
    pub async fn create_rayjob(&self, cx: &Context, input: RunInput) -> Result<Run, Error> {
        let RunInput {
            mut request,
            namespace,
            dry_run,
            field_validation,
            queue,
        } = input;
        let name = request.get("name").and_then(Value::as_str).map(str::to_owned);
        let granted = self
            .authorize(cx, AuditAction::RayJobCreate, &namespace, name.as_deref())
            .await?;
        let store = self.rayjob_store()?;
        let queue = match super::clusters::take_queue_flag(&mut request) {
            Ok(in_body) => queue.or(in_body),
            Err(e) => {
                self.record_refusal(cx, AuditAction::RayJobCreate, Some(&namespace), name.as_deref(), &e)
                    .await;
                return Err(e);
            }
        };
        let body_ns = request.get("namespace").and_then(Value::as_str);
        if body_ns.is_some_and(|ns| ns != namespace) {
            let e = Error::invalid(
                "namespace",
                format!("must match the namespace in the URL ({namespace:?}), or be left out"),
            );
            self.record_refusal(cx, AuditAction::RayJobCreate, Some(&namespace), name.as_deref(), &e)
                .await;
            return Err(e);
        }
        if let Some(map) = request.as_object_mut() {
            map.insert("namespace".into(), json!(namespace));
        }
        let read = match RunSpec::read(&request, field_validation) {
            Ok(read) => read,
            Err(e) => {
                self.record_refusal(cx, AuditAction::RayJobCreate, Some(&namespace), name.as_deref(), &e)
                    .await;
                return Err(e);
            }
        };
        let run = read.spec;
        let policy = self.lifecycle_policy(&namespace);
        // A team's TTL too leaves krayne the time to keep the driver's log.
        let ttl = run
            .ttl_seconds_after_finished
            .or_else(|| {
                let ttl = policy.as_ref()?.job_ttl?.0.as_secs();
                u32::try_from(ttl.max(0)).ok()
            })
            .unwrap_or(DEFAULT_TTL_SECONDS_AFTER_FINISHED)
            .max(MIN_TTL_SECONDS_AFTER_FINISHED);
        // The team's lifetime bounds every job of the namespace.
        let lifetime = policy
            .as_ref()
            .and_then(|p| p.max_lifetime)
            .and_then(|d| u64::try_from(d.0.as_secs()).ok());
        let deadline = match (run.active_deadline_seconds, lifetime) {
            (Some(asked), Some(most)) => Some(asked.min(most)),
            (asked, most) => asked.or(most),
        };
        let team = super::clusters::creator_team(cx, &namespace);
        let token = self.ray_token_names(&namespace, run.name(), dry_run);
        let who = Provenance {
            created_by: Some(&cx.principal.subject),
            team: team.as_deref(),
            ray_auth: token
                .as_ref()
                .map(|(nonce, secret)| manifest::RayAuthNames { nonce, secret }),
        };
        let rayjob = manifest::build_rayjob(&run, ttl, deadline, &self.settings.manifest, &who);
        // A RayJob and the cluster KubeRay makes for it live in one site,
        // placed as a cluster is.
        let cluster_manifest = json!({"metadata": rayjob["metadata"], "spec": rayjob["spec"]["rayClusterSpec"]});
        let charge = quota::charge_of_manifest(&cluster_manifest);
        let placement = match self.place(cx, &namespace, &run.cluster, charge).await {
            Ok(placement) => placement,
            Err(e) => {
                self.record_refusal(cx, AuditAction::RayJobCreate, Some(&namespace), Some(run.name()), &e)
                    .await;
                return Err(e);
            }
        };
        let target = granted.cluster_in(run.name(), placement.as_ref().map(|p| p.site.clone()));
        let rid = &cx.meta.request_id;
        // Where the platform's Kueue admits, krayne's quota is
        // informational: the RayJob is Kueue's workload.
        let kueue = self.kueue_queue(&namespace);
        // KubeRay suspends (and Kueue admits) only a RayJob that shuts its
        // cluster down.
        if (queue == Some(true) || kueue.is_some()) && !run.shutdown_after_job_finishes {
            let why = match &kueue {
                Some(queue) => format!(
                    "the namespace's RayJobs are admitted by Kueue (LocalQueue {queue}), which takes only RayJobs \
                     that shut their cluster down: leave shutdown_after_job_finishes out"
                ),
                None => "a RayJob that keeps its cluster (shutdown_after_job_finishes: false) cannot wait in line: \
                         KubeRay suspends only RayJobs that shut their cluster down"
                    .to_owned(),
            };
            let field = if kueue.is_some() {
                "shutdown_after_job_finishes"
            } else {
                "queue"
            };
            let e = Error::invalid(field, why);
            self.record_refusal(cx, AuditAction::RayJobCreate, Some(&namespace), Some(run.name()), &e)
                .await;
            return Err(e);
        }
        let admitted = match kueue {
            Some(_) => Admission::Unlimited,
            None => {
                self.admit_or_queue(
                    cx,
                    AuditAction::RayJobCreate,
                    &namespace,
                    run.name(),
                    self.queue_policy(&namespace).waits(queue) && run.shutdown_after_job_finishes,
                    async || {
                        let site = target.site().cloned().unwrap_or_default();
                        Ok((quota::Request::new_cluster(charge).at(Some(site)), ()))
                    },
                )
                .await?
            }
        };
        // A RayJob's name is the fleet's, as a cluster's is.
        let fleet_lock = match (&placement, &admitted) {
            (Some(_), Admission::Unlimited) if !dry_run => Some(self.quota_lock.lock(&namespace).await?),
            _ => None,
        };
        if placement.is_some()
            && let Some(held) = store
                .list_rayjobs(Some(&namespace), rid)
                .await?
                .into_iter()
                .find(|j| j.metadata.name.as_str() == run.name())
        {
            tracing::info!(%namespace, rayjob = %run.name(), site = %held.site, "the name is another site's RayJob");
            let e = Error::AlreadyExists {
                kind: crate::domain::ResourceKind::RayJob,
                name: run.name().to_owned(),
            };
            self.record_refusal(cx, AuditAction::RayJobCreate, Some(&namespace), Some(run.name()), &e)
                .await;
            return Err(e);
        }
        let fleet_hold = fleet_lock.as_ref().map(crate::domain::AdmissionGuard::hold);
        let hold = admitted.hold();
        let rayjob = match admitted.place() {
            Some(place) => place.put(rayjob, manifest::queued_rayjob),
            None => rayjob,
        };
        let place = admitted.place().map(LinePlace::summary);
        let rayjob = match &kueue {
            Some(queue) => manifest::rayjob_for_kueue(rayjob, queue, &jiff::Timestamp::now().to_string()),
            None => rayjob,
        };
        let observed = if dry_run {
            store.create_rayjob(&target, &rayjob, true, rid).await?
        } else {
            let summary = json!({
                "spec": run.cluster.to_value(),
                "entrypoint": run.job.entrypoint,
                "job_id": run.job_id(),
                "package": run.job.package(),
                "env_vars": run.job.runtime_env.env_vars.keys().collect::<Vec<_>>(),
                "pip": run.job.runtime_env.pip,
                "ttl_seconds_after_finished": run.shutdown_after_job_finishes.then_some(ttl),
                "active_deadline_seconds": deadline,
                "field_validation": field_validation.as_str(),
                "warnings": read.warnings.len(),
                "queue": place,
                "site": placement.as_ref().map(|p| p.site.name()),
                "placement": placement.as_ref().map(|p| &p.why),
            });
            let status = if place.is_some() || kueue.is_some() { 202 } else { 201 };
            self.audited_with_status(
                cx,
                AuditAction::RayJobCreate,
                &namespace,
                run.name(),
                summary,
                |_| status,
                || async {
                    hold.check()?;
                    if let Some(fleet) = &fleet_hold {
                        fleet.check()?;
                    }
                    let staged = token.as_ref().map(|(nonce, secret)| (nonce.as_str(), secret.as_str()));
                    if let Some((nonce, secret)) = staged {
                        self.stage_ray_token(&target, nonce, secret, rid).await?;
                    }
                    match store.create_rayjob(&target, &rayjob, false, rid).await {
                        Ok(created) => {
                            if let Some((nonce, secret)) = staged
                                && let Err(e) = self.own_staged_token(&target, &created, nonce, secret, rid).await
                            {
                                tracing::warn!(request_id = %rid, %namespace, rayjob = %run.name(), error = %e,
                                    "a RayJob's token Secret could not be owned by it; its cluster's companions will own it");
                            }
                            Ok(created)
                        }
                        Err(e) => {
                            let ambiguous = matches!(e, Error::DeadlineExceeded(_) | Error::Unavailable(_));
                            if let Some((_, secret)) = staged.filter(|_| !ambiguous) {
                                self.unstage_ray_token(&target, secret, rid).await;
                            }
                            Err(e)
                        }
                    }
                },
            )
            .await?
        };
        Ok(Run {
            rayjob: RayJobInfo::of(&observed, None, None),
            manifest: rayjob,
            warnings: read.warnings,
        })
    }

    /// One RayJob, with its cluster's status while it exists (viewer).
    pub async fn rayjob(&self, cx: &Context, rayjob: &ClusterRef) -> Result<RayJobInfo, Error> {
        let (namespace, name) = (rayjob.namespace(), rayjob.name());
        self.authorize_cluster(cx, AuditAction::RayJobGet, rayjob).await?;
        let store = self.rayjob_store()?;
        let rid = &cx.meta.request_id;
        let observed = store.get_rayjob(rayjob, rid).await.map_err(|e| as_rayjob(e, name))?;
        let info = self.rayjob_info(&observed, rid).await;
        self.record_read(cx, AuditAction::RayJobGet, Some(namespace), Some(name))
            .await;
        Ok(info)
    }

    /// The RayJobs of `namespace`, by name (viewer).
    pub async fn rayjobs(&self, cx: &Context, namespace: &str) -> Result<Vec<RayJobInfo>, Error> {
        self.authorize(cx, AuditAction::RayJobList, namespace, None).await?;
        let store = self.rayjob_store()?;
        let rid = &cx.meta.request_id;
        let mut observed = store.list_rayjobs(Some(namespace), rid).await?;
        observed.sort_by(|a, b| a.metadata.name.as_str().cmp(b.metadata.name.as_str()));
        let clusters = self.store.list(Some(namespace), rid).await?;
        let down = self.sites_down_since();
        let infos = observed
            .iter()
            .map(|job| {
                let mut info = RayJobInfo::of(job, cluster_status(job, &clusters), None);
                info.site_unavailable_since = down.get(&job.site).cloned();
                info
            })
            .collect();
        self.record_read(cx, AuditAction::RayJobList, Some(namespace), None)
            .await;
        Ok(infos)
    }

    /// Deletes a RayJob: KubeRay stops its job, and its cluster goes with
    /// it (editor).
    pub async fn delete_rayjob(&self, cx: &Context, rayjob: &ClusterRef) -> Result<(), Error> {
        let (namespace, name) = (rayjob.namespace(), rayjob.name());
        let target = self.authorize_cluster(cx, AuditAction::RayJobDelete, rayjob).await?;
        let store = self.rayjob_store()?;
        let rid = &cx.meta.request_id;
        self.audited(cx, AuditAction::RayJobDelete, namespace, name, Value::Null, || async {
            store
                .delete_rayjob(&target, None, rid)
                .await
                .map_err(|e| as_rayjob(e, name))
        })
        .await
    }

    /// The view of `job`: its cluster's status read from the cluster
    /// store, and once it has ended its exit code (kept, or its head's).
    async fn rayjob_info(&self, job: &ObservedRayJob, rid: &RequestId) -> RayJobInfo {
        let mut status = None;
        let mut exit_code = None;
        if job.state().is_over()
            && let Ok(Some(kept)) = self.kept_run(job).await
        {
            exit_code = kept.exit_code;
        }
        if let Some(cluster) = job.cluster_name() {
            let target = ClusterRef::new(job.metadata.namespace.as_str(), cluster);
            if let Ok(observed) = self.store.get(&target, rid).await {
                let pods = self.store.cluster_pods(&target, rid).await.ok();
                let pods = pods.as_deref().map(super::clusters::views);
                status = Some(manifest::derive_status(&observed, pods.as_deref()));
                if exit_code.is_none() && job.state().is_over() {
                    exit_code = self.exit_code_from_head(&target, job).await;
                }
            }
        }
        let mut info = RayJobInfo::of(job, status, exit_code);
        info.site_unavailable_since = self.site_down_since(&job.site);
        info
    }

    /// The exit code `job`'s head reports (`None` when it cannot be had).
    async fn exit_code_from_head(&self, target: &ClusterRef, job: &ObservedRayJob) -> Option<i64> {
        let cx = crate::reaper::system_context();
        let head = self.ray_head(&cx, target).await.ok()?;
        let id = job.job_id()?;
        self.ray().ok()?.job(&head, id).await.ok()?.driver_exit_code
    }

    /// What was kept of `job`'s ended job, if anything.
    async fn kept_run(&self, job: &ObservedRayJob) -> Result<Option<KeptRun>, Error> {
        let (Some(ledger), Some(uid)) = (&self.run_ledger, job.metadata.uid.as_ref()) else {
            return Ok(None);
        };
        ledger
            .kept(job.metadata.namespace.as_str(), job.metadata.name.as_str(), &uid.text())
            .await
    }

    /// Where `rayjob`'s driver log is read: what krayne kept once it
    /// ended, else its head while its cluster lives and the job runs.
    /// Authorized as `rayjob.logs` (viewer).
    async fn log_source(&self, cx: &Context, rayjob: &ClusterRef) -> Result<LogSource, Error> {
        self.authorize_cluster(cx, AuditAction::RayJobLogs, rayjob).await?;
        let store = self.rayjob_store()?;
        let rid = &cx.meta.request_id;
        let job = store
            .get_rayjob(rayjob, rid)
            .await
            .map_err(|e| as_rayjob(e, rayjob.name()))?;
        if let Some(kept) = self.kept_run(&job).await? {
            return match kept.log_tail {
                Some(tail) => Ok(LogSource::Kept(tail)),
                None => Err(Error::FailedPrecondition(format!(
                    "rayjob '{}' has no log: its job never ran ({})",
                    rayjob.name(),
                    job.status.message.as_deref().unwrap_or("ended before it was submitted")
                ))),
            };
        }
        let state = job.state();
        match (job.cluster_name(), job.job_id()) {
            (Some(cluster), Some(id)) if matches!(state, RunState::Running) || state.is_over() => Ok(LogSource::Live(
                ClusterRef::new(rayjob.namespace(), cluster),
                id.to_owned(),
            )),
            _ => Err(Error::FailedPrecondition(format!(
                "rayjob '{}' has no log yet: its job has not started (state: {})",
                rayjob.name(),
                state.as_str()
            ))),
        }
    }

    /// A RayJob's driver log (viewer): its head's while the cluster lives,
    /// the last MiB krayne kept once the job ended.
    pub async fn rayjob_logs(&self, cx: &Context, rayjob: &ClusterRef) -> Result<String, Error> {
        let log = match self.log_source(cx, rayjob).await? {
            LogSource::Kept(tail) => tail,
            LogSource::Live(cluster, id) => self.job_logs(cx, &cluster, &id).await?,
        };
        self.record_read(
            cx,
            AuditAction::RayJobLogs,
            Some(rayjob.namespace()),
            Some(rayjob.name()),
        )
        .await;
        Ok(log)
    }

    /// A RayJob's driver log from its start as it grows, until the job
    /// ends (viewer); once kept, the kept tail at once.
    pub async fn follow_rayjob_logs(&self, cx: &Context, rayjob: &ClusterRef) -> Result<LogStream, Error> {
        let lines = match self.log_source(cx, rayjob).await? {
            LogSource::Kept(tail) => Box::pin(futures::stream::once(async move { Ok(tail) })) as LogStream,
            LogSource::Live(cluster, id) => self.follow_job_logs(cx, &cluster, &id).await?,
        };
        self.record_read(
            cx,
            AuditAction::RayJobLogs,
            Some(rayjob.namespace()),
            Some(rayjob.name()),
        )
        .await;
        Ok(lines)
    }

    /// `namespace`'s RayJobs as Kubernetes has them now (none where this
    /// server runs no RayJobs).
    pub(super) async fn rayjobs_now(&self, namespace: &str, rid: &RequestId) -> Result<Vec<ObservedRayJob>, Error> {
        match &self.rayjobs {
            Some(store) => store.list_rayjobs(Some(namespace), rid).await,
            None => Ok(Vec::new()),
        }
    }
}

/// What `jobs` are charged beyond `clusters`: each one not yet ended whose
/// cluster KubeRay has not made yet, its `rayClusterSpec`. One suspended
/// (waiting in line, or by Kueue) holds nothing: KubeRay makes no cluster
/// for it.
pub(super) fn rayjobs_not_yet_made<'a>(
    jobs: &'a [ObservedRayJob],
    clusters: &'a [Arc<ObservedCluster>],
) -> impl Iterator<Item = (crate::domain::Site, quota::Usage)> + 'a {
    jobs.iter()
        .filter(|job| !job.state().is_over() && job.spec.suspend != Some(true))
        .filter(|job| {
            job.cluster_name()
                .is_none_or(|name| !clusters.iter().any(|c| c.metadata.name.as_str() == name))
        })
        .map(|job| (job.site.clone(), charge_of_rayjob(job)))
}

/// What a RayJob's cluster is charged once made: its `rayClusterSpec`.
pub(super) fn charge_of_rayjob(job: &ObservedRayJob) -> quota::Usage {
    job.spec
        .ray_cluster_spec
        .as_ref()
        .map(|spec| quota::charge_of_manifest(&json!({"spec": spec})))
        .unwrap_or_default()
}

/// Where a RayJob's log is read.
enum LogSource {
    /// What krayne kept once the job ended.
    Kept(String),
    /// The job's head: its cluster and the Ray job id.
    Live(ClusterRef, String),
}

/// `job`'s cluster's status among `clusters`, while it exists.
fn cluster_status(job: &ObservedRayJob, clusters: &[Arc<ObservedCluster>]) -> Option<crate::domain::ClusterStatus> {
    let name = job.cluster_name()?;
    let cluster = clusters.iter().find(|c| c.metadata.name.as_str() == name)?;
    Some(manifest::derive_status(cluster, None))
}

/// A missing object of a RayJob call is the RayJob, named as asked.
fn as_rayjob(e: Error, name: &str) -> Error {
    match e {
        Error::NotFound { namespace, .. } => Error::NotFound {
            kind: crate::domain::ResourceKind::RayJob,
            name: name.to_owned(),
            namespace,
        },
        other => other,
    }
}
