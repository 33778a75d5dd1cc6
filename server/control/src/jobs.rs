//! Ray jobs on a cluster, through its head's Jobs API on the dashboard
//! port, reached as services are (direct or port-forward) with krayne's
//! own requests: never a browser's headers (Ray refuses a browser's
//! mutations), Ray's quirks answered cleanly (a duplicate submission id
//! returns the first job; deleting a running job is `failed_precondition`,
//! not Ray's 500; a delete waits out the moment after a job ends in which
//! Ray would bring it back). Viewers list, read and follow logs; editors
//! submit, upload packages, stop and delete, each audited fail-closed.

use std::time::Duration;

use futures::StreamExt as _;
use serde_json::json;

use super::{Context, ControlPlane, heads::check_id, streams::StreamKind};
use crate::domain::{
    Action, ClusterRef, DeleteReply, Error, Job, JobSubmission, LogStream, PackageBody, SubmitReply,
    audit::AuditAction, check_package_name, package_uri,
};

/// How long after a job ends Ray's job monitor may still rewrite it: a
/// delete sooner brings the job back as FAILED (jobs-api.md §8).
const SETTLE_AFTER_END: Duration = Duration::from_millis(2500);

/// A submitted job, and whether this submission made it (else its
/// submission id named a job already there).
#[derive(Debug, Clone)]
pub struct Submitted {
    /// The job.
    pub job: Job,
    /// Whether this request created it.
    pub created: bool,
}

/// What a stop did.
#[derive(Debug, Clone)]
pub struct Stopped {
    /// Whether the job was running and was told to stop (false: it had
    /// ended already).
    pub stopped: bool,
    /// The job as it is now.
    pub job: Job,
}

/// A package uploaded to a head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Uploaded {
    /// Its name (`_ray_pkg_<16 hex>.zip`).
    pub package: String,
    /// The `working_dir` a job names it by.
    pub working_dir: String,
    /// Bytes that reached the head.
    pub bytes: u64,
}

/// What a limited upload has carried ([`limited`]).
#[derive(Debug, Default)]
struct Carried {
    bytes: std::sync::atomic::AtomicU64,
    over: std::sync::atomic::AtomicBool,
}

impl Carried {
    /// Bytes that passed.
    fn bytes(&self) -> u64 {
        self.bytes.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Whether the body went past the limit (and was cut there).
    fn over_limit(&self) -> bool {
        self.over.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// `chunks` cut with an error once they pass `limit` bytes, so the head
/// never gets the whole of an oversized package; [`Carried`] says
/// afterwards whether that is why the upload failed.
fn limited(chunks: PackageBody, limit: u64) -> (PackageBody, std::sync::Arc<Carried>) {
    use std::sync::atomic::Ordering::Relaxed;
    let carried = std::sync::Arc::new(Carried::default());
    let seen = carried.clone();
    let body = chunks
        .map(move |chunk| {
            let chunk = chunk?;
            let total = seen.bytes.fetch_add(chunk.len() as u64, Relaxed) + chunk.len() as u64;
            if total > limit {
                seen.over.store(true, Relaxed);
                return Err(std::io::Error::other("over the package limit"));
            }
            Ok(chunk)
        })
        .boxed();
    (body, carried)
}

impl ControlPlane {
    /// The cluster's jobs, newest first as Ray lists them (viewer).
    pub async fn jobs(&self, cx: &Context, cluster: &ClusterRef) -> Result<Vec<Job>, Error> {
        let (namespace, name) = (cluster.namespace(), cluster.name());
        let target = self.authorize_cluster(cx, AuditAction::JobList, cluster).await?;
        let head = self.ray_head(cx, &target).await?;
        let jobs = self.ray()?.jobs(&head).await?.jobs;
        self.record_read(cx, AuditAction::JobList, Some(namespace), Some(name))
            .await;
        Ok(jobs)
    }

    /// One job (viewer).
    pub async fn job(&self, cx: &Context, cluster: &ClusterRef, id: &str) -> Result<Job, Error> {
        let (namespace, name) = (cluster.namespace(), cluster.name());
        let target = self.authorize_cluster(cx, AuditAction::JobGet, cluster).await?;
        check_id(id)?;
        let head = self.ray_head(cx, &target).await?;
        let job = self.ray()?.job(&head, id).await?;
        self.record_read(cx, AuditAction::JobGet, Some(namespace), Some(name))
            .await;
        Ok(job)
    }

    /// A job's whole log so far (viewer).
    pub async fn job_logs(&self, cx: &Context, cluster: &ClusterRef, id: &str) -> Result<String, Error> {
        let (namespace, name) = (cluster.namespace(), cluster.name());
        let target = self.authorize_cluster(cx, AuditAction::JobLogs, cluster).await?;
        check_id(id)?;
        let head = self.ray_head(cx, &target).await?;
        let logs = self.ray()?.job_log(&head, id).await?;
        self.record_read(cx, AuditAction::JobLogs, Some(namespace), Some(name))
            .await;
        Ok(logs)
    }

    /// A job's log from its start, as it grows, until the job ends
    /// (viewer): Ray's WebSocket tail, batches of whole lines. Ended early,
    /// with an error saying why, as every long-lived stream is (see
    /// `streams`).
    pub async fn follow_job_logs(&self, cx: &Context, cluster: &ClusterRef, id: &str) -> Result<LogStream, Error> {
        let (namespace, name) = (cluster.namespace(), cluster.name());
        let target = self.authorize_cluster(cx, AuditAction::JobLogs, cluster).await?;
        check_id(id)?;
        let head = self.ray_head(cx, &target).await?;
        // Ray answers an unknown id before the upgrade; asking first
        // gives the clean 404.
        let ray = self.ray()?;
        ray.job(&head, id).await?;
        self.record_read(cx, AuditAction::JobLogs, Some(namespace), Some(name))
            .await;
        let lines = ray.follow_job_log(&head, id).await?;
        // A quiet job's log idles out as a tunnel does; a viewer who loses
        // the role, or whose credential expires, stops reading it.
        let guard = self.stream_guard(
            StreamKind::JobLog,
            cx,
            Some(namespace),
            Some(name),
            Some(Action::Read),
            Some(self.settings.tunnels.idle_timeout),
        );
        Ok(guard.guard_items(self.clone(), lines))
    }

    /// Submits a job (editor; audited as `job.submit` with its entrypoint,
    /// package and env var names, never their values). A submission id
    /// that names a job already there returns that job.
    pub async fn submit_job(
        &self,
        cx: &Context,
        cluster: &ClusterRef,
        submission: JobSubmission,
    ) -> Result<Submitted, Error> {
        let (namespace, name) = (cluster.namespace(), cluster.name());
        let target = self.authorize_cluster(cx, AuditAction::JobSubmit, cluster).await?;
        let refused = async |e: Error| {
            self.record_refusal(cx, AuditAction::JobSubmit, Some(namespace), Some(name), &e)
                .await;
            e
        };
        let submission = match submission.validated() {
            Ok(s) => s,
            Err(e) => return Err(refused(e).await),
        };
        let head = match self.ray_head(cx, &target).await {
            Ok(head) => head,
            Err(e) => return Err(refused(e).await),
        };
        let summary = json!({
            "entrypoint": submission.entrypoint,
            "submission_id": submission.submission_id,
            "package": submission.package(),
            "env_vars": submission.runtime_env.env_vars.keys().collect::<Vec<_>>(),
            "pip": submission.runtime_env.pip,
        });
        let status = |s: &Submitted| if s.created { 201 } else { 200 };
        let ray = match self.ray() {
            Ok(ray) => ray,
            Err(e) => return Err(refused(e).await),
        };
        self.audited_with_status(cx, AuditAction::JobSubmit, namespace, name, summary, status, || async {
            if let Some(id) = &submission.submission_id {
                match ray.job(&head, id).await {
                    Ok(job) => return Ok(Submitted { job, created: false }),
                    Err(Error::NotFound { .. }) => {}
                    Err(e) => return Err(e),
                }
            }
            let (id, created) = match ray.submit(&head, &submission).await? {
                SubmitReply::Accepted(id) => (id, true),
                // The same id submitted at the same moment elsewhere.
                SubmitReply::Taken => (submission.submission_id.clone().unwrap_or_default(), false),
            };
            let job = ray.job(&head, &id).await?;
            Ok(Submitted { job, created })
        })
        .await
    }

    /// Asks a job to stop (editor; audited as `job.stop`). A job that has
    /// ended already is not an error: `stopped` is false.
    pub async fn stop_job(&self, cx: &Context, cluster: &ClusterRef, id: &str) -> Result<Stopped, Error> {
        let (namespace, name) = (cluster.namespace(), cluster.name());
        let target = self.authorize_cluster(cx, AuditAction::JobStop, cluster).await?;
        let head = self.job_head(cx, AuditAction::JobStop, &target, id).await?;
        self.audited(
            cx,
            AuditAction::JobStop,
            namespace,
            name,
            json!({"job": id}),
            || async {
                let ray = self.ray()?;
                let stopped = ray.stop_job(&head, id).await?;
                let job = ray.job(&head, id).await?;
                Ok(Stopped { stopped, job })
            },
        )
        .await
    }

    /// Deletes an ended job and its log (editor; audited as `job.delete`);
    /// a job still pending or running is `failed_precondition`.
    pub async fn delete_job(&self, cx: &Context, cluster: &ClusterRef, id: &str) -> Result<(), Error> {
        let (namespace, name) = (cluster.namespace(), cluster.name());
        let target = self.authorize_cluster(cx, AuditAction::JobDelete, cluster).await?;
        let head = self.job_head(cx, AuditAction::JobDelete, &target, id).await?;
        self.audited(
            cx,
            AuditAction::JobDelete,
            namespace,
            name,
            json!({"job": id}),
            || async {
                let ray = self.ray()?;
                let job = ray.job(&head, id).await?;
                if !job.status.is_terminal() {
                    return Err(still_running(&job));
                }
                if let Some(ended) = job.end_time.as_deref().and_then(|t| t.parse::<jiff::Timestamp>().ok()) {
                    let since = jiff::Timestamp::now().duration_since(ended);
                    let settle = jiff::SignedDuration::try_from(SETTLE_AFTER_END).unwrap_or_default();
                    if since < settle {
                        let wait = Duration::try_from(settle - since).unwrap_or_default();
                        tokio::time::sleep(wait.min(SETTLE_AFTER_END)).await;
                    }
                }
                match ray.delete_job(&head, id).await? {
                    DeleteReply::Deleted => Ok(()),
                    DeleteReply::NotEnded => Err(still_running(&job)),
                }
            },
        )
        .await
    }

    /// Whether the head holds working-dir package `package` (editor; it
    /// keeps a package it was asked about for Ray's 10 minutes).
    pub async fn has_package(&self, cx: &Context, cluster: &ClusterRef, package: &str) -> Result<bool, Error> {
        let target = self.authorize_cluster(cx, AuditAction::PackageUpload, cluster).await?;
        check_package_name(package).map_err(|why| Error::invalid("package", why))?;
        let head = self.ray_head(cx, &target).await?;
        self.ray()?.has_package(&head, package).await
    }

    /// Uploads a working-dir package to cluster `name`'s head (editor),
    /// streamed as it arrives. One over the server's package limit is
    /// refused (`PayloadTooLarge`): by its declared `size` before the head
    /// sees a byte, or when the stream passes the limit (the head then
    /// keeps nothing).
    pub async fn upload_package(
        &self,
        cx: &Context,
        cluster: &ClusterRef,
        package: &str,
        size: Option<u64>,
        body: PackageBody,
    ) -> Result<Uploaded, Error> {
        let (namespace, name) = (cluster.namespace(), cluster.name());
        let target = self.authorize_cluster(cx, AuditAction::PackageUpload, cluster).await?;
        let limit = self.settings.package_limit;
        let too_large = || Error::PayloadTooLarge {
            what: "package",
            limit_bytes: limit,
        };
        let checked = match check_package_name(package) {
            Err(why) => Err(Error::invalid("package", why)),
            Ok(()) if size.is_some_and(|s| s > limit) => Err(too_large()),
            Ok(()) => Ok(()),
        };
        let head = match checked {
            Ok(()) => self.ray_head(cx, &target).await,
            Err(e) => Err(e),
        };
        let head = match head {
            Ok(head) => head,
            Err(e) => {
                self.record_refusal(cx, AuditAction::PackageUpload, Some(namespace), Some(name), &e)
                    .await;
                return Err(e);
            }
        };
        let (body, carried) = limited(body, limit);
        let summary = json!({"package": package, "bytes": size});
        self.audited(cx, AuditAction::PackageUpload, namespace, name, summary, || async {
            let uploaded = self.ray()?.upload_package(&head, package, size, body).await;
            if carried.over_limit() {
                return Err(too_large());
            }
            uploaded
        })
        .await?;
        Ok(Uploaded {
            package: package.to_owned(),
            working_dir: package_uri(package),
            bytes: carried.bytes(),
        })
    }
}

fn still_running(job: &Job) -> Error {
    Error::FailedPrecondition(format!(
        "job '{}' is {}: stop it first (only a job that has ended can be deleted)",
        job.id,
        job.status.as_str()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_running_job_cannot_be_deleted_and_says_why() {
        let job = Job {
            id: "lc-del".into(),
            submission_id: Some("lc-del".into()),
            ray_job_id: None,
            kind: "SUBMISSION".into(),
            entrypoint: "sleep 60".into(),
            status: crate::domain::JobStatus::Running,
            message: None,
            error_type: None,
            start_time: None,
            end_time: None,
            driver_exit_code: None,
            metadata: Default::default(),
        };
        let e = still_running(&job);
        assert_eq!(e.code(), "failed_precondition");
        assert!(e.to_string().contains("RUNNING"), "{e}");
    }
}
