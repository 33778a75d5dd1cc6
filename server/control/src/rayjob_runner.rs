//! The RayJob runner: the background round that does for krayne's RayJobs
//! what KubeRay's `InteractiveMode` leaves to its user.
//!
//! - Once a RayJob's cluster is ready and KubeRay follows its job id (the
//!   deployment `Running`, no Ray job seen yet), and its head holds the
//!   working dir's package when there is one (`krayne run` uploads it),
//!   the job is submitted under that id, as krayne's own `job.submit`
//!   (Ray answers a repeated id with the first job: a round that runs
//!   twice submits once).
//! - Once a job has ended, its exit code and the last MiB of its driver's
//!   log are kept in the audit database before KubeRay deletes the cluster
//!   (`ttlSecondsAfterFinished` is at least 30 s for this).
//! - As soon as a RayJob's cluster is seen, its companions (NetworkPolicy,
//!   Ray token Secret owned by it) are applied, as a create applies a
//!   cluster's: KubeRay makes the cluster, so no create of krayne's does,
//!   and the companion keeper's round may be minutes away.
//! - A RayJob whose job ended `--rayjob-retention-seconds` ago (7 days by
//!   default) and whose cluster is gone is deleted, audited as krayne's
//!   `rayjob.delete` (its kept run goes with `krayne-server audit prune`).
//!
//! Fenced: only RayJobs krayne made (its `created-by` annotation, copied by
//! KubeRay to their clusters), in `InteractiveMode`, with a job id; found
//! through the watch cache's clusters and read from its RayJobs, so a
//! round asks Kubernetes nothing when nothing is to be done.

use std::{
    collections::{BTreeMap, HashMap, HashSet},
    sync::Arc,
};

use serde_json::json;

use super::{Context, ControlPlane};
use crate::{
    domain::{
        ClusterRef, Error, JobSubmission, KeptRun, ObservedCluster, ObservedRayJob, Preconditions, RunState,
        RuntimeEnv, Uid, audit::AuditAction, log_tail, parse_yaml,
    },
    manifest,
};

/// What the runner has done already, so a round does nothing twice: the
/// RayJobs whose run it kept (a log is read once), and the job clusters
/// it protected (while they exist).
#[derive(Debug, Default)]
pub(crate) struct KeptRuns {
    runs: HashSet<String>,
    protected: HashSet<Uid>,
    /// RayJobs whose retention delete failed, and when to try again.
    expiry_failed: HashMap<String, std::time::Instant>,
}

impl ControlPlane {
    /// One round of the runner (see the module): logged, never failing.
    pub(crate) async fn rayjobs_round(&self, kept: &mut KeptRuns) {
        let Some(store) = &self.rayjobs else {
            return;
        };
        let cx = crate::reaper::system_context();
        let rid = cx.meta.request_id.clone();
        // The watch cache's own objects, never a read through it: a cache
        // still listing (or relisting after a 410) would list every cluster
        // from Kubernetes each round. The next round looks instead.
        let feed = self.store.feed();
        let clusters = match &feed {
            Some(feed) if feed.ready() => feed.clusters(None),
            Some(_) => return,
            None => match self.store.list(None, &rid).await {
                Ok(clusters) => clusters,
                Err(e) => {
                    tracing::warn!(error = %e, "the RayJob runner could not list clusters; trying again next round");
                    return;
                }
            },
        };
        let mut of_jobs: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
        let mut live = HashSet::new();
        for c in clusters.iter().filter(|c| made_by_krayne(&c.metadata)) {
            if let Some(rayjob) = c.metadata.rayjob() {
                live.extend(c.metadata.uid.clone());
                self.protect_job_cluster(&cx, c, kept).await;
                of_jobs
                    .entry(c.metadata.namespace.to_string())
                    .or_default()
                    .push((rayjob.to_owned(), c.metadata.name.to_string()));
            }
        }
        kept.protected.retain(|uid| live.contains(uid));
        for (namespace, clusters) in of_jobs {
            let jobs = match &feed {
                Some(feed) => Ok(feed.rayjobs(Some(&namespace))),
                None => {
                    (store.list_rayjobs(Some(&namespace), &rid).await).map(|j| j.into_iter().map(Arc::new).collect())
                }
            };
            let jobs: Vec<Arc<ObservedRayJob>> = match jobs {
                Ok(jobs) => jobs,
                Err(e) => {
                    tracing::warn!(%namespace, error = %e, "the RayJob runner could not list RayJobs; trying again next round");
                    continue;
                }
            };
            for job in jobs
                .iter()
                .filter(|j| j.spec.submission_mode.as_deref() == Some(manifest::SUBMISSION_MODE))
            {
                let Some(cluster) = job.cluster_name() else {
                    continue;
                };
                let ours = clusters
                    .iter()
                    .any(|(rayjob, name)| rayjob == job.metadata.name.as_str() && name == cluster);
                if !ours || !made_by_krayne(&job.metadata) {
                    continue;
                }
                let done = match job.state() {
                    RunState::Submitting if job.status.job_deployment_status.as_deref() == Some("Running") => {
                        self.submit_rayjob(&cx, job, cluster).await
                    }
                    state if state.is_over() => self.keep_run(&cx, job, cluster, kept).await,
                    _ => Ok(()),
                };
                if let Err(e) = done {
                    tracing::debug!(%namespace, rayjob = %job.metadata.name, error = %e, "the RayJob runner will try again next round");
                }
            }
        }
        if let Some(retention) = self.settings.rayjob_retention {
            let all = match &feed {
                Some(feed) => feed.rayjobs(None),
                None => match store.list_rayjobs(None, &rid).await {
                    Ok(jobs) => jobs.into_iter().map(Arc::new).collect(),
                    Err(e) => {
                        tracing::warn!(error = %e, "the RayJob runner could not list RayJobs; trying again next round");
                        return;
                    }
                },
            };
            self.expire_rayjobs(&cx, &all, &clusters, retention, kept).await;
        }
    }

    /// Deletes the RayJobs krayne made whose job ended longer than
    /// `retention` ago and whose cluster KubeRay has deleted, at most
    /// [`RETENTION_DELETES_PER_ROUND`] a round; each conditional on the
    /// RayJob decided on, audited `rayjob.delete` (reason `retention`).
    /// Nothing of a run is lost: one whose run was never kept (its head
    /// gone first, or no cluster ever made) has its status kept first,
    /// and without a run ledger nothing is deleted. A RayJob that keeps
    /// its cluster (`shutdownAfterJobFinishes: false`) is its owner's to
    /// delete. One whose delete fails waits [`RETENTION_RETRY_AFTER`].
    async fn expire_rayjobs(
        &self,
        cx: &Context,
        jobs: &[Arc<ObservedRayJob>],
        clusters: &[Arc<ObservedCluster>],
        retention: std::time::Duration,
        kept: &mut KeptRuns,
    ) {
        let (Some(store), Some(ledger)) = (&self.rayjobs, &self.run_ledger) else {
            return;
        };
        let now = jiff::Timestamp::now();
        let instant = std::time::Instant::now();
        kept.expiry_failed.retain(|_, retry_at| *retry_at > instant);
        let due = jobs
            .iter()
            .filter(|j| made_by_krayne(&j.metadata) && j.metadata.deletion_timestamp.is_none())
            .filter(|j| j.state().is_over() && j.spec.shutdown_after_job_finishes == Some(true))
            .filter(|j| {
                j.cluster_name().is_none_or(|name| {
                    !clusters
                        .iter()
                        .any(|c| c.metadata.namespace == j.metadata.namespace && c.metadata.name.as_str() == name)
                })
            })
            .filter(|j| ended_before(j, now, retention))
            .filter(|j| {
                j.metadata
                    .uid
                    .as_ref()
                    .is_some_and(|uid| !kept.expiry_failed.contains_key(uid.text().as_ref()))
            })
            .take(RETENTION_DELETES_PER_ROUND)
            .collect::<Vec<_>>();
        for job in due {
            let (Some(only_if), Some(uid)) = (Preconditions::of_object(&job.metadata), job.metadata.uid.as_ref())
            else {
                continue;
            };
            let uid = uid.text().into_owned();
            let (namespace, name) = (job.metadata.namespace.as_str(), job.metadata.name.as_str());
            let target = crate::authz::krayne_acts_on_object(&job.metadata, &job.site, AuditAction::RayJobDelete);
            let summary = json!({"reason": "retention", "ended_at": job.status.end_time,
                                 "retention_seconds": retention.as_secs()});
            let deleted = async {
                if ledger.kept(namespace, name, &uid).await?.is_none() {
                    ledger.keep(&status_only_run(job, &uid)).await?;
                }
                self.audited(cx, AuditAction::RayJobDelete, namespace, name, summary, || {
                    store.delete_rayjob(&target, Some(&only_if), &cx.meta.request_id)
                })
                .await
            }
            .await;
            match deleted {
                Ok(()) => {
                    metrics::counter!("krayne_rayjobs_expired_total").increment(1);
                    tracing::info!(%namespace, rayjob = %name, "an ended RayJob past its retention was deleted");
                }
                Err(e) => {
                    kept.expiry_failed.insert(uid, instant + RETENTION_RETRY_AFTER);
                    tracing::warn!(%namespace, rayjob = %name, error = %e,
                        "an ended RayJob past its retention was not deleted; tried again later");
                }
            }
        }
    }

    /// Applies the companions of `cluster`, a RayJob's, once (audited as
    /// the keeper's `cluster.protect`); a failure is tried again next
    /// round, and meanwhile Ray's token guards the head.
    async fn protect_job_cluster(&self, cx: &Context, cluster: &ObservedCluster, kept: &mut KeptRuns) {
        let Some(uid) = cluster.metadata.uid.clone() else {
            return;
        };
        if kept.protected.contains(&uid) || cluster.metadata.deletion_timestamp.is_some() {
            return;
        }
        let target = crate::authz::krayne_acts_on(cluster, AuditAction::ClusterProtect);
        match self.keep_companions(&target, cluster, None, &cx.meta.request_id).await {
            Ok(applied) => {
                kept.protected.insert(uid);
                if applied.policy_created {
                    self.record_kept(cx, cluster, applied).await;
                }
            }
            Err(e) => {
                metrics::counter!("krayne_network_policy_failures_total").increment(1);
                tracing::warn!(namespace = %cluster.metadata.namespace, cluster = %cluster.metadata.name, error = %e,
                    "a RayJob's cluster's companions could not be applied; trying again next round");
            }
        }
    }

    /// Submits `job`'s Ray job to the head of its `cluster`, once the head
    /// serves and holds the working dir's package.
    async fn submit_rayjob(&self, cx: &Context, job: &ObservedRayJob, cluster: &str) -> Result<(), Error> {
        let Some(id) = job.spec.job_id.as_deref() else {
            return Ok(());
        };
        let namespace = job.metadata.namespace.as_str();
        let target = ClusterRef::new(namespace, cluster);
        let head = self.ray_head(cx, &target).await?;
        let ray = self.ray()?;
        match ray.job(&head, id).await {
            Ok(_) => return Ok(()),
            Err(Error::NotFound { .. }) => {}
            Err(e) => return Err(e),
        }
        let runtime_env: RuntimeEnv = match job.spec.runtime_env_yaml.as_deref() {
            Some(yaml) => serde_json::from_value(parse_yaml(yaml)?)
                .map_err(|e| Error::invalid("runtimeEnvYAML", e.to_string()))?,
            None => RuntimeEnv::default(),
        };
        let submission = JobSubmission {
            entrypoint: job.spec.entrypoint.clone(),
            submission_id: Some(id.to_owned()),
            runtime_env,
            entrypoint_num_cpus: job.spec.entrypoint_num_cpus,
            entrypoint_num_gpus: job.spec.entrypoint_num_gpus,
            ..JobSubmission::default()
        }
        .validated()?;
        if let Some(package) = submission.package()
            && !ray.has_package(&head, package).await?
        {
            return Ok(());
        }
        let summary = json!({
            "rayjob": job.metadata.name.as_str(),
            "submission_id": id,
            "entrypoint": submission.entrypoint,
            "package": submission.package(),
        });
        self.audited(cx, AuditAction::JobSubmit, namespace, cluster, summary, || async {
            ray.submit(&head, &submission).await
        })
        .await?;
        tracing::info!(%namespace, rayjob = %job.metadata.name, %cluster, job_id = %id, "a RayJob's job was submitted");
        Ok(())
    }

    /// Keeps what `job` leaves once it has ended: Ray's status, the exit
    /// code and the driver log's tail (none when the job never ran).
    async fn keep_run(
        &self,
        cx: &Context,
        job: &ObservedRayJob,
        cluster: &str,
        kept: &mut KeptRuns,
    ) -> Result<(), Error> {
        let (Some(ledger), Some(uid)) = (&self.run_ledger, job.metadata.uid.as_ref()) else {
            return Ok(());
        };
        let uid = uid.text().into_owned();
        if kept.runs.contains(&uid) {
            return Ok(());
        }
        let (namespace, name) = (job.metadata.namespace.as_str(), job.metadata.name.as_str());
        if ledger.kept(namespace, name, &uid).await?.is_some() {
            kept.runs.insert(uid);
            return Ok(());
        }
        let id = job.job_id().unwrap_or(name).to_owned();
        let head = self.ray_head(cx, &ClusterRef::new(namespace, cluster)).await?;
        let ray = self.ray()?;
        let (status, exit_code, log) = match ray.job(&head, &id).await {
            Ok(info) => (
                info.status.as_str().to_owned(),
                info.driver_exit_code,
                Some(ray.job_log(&head, &id).await?),
            ),
            Err(Error::NotFound { .. }) => ("NOT_SUBMITTED".to_owned(), None, None),
            Err(e) => return Err(e),
        };
        let (tail, truncated) = log.as_deref().map_or((None, false), |l| {
            let (tail, cut) = log_tail(l);
            (Some(tail.to_owned()), cut)
        });
        ledger
            .keep(&KeptRun {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
                uid: uid.clone(),
                job_id: id,
                status,
                exit_code,
                log_tail: tail,
                truncated,
                kept_at: jiff::Timestamp::now().to_string(),
            })
            .await?;
        kept.runs.insert(uid);
        Ok(())
    }
}

/// The most ended RayJobs one round deletes (a backlog after an outage
/// goes over several rounds, never in one burst).
const RETENTION_DELETES_PER_ROUND: usize = 20;

/// How long a RayJob whose retention delete failed is left before the
/// next try (each try is an audit row).
const RETENTION_RETRY_AFTER: std::time::Duration = std::time::Duration::from_secs(600);

/// What is kept of a run whose head was gone before its log could be
/// read (or that never had one): KubeRay's account of it.
fn status_only_run(job: &ObservedRayJob, uid: &str) -> KeptRun {
    let name = job.metadata.name.as_str();
    let status = job
        .status
        .job_status
        .clone()
        .filter(|s| !s.is_empty())
        .or_else(|| job.status.job_deployment_status.clone())
        .unwrap_or_default();
    KeptRun {
        namespace: job.metadata.namespace.to_string(),
        name: name.to_owned(),
        uid: uid.to_owned(),
        job_id: job.job_id().unwrap_or(name).to_owned(),
        status,
        exit_code: None,
        log_tail: None,
        truncated: false,
        kept_at: jiff::Timestamp::now().to_string(),
    }
}

/// Whether `job` ended (or, refused by KubeRay, was made) longer than
/// `retention` before `now`. The leader's clock judges: a retention is
/// days, where a few seconds of skew do not matter.
fn ended_before(job: &ObservedRayJob, now: jiff::Timestamp, retention: std::time::Duration) -> bool {
    let ended = job
        .status
        .end_time
        .as_deref()
        .filter(|t| !t.is_empty())
        .or(job.metadata.creation_timestamp.as_deref())
        .and_then(|t| t.parse::<jiff::Timestamp>().ok());
    let retention = jiff::SignedDuration::try_from(retention).unwrap_or(jiff::SignedDuration::MAX);
    ended.is_some_and(|at| at.checked_add(retention).is_ok_and(|due| due <= now))
}

/// Whether krayne made the object (its `created-by` annotation).
fn made_by_krayne(meta: &crate::domain::ObjectMeta) -> bool {
    meta.annotations.get(manifest::ANNOTATION_CREATED_BY).is_some()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::*;

    fn job(status: serde_json::Value) -> ObservedRayJob {
        serde_json::from_value(json!({
            "metadata": {"name": "r", "namespace": "ml", "creationTimestamp": "2026-11-01T00:00:00Z"},
            "spec": {"entrypoint": "true"},
            "status": status,
        }))
        .unwrap()
    }

    #[test]
    fn a_rayjob_is_due_a_retention_after_its_end_or_when_refused_after_its_making() {
        let now: jiff::Timestamp = "2026-11-29T00:00:00Z".parse().unwrap();
        let week = Duration::from_secs(7 * 24 * 3600);
        let ended = |at: &str| job(json!({"jobDeploymentStatus": "Complete", "endTime": at}));
        assert!(ended_before(&ended("2026-11-21T23:59:59Z"), now, week));
        assert!(!ended_before(&ended("2026-11-22T00:00:01Z"), now, week));
        let refused = job(json!({"jobDeploymentStatus": "ValidationFailed"}));
        assert!(ended_before(&refused, now, week), "no end: from its making");
        assert!(
            !ended_before(&refused, now, Duration::MAX),
            "a retention past time never comes"
        );
    }
}
