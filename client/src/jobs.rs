//! Ray jobs through krayne (`krayne.v1.JobService`): submit one (its
//! working dir packed and named as Ray's client does, uploaded only when
//! the head does not have it yet), list, read, follow logs, stop, delete
//! and wait.

use std::{collections::BTreeMap, path::PathBuf, time::Duration};

use futures::StreamExt as _;
use tonic::Code;

use crate::{
    Client, ClientError,
    package::{self, PackOptions},
    proto::{self, upload_package_request},
};

/// Largest working dir uploaded (Ray's dashboard takes at most 100 MiB).
pub const MAX_PACKAGE: u64 = 100 * 1024 * 1024;
/// Bytes in one upload message (well under the server's message limit).
const UPLOAD_CHUNK: usize = 256 * 1024;

/// A job to submit ([`Client::submit_job`]).
#[derive(Debug, Clone, Default)]
pub struct SubmitJob {
    entrypoint: String,
    submission_id: Option<String>,
    working_dir: Option<PathBuf>,
    pack: Option<PackOptions>,
    env_vars: BTreeMap<String, String>,
    pip: Vec<String>,
    metadata: BTreeMap<String, String>,
    cpus: Option<f64>,
    gpus: Option<f64>,
    memory: Option<u64>,
}

impl SubmitJob {
    /// A job that runs `entrypoint` (a shell command) on the head.
    pub fn new(entrypoint: impl Into<String>) -> Self {
        Self {
            entrypoint: entrypoint.into(),
            ..Self::default()
        }
    }

    /// An id of your choosing: submitting it again returns the first job.
    pub fn submission_id(mut self, id: impl Into<String>) -> Self {
        self.submission_id = Some(id.into());
        self
    }

    /// A local directory to run in: packed as Ray packs it (its default
    /// excludes, `.gitignore`, `.rayignore`) and uploaded unless the head
    /// has it already.
    pub fn working_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.working_dir = Some(dir.into());
        self
    }

    /// What to leave out of the working dir (default: Ray's, read from
    /// the environment as Ray's client does).
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

    /// A label kept with the job.
    pub fn metadata(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.metadata.insert(key.into(), value.into());
        self
    }

    /// CPUs reserved for the entrypoint.
    pub fn entrypoint_cpus(mut self, cpus: f64) -> Self {
        self.cpus = Some(cpus);
        self
    }

    /// GPUs reserved for the entrypoint.
    pub fn entrypoint_gpus(mut self, gpus: f64) -> Self {
        self.gpus = Some(gpus);
        self
    }

    /// Memory reserved for the entrypoint, in bytes.
    pub fn entrypoint_memory(mut self, bytes: u64) -> Self {
        self.memory = Some(bytes);
        self
    }
}

/// A submitted job.
#[derive(Debug, Clone)]
pub struct SubmittedJob {
    /// The job.
    pub job: proto::Job,
    /// Whether this submission created it (false: its submission id named
    /// a job already there).
    pub created: bool,
    /// The working dir's package, if it had one.
    pub package: Option<String>,
    /// Whether the package was uploaded (false: the head had it).
    pub uploaded: bool,
}

/// Packs `dir` as Ray does (off the async runtime): what a caller may show
/// before uploading it — its files, their size, the paths left out. A dir
/// over [`MAX_PACKAGE`] is refused; an error names the path it met.
pub async fn pack_working_dir(dir: &std::path::Path, options: &PackOptions) -> Result<package::Package, ClientError> {
    let (dir, options) = (dir.to_owned(), options.clone());
    tokio::task::spawn_blocking(move || package::pack(&dir, &options, MAX_PACKAGE))
        .await
        .map_err(|e| ClientError::new(Code::Internal, format!("packing the working dir: {e}")))?
        .map_err(|e| ClientError::new(Code::InvalidArgument, e.to_string()))
}

/// Whether a job has ended.
pub fn is_terminal(job: &proto::Job) -> bool {
    matches!(
        job.status(),
        proto::JobStatus::Stopped | proto::JobStatus::Succeeded | proto::JobStatus::Failed
    )
}

pub(crate) fn job_ref(namespace: &str, name: &str, id: &str) -> proto::JobRef {
    proto::JobRef {
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        id: id.to_owned(),
    }
}

impl Client {
    /// Packs `dir` as Ray does and uploads it to cluster `name`'s head
    /// unless it is there already (editor); returns the package's name
    /// and whether it was uploaded. `progress` hears (bytes sent, total)
    /// as the upload goes. A dir over [`MAX_PACKAGE`] is refused before a
    /// byte is sent.
    pub async fn upload_working_dir(
        &self,
        namespace: &str,
        name: &str,
        dir: &std::path::Path,
        options: &PackOptions,
        progress: impl Fn(u64, u64) + Send + 'static,
    ) -> Result<(String, bool), ClientError> {
        let packed = pack_working_dir(dir, options).await?;
        self.upload_packed(namespace, name, packed, progress).await
    }

    /// Uploads a packed working dir to cluster `name`'s head unless it is
    /// there already (editor); returns its name and whether it was
    /// uploaded.
    pub async fn upload_packed(
        &self,
        namespace: &str,
        name: &str,
        packed: package::Package,
        progress: impl Fn(u64, u64) + Send + 'static,
    ) -> Result<(String, bool), ClientError> {
        let reference = proto::PackageRef {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            package: packed.name.clone(),
        };
        let present = retrying!(self, jobs_service, has_package, reference)?
            .into_inner()
            .present;
        if present {
            return Ok((packed.name, false));
        }
        let total = packed.zip.len() as u64;
        let zip = bytes::Bytes::from(packed.zip);
        let first = proto::UploadPackageRequest {
            kind: Some(upload_package_request::Kind::Package(reference)),
        };
        let chunks: Vec<bytes::Bytes> = (0..zip.len())
            .step_by(UPLOAD_CHUNK)
            .map(|start| zip.slice(start..(start + UPLOAD_CHUNK).min(zip.len())))
            .collect();
        let mut sent = 0u64;
        let data = futures::stream::iter(chunks).map(move |chunk| {
            sent += chunk.len() as u64;
            progress(sent, total);
            proto::UploadPackageRequest {
                kind: Some(upload_package_request::Kind::Data(chunk.to_vec())),
            }
        });
        let messages = futures::stream::once(async { first }).chain(data);
        self.jobs_service().upload_package(messages).await?;
        Ok((packed.name, true))
    }

    /// Submits a job to cluster `name` (editor), uploading its working dir
    /// first when it has one the head lacks. Not retried: a submission
    /// without a submission id that reached the server would run twice.
    pub async fn submit_job(&self, namespace: &str, name: &str, job: SubmitJob) -> Result<SubmittedJob, ClientError> {
        let (package, uploaded) = match &job.working_dir {
            Some(dir) => {
                let options = job.pack.clone().unwrap_or_else(PackOptions::from_env);
                let (package, uploaded) = self
                    .upload_working_dir(namespace, name, dir, &options, |_, _| {})
                    .await?;
                (Some(package), uploaded)
            }
            None => (None, false),
        };
        self.submit_prepared(namespace, name, job, package, uploaded).await
    }

    /// Submits a job whose working dir (if any) is already on the head as
    /// `package`.
    pub async fn submit_prepared(
        &self,
        namespace: &str,
        name: &str,
        job: SubmitJob,
        package: Option<String>,
        uploaded: bool,
    ) -> Result<SubmittedJob, ClientError> {
        let request = proto::SubmitJobRequest {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            entrypoint: job.entrypoint,
            submission_id: job.submission_id.unwrap_or_default(),
            runtime_env: Some(proto::RuntimeEnv {
                working_dir: package.clone().unwrap_or_default(),
                env_vars: job.env_vars.into_iter().collect(),
                pip: job.pip,
            }),
            metadata: job.metadata.into_iter().collect(),
            entrypoint_num_cpus: job.cpus,
            entrypoint_num_gpus: job.gpus,
            entrypoint_memory: job.memory,
        };
        let response = self
            .jobs_service()
            .submit_job(self.request(request))
            .await?
            .into_inner();
        let job = response
            .job
            .ok_or_else(|| ClientError::new(Code::Internal, "the server sent no job"))?;
        Ok(SubmittedJob {
            job,
            created: response.created,
            package,
            uploaded,
        })
    }

    /// Cluster `name`'s jobs (viewer).
    pub async fn jobs(&self, namespace: &str, name: &str) -> Result<Vec<proto::Job>, ClientError> {
        let message = proto::ListJobsRequest {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        };
        Ok(retrying!(self, jobs_service, list_jobs, message)?.into_inner().jobs)
    }

    /// One job (viewer).
    pub async fn job(&self, namespace: &str, name: &str, id: &str) -> Result<proto::Job, ClientError> {
        let message = job_ref(namespace, name, id);
        Ok(retrying!(self, jobs_service, get_job, message)?.into_inner())
    }

    /// A job's whole log so far (viewer).
    pub async fn job_logs(&self, namespace: &str, name: &str, id: &str) -> Result<String, ClientError> {
        let message = job_ref(namespace, name, id);
        Ok(retrying!(self, jobs_service, get_job_logs, message)?.into_inner().logs)
    }

    /// Asks a job to stop (editor); `stopped` is false when it had ended.
    pub async fn stop_job(&self, namespace: &str, name: &str, id: &str) -> Result<proto::StopJobResponse, ClientError> {
        let message = job_ref(namespace, name, id);
        Ok(retrying!(self, jobs_service, stop_job, message)?.into_inner())
    }

    /// Deletes a job that has ended (editor).
    pub async fn delete_job(&self, namespace: &str, name: &str, id: &str) -> Result<(), ClientError> {
        self.jobs_service()
            .delete_job(self.request(job_ref(namespace, name, id)))
            .await?;
        Ok(())
    }

    /// Waits until a job has ended, at most `timeout`; returns it.
    pub async fn wait_job(
        &self,
        namespace: &str,
        name: &str,
        id: &str,
        timeout: Duration,
    ) -> Result<proto::Job, ClientError> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let job = self.job(namespace, name, id).await?;
            if is_terminal(&job) {
                return Ok(job);
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(ClientError::new(
                    Code::DeadlineExceeded,
                    format!(
                        "job {id} is still {} after {} s",
                        job.status().as_str_name(),
                        timeout.as_secs()
                    ),
                ));
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}
