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
//!
//! Fenced: only RayJobs krayne made (its `created-by` annotation, copied by
//! KubeRay to their clusters), in `InteractiveMode`, with a job id; found
//! through the watch cache's clusters and read from its RayJobs, so a
//! round asks Kubernetes nothing when nothing is to be done.

use std::{
    collections::{BTreeMap, HashSet},
    sync::Arc,
};

use serde_json::json;

use super::{Context, ControlPlane};
use crate::{
    domain::{
        ClusterRef, Error, JobSubmission, KeptRun, ObservedCluster, ObservedRayJob, RunState, RuntimeEnv, Uid,
        audit::AuditAction, log_tail, parse_yaml,
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

/// Whether krayne made the object (its `created-by` annotation).
fn made_by_krayne(meta: &crate::domain::ObjectMeta) -> bool {
    meta.annotations.get(manifest::ANNOTATION_CREATED_BY).is_some()
}
