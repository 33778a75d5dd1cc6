//! Jobs with a cluster of their own (`krayne.v1.RayJobService`): run a
//! command on a fresh cluster shaped as you say, follow its log, get its
//! exit code, and leave nothing running ([`Client::run_job`]).

use std::{collections::BTreeMap, path::PathBuf, time::Duration};

use futures::{Stream, StreamExt as _, stream::BoxStream};
use tonic::Code;

use crate::{
    Client, ClientError, WatchFrom,
    package::{self, PackOptions},
    proto,
};

/// How often a handle asks how its RayJob is doing, from a server that
/// cannot watch.
const POLL: Duration = Duration::from_millis(500);

/// Where a handle hears how its RayJob is doing: the server's watch of
/// the namespace's RayJobs (one stream, served from the server's memory),
/// or, from a server that cannot watch (or a watch that broke for good),
/// a get every [`POLL`].
struct Changes {
    watch: Option<BoxStream<'static, Result<proto::WatchRayJobsResponse, ClientError>>>,
    asked: bool,
}

impl Changes {
    /// The RayJob as it is next.
    async fn next(&mut self, handle: &RunHandle) -> Result<proto::RayJob, ClientError> {
        while let Some(watch) = self.watch.as_mut() {
            match watch.next().await {
                Some(Ok(event)) => {
                    let deleted = event.r#type() == proto::WatchEventType::Deleted;
                    let Some(rayjob) = event.rayjob.filter(|j| j.name == handle.name) else {
                        continue;
                    };
                    if deleted {
                        return Err(ClientError::new(
                            Code::NotFound,
                            format!("rayjob {} was deleted", handle.name),
                        ));
                    }
                    return Ok(rayjob);
                }
                Some(Err(_)) | None => self.watch = None,
            }
        }
        if self.asked {
            tokio::time::sleep(POLL).await;
        }
        self.asked = true;
        handle.status().await
    }
}

/// A job to run on a cluster of its own ([`Client::run_job`]).
#[derive(Debug, Clone, Default)]
pub struct RunJob {
    name: String,
    entrypoint: String,
    cluster_yaml: Option<String>,
    working_dir: Option<PathBuf>,
    pack: Option<PackOptions>,
    env_vars: BTreeMap<String, String>,
    pip: Vec<String>,
    ttl: Option<Duration>,
    deadline: Option<Duration>,
    keep_cluster: bool,
    queue: Option<bool>,
}

impl RunJob {
    /// A RayJob `name` (a DNS-1035 label of at most 47 characters) that
    /// runs `entrypoint` (a shell command) on its cluster's head.
    pub fn new(name: impl Into<String>, entrypoint: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            entrypoint: entrypoint.into(),
            ..Self::default()
        }
    }

    /// The cluster, a Krayne config document (YAML or JSON) as `create`
    /// takes it, without `name` and `namespace` (default: Krayne's
    /// default cluster).
    pub fn cluster_yaml(mut self, yaml: impl Into<String>) -> Self {
        self.cluster_yaml = Some(yaml.into());
        self
    }

    /// A local directory to run in: packed as Ray packs it and uploaded to
    /// the job's cluster once its head serves.
    pub fn working_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.working_dir = Some(dir.into());
        self
    }

    /// What to leave out of the working dir (default: Ray's).
    pub fn pack_options(mut self, options: PackOptions) -> Self {
        self.pack = Some(options);
        self
    }

    /// An environment variable of the entrypoint.
    pub fn env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.env_vars.insert(name.into(), value.into());
        self
    }

    /// A Python package to install first (a pip requirement).
    pub fn pip(mut self, requirement: impl Into<String>) -> Self {
        self.pip.push(requirement.into());
        self
    }

    /// How long the cluster outlives the job (at least 30 s; default: the
    /// team's, else 5 minutes).
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
    }

    /// Longest the whole run may take, its cluster's start included.
    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// Keep the cluster once the job has ended (delete the RayJob to
    /// remove it).
    pub fn keep_cluster(mut self) -> Self {
        self.keep_cluster = true;
        self
    }

    /// Whether to wait in the namespace's line when the job's cluster
    /// does not fit its quota (default: as the namespace's queueing
    /// policy says). A run that waits is `RUN_STATE_QUEUED` with its
    /// place until admitted; [`RunHandle::started`] waits through it.
    pub fn queue(mut self, queue: bool) -> Self {
        self.queue = Some(queue);
        self
    }
}

/// A RayJob [`Client::run_job`] created: follow it, await it, stop it.
#[derive(Debug, Clone)]
pub struct RunHandle {
    client: Client,
    namespace: String,
    name: String,
    package: Option<package::Package>,
}

/// How a run ended.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    /// The RayJob as it ended.
    pub rayjob: proto::RayJob,
    /// The job's exit code, when it exited (none when it was stopped or
    /// never ran).
    pub exit_code: Option<i64>,
}

impl RunOutcome {
    /// Whether the job succeeded.
    pub fn succeeded(&self) -> bool {
        self.rayjob.state() == proto::RunState::Succeeded
    }
}

/// Whether a RayJob has ended (it will not run again).
pub fn run_is_over(rayjob: &proto::RayJob) -> bool {
    use proto::RunState::{Failed, Invalid, Stopped, Succeeded};
    matches!(rayjob.state(), Succeeded | Failed | Stopped | Invalid)
}

impl Client {
    /// Creates a RayJob in `namespace` that runs `job` on a cluster of its
    /// own: the working dir is packed first (so a bad one fails before
    /// anything is made), the cluster is charged to the namespace's quota
    /// at once. Not retried: a create that reached the server before the
    /// connection broke would fail as a duplicate.
    pub async fn run_job(&self, namespace: &str, job: RunJob) -> Result<RunHandle, ClientError> {
        let package = match &job.working_dir {
            Some(dir) => {
                let options = job.pack.clone().unwrap_or_else(PackOptions::from_env);
                Some(crate::pack_working_dir(dir, &options).await?)
            }
            None => None,
        };
        let runtime_env = proto::RuntimeEnv {
            working_dir: package.as_ref().map(|p| p.name.clone()).unwrap_or_default(),
            env_vars: job.env_vars.into_iter().collect(),
            pip: job.pip,
        };
        let seconds = |d: Duration| d.as_secs().max(1);
        let request = proto::CreateRayJobRequest {
            namespace: namespace.to_owned(),
            name: job.name.clone(),
            cluster_yaml: job.cluster_yaml.unwrap_or_default(),
            entrypoint: job.entrypoint,
            runtime_env: Some(runtime_env),
            shutdown_after_job_finishes: job.keep_cluster.then_some(false),
            ttl_seconds_after_finished: job.ttl.map(|d| u32::try_from(seconds(d)).unwrap_or(u32::MAX)),
            active_deadline_seconds: job.deadline.map(seconds),
            queue: job.queue,
            ..proto::CreateRayJobRequest::default()
        };
        self.rayjobs_service().create_ray_job(self.request(request)).await?;
        Ok(RunHandle {
            client: self.clone(),
            namespace: namespace.to_owned(),
            name: job.name,
            package,
        })
    }

    /// A handle on RayJob `namespace/name`, made earlier (by
    /// [`Client::run_job`] or `krayne run --detach`).
    pub fn run_handle(&self, namespace: &str, name: &str) -> RunHandle {
        RunHandle {
            client: self.clone(),
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            package: None,
        }
    }

    /// One RayJob.
    pub async fn rayjob(&self, namespace: &str, name: &str) -> Result<proto::RayJob, ClientError> {
        let reference = proto::RayJobRef {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        };
        Ok(retrying!(self, rayjobs_service, get_ray_job, reference)?.into_inner())
    }

    /// A namespace's RayJobs, by name.
    pub async fn rayjobs(&self, namespace: &str) -> Result<Vec<proto::RayJob>, ClientError> {
        let request = proto::ListRayJobsRequest {
            namespace: namespace.to_owned(),
        };
        Ok(retrying!(self, rayjobs_service, list_ray_jobs, request)?
            .into_inner()
            .rayjobs)
    }

    /// A RayJob's driver log: its head's while its cluster lives, the last
    /// MiB krayne kept once the job ended.
    pub async fn rayjob_logs(&self, namespace: &str, name: &str) -> Result<String, ClientError> {
        let reference = proto::RayJobRef {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        };
        Ok(retrying!(self, rayjobs_service, get_ray_job_logs, reference)?
            .into_inner()
            .logs)
    }

    /// Deletes a RayJob: its job stops and its cluster goes.
    pub async fn delete_rayjob(&self, namespace: &str, name: &str) -> Result<(), ClientError> {
        let reference = proto::RayJobRef {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        };
        retrying!(self, rayjobs_service, delete_ray_job, reference)?;
        Ok(())
    }
}

impl RunHandle {
    /// The RayJob's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The RayJob as it is now.
    pub async fn status(&self) -> Result<proto::RayJob, ClientError> {
        self.client.rayjob(&self.namespace, &self.name).await
    }

    /// How the RayJob is doing from now on, as it changes.
    async fn changes(&self) -> Changes {
        let from = WatchFrom {
            send_initial_events: true,
            ..WatchFrom::default()
        };
        let watch = self.client.watch_rayjobs(Some(&self.namespace), from).await;
        Changes {
            watch: watch.ok().map(|w| w.boxed()),
            asked: false,
        }
    }

    /// Waits until the job runs (or has ended already), through its
    /// namespace's line when it waits there, uploading the working dir to
    /// the job's cluster once its head serves; `seen` is told of each new
    /// state (and each new place in line). Fails when the run ends before it started
    /// (KubeRay refused it, a deadline passed).
    pub async fn started(&self, mut seen: impl FnMut(&proto::RayJob)) -> Result<proto::RayJob, ClientError> {
        let mut uploaded = self.package.is_none();
        let mut last = None;
        let mut changes = self.changes().await;
        loop {
            let rayjob = changes.next(self).await?;
            let now = (rayjob.state, rayjob.cluster_status.clone(), rayjob.queue_position);
            if last.as_ref() != Some(&now) {
                seen(&rayjob);
                last = Some(now);
            }
            match rayjob.state() {
                proto::RunState::Running => return Ok(rayjob),
                _ if run_is_over(&rayjob) => return Ok(rayjob),
                // Out of the line and held (its wait passed the namespace's
                // `max_wait`): nothing moves it on.
                proto::RunState::Suspended => {
                    return Err(ClientError::new(
                        Code::FailedPrecondition,
                        format!(
                            "rayjob {} is held suspended and waits in no line (a wait past its namespace's \
                             max_wait ends so): delete it, or run it again",
                            self.name
                        ),
                    ));
                }
                proto::RunState::Submitting if !uploaded && rayjob.cluster_status == "ready" => {
                    if let Some(package) = &self.package {
                        self.client
                            .upload_packed(&self.namespace, &rayjob.cluster, package.clone(), |_, _| {})
                            .await?;
                    }
                    uploaded = true;
                }
                _ => {}
            }
        }
    }

    /// The driver's log from its start as it grows, until the job ends
    /// (call once [`Self::started`] has returned).
    pub async fn logs(&self) -> Result<impl Stream<Item = Result<String, ClientError>> + Unpin + use<>, ClientError> {
        let rayjob = self.status().await?;
        if rayjob.cluster_status.is_empty() || rayjob.job_id.is_empty() {
            // Its cluster is gone: the log krayne kept, whole.
            let log = self.client.rayjob_logs(&self.namespace, &self.name).await?;
            return Ok(futures::stream::once(async move { Ok(log) }).boxed());
        }
        let tail = self
            .client
            .tail_job_logs(&self.namespace, &rayjob.cluster, &rayjob.job_id)
            .await?;
        Ok(tail.boxed())
    }

    /// Waits until the run has ended and its exit code is known (or
    /// `timeout` passes: `DEADLINE_EXCEEDED`).
    pub async fn wait(&self, timeout: Duration) -> Result<RunOutcome, ClientError> {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut changes = self.changes().await;
        // Past the deadline, the get below says how it is.
        while let Ok(rayjob) = tokio::time::timeout_at(deadline, changes.next(self)).await {
            if run_is_over(&rayjob?) {
                break;
            }
        }
        // Ended: its exit code comes with a get, a moment after the end.
        let mut over_since: Option<tokio::time::Instant> = None;
        loop {
            let rayjob = self.status().await?;
            if run_is_over(&rayjob) {
                // A job that exited has its code a moment after it ends;
                // one stopped or never run has none.
                let settled =
                    over_since.get_or_insert_with(tokio::time::Instant::now).elapsed() > Duration::from_secs(5);
                let stopped = matches!(rayjob.state(), proto::RunState::Stopped | proto::RunState::Invalid);
                if rayjob.exit_code.is_some() || stopped || settled {
                    let exit_code = rayjob.exit_code;
                    return Ok(RunOutcome { rayjob, exit_code });
                }
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(ClientError::new(
                    Code::DeadlineExceeded,
                    format!(
                        "rayjob {} is still {} after {} s",
                        self.name,
                        rayjob.state().as_str_name(),
                        timeout.as_secs()
                    ),
                ));
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Stops the job and removes its cluster (deletes the RayJob).
    pub async fn stop(&self) -> Result<(), ClientError> {
        self.client.delete_rayjob(&self.namespace, &self.name).await
    }
}
