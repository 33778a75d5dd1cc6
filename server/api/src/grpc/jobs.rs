//! `krayne.v1.JobService`: Ray jobs over the same use cases as REST.

use std::pin::Pin;

use futures::{Stream, StreamExt as _};
use krayne_proto::v1::{self as pb, job_service_server, upload_package_request};
use tonic::{Request, Response, Status, Streaming};

use super::{convert, handler::Grpc, status::to_status};
use crate::domain::{ClusterRef, Error, Job, JobStatus, JobSubmission, RuntimeEnv};

fn job_message(j: Job) -> pb::Job {
    let status = match j.status {
        JobStatus::Pending => pb::JobStatus::Pending,
        JobStatus::Running => pb::JobStatus::Running,
        JobStatus::Stopped => pb::JobStatus::Stopped,
        JobStatus::Succeeded => pb::JobStatus::Succeeded,
        JobStatus::Failed => pb::JobStatus::Failed,
    };
    pb::Job {
        id: j.id,
        submission_id: j.submission_id.unwrap_or_default(),
        ray_job_id: j.ray_job_id.unwrap_or_default(),
        kind: j.kind,
        entrypoint: j.entrypoint,
        status: status.into(),
        message: j.message.unwrap_or_default(),
        error_type: j.error_type.unwrap_or_default(),
        start_time: convert::timestamp(j.start_time.as_deref()),
        end_time: convert::timestamp(j.end_time.as_deref()),
        driver_exit_code: j.driver_exit_code,
        metadata: j.metadata.into_iter().collect(),
    }
}

fn submission(r: pb::SubmitJobRequest) -> JobSubmission {
    let env = r.runtime_env.unwrap_or_default();
    JobSubmission {
        entrypoint: r.entrypoint,
        submission_id: (!r.submission_id.is_empty()).then_some(r.submission_id),
        runtime_env: RuntimeEnv {
            working_dir: (!env.working_dir.is_empty()).then_some(env.working_dir),
            env_vars: env.env_vars.into_iter().collect(),
            pip: env.pip,
        },
        metadata: r.metadata.into_iter().collect(),
        entrypoint_num_cpus: r.entrypoint_num_cpus,
        entrypoint_num_gpus: r.entrypoint_num_gpus,
        entrypoint_memory: r.entrypoint_memory,
    }
}

type LogChunks = Pin<Box<dyn Stream<Item = Result<pb::JobLogChunk, Status>> + Send>>;

#[tonic::async_trait]
impl job_service_server::JobService for Grpc {
    async fn submit_job(&self, req: Request<pb::SubmitJobRequest>) -> Result<Response<pb::SubmitJobResponse>, Status> {
        let cx = self.context(&req)?;
        let r = req.into_inner();
        let (namespace, name) = (r.namespace.clone(), r.name.clone());
        let submitted = self
            .plane
            .submit_job(&cx, &ClusterRef::new(&namespace, &name), submission(r))
            .await
            .map_err(to_status)?;
        Ok(Response::new(pb::SubmitJobResponse {
            job: Some(job_message(submitted.job)),
            created: submitted.created,
        }))
    }

    async fn list_jobs(&self, req: Request<pb::ListJobsRequest>) -> Result<Response<pb::ListJobsResponse>, Status> {
        let cx = self.context(&req)?;
        let r = req.into_inner();
        let jobs = self
            .plane
            .jobs(&cx, &ClusterRef::new(&r.namespace, &r.name))
            .await
            .map_err(to_status)?;
        Ok(Response::new(pb::ListJobsResponse {
            jobs: jobs.into_iter().map(job_message).collect(),
        }))
    }

    async fn get_job(&self, req: Request<pb::JobRef>) -> Result<Response<pb::Job>, Status> {
        let cx = self.context(&req)?;
        let r = req.into_inner();
        let job = self
            .plane
            .job(&cx, &ClusterRef::new(&r.namespace, &r.name), &r.id)
            .await
            .map_err(to_status)?;
        Ok(Response::new(job_message(job)))
    }

    async fn get_job_logs(&self, req: Request<pb::JobRef>) -> Result<Response<pb::JobLogs>, Status> {
        let cx = self.context(&req)?;
        let r = req.into_inner();
        let logs = self
            .plane
            .job_logs(&cx, &ClusterRef::new(&r.namespace, &r.name), &r.id)
            .await
            .map_err(to_status)?;
        Ok(Response::new(pb::JobLogs { logs }))
    }

    type TailJobLogsStream = LogChunks;

    async fn tail_job_logs(&self, req: Request<pb::JobRef>) -> Result<Response<Self::TailJobLogsStream>, Status> {
        let cx = self.context(&req)?;
        let r = req.into_inner();
        let lines = self
            .plane
            .follow_job_logs(&cx, &ClusterRef::new(&r.namespace, &r.name), &r.id)
            .await
            .map_err(to_status)?;
        let chunks = lines.map(|chunk| chunk.map(|text| pb::JobLogChunk { text }).map_err(to_status));
        Ok(Response::new(Box::pin(chunks)))
    }

    async fn stop_job(&self, req: Request<pb::JobRef>) -> Result<Response<pb::StopJobResponse>, Status> {
        let cx = self.context(&req)?;
        let r = req.into_inner();
        let stopped = self
            .plane
            .stop_job(&cx, &ClusterRef::new(&r.namespace, &r.name), &r.id)
            .await
            .map_err(to_status)?;
        Ok(Response::new(pb::StopJobResponse {
            stopped: stopped.stopped,
            job: Some(job_message(stopped.job)),
        }))
    }

    async fn delete_job(&self, req: Request<pb::JobRef>) -> Result<Response<pb::DeleteJobResponse>, Status> {
        let cx = self.context(&req)?;
        let r = req.into_inner();
        self.plane
            .delete_job(&cx, &ClusterRef::new(&r.namespace, &r.name), &r.id)
            .await
            .map_err(to_status)?;
        Ok(Response::new(pb::DeleteJobResponse {}))
    }

    async fn has_package(&self, req: Request<pb::PackageRef>) -> Result<Response<pb::HasPackageResponse>, Status> {
        let cx = self.context(&req)?;
        let r = req.into_inner();
        let present = self
            .plane
            .has_package(&cx, &ClusterRef::new(&r.namespace, &r.name), &r.package)
            .await
            .map_err(to_status)?;
        Ok(Response::new(pb::HasPackageResponse { present }))
    }

    async fn upload_package(
        &self,
        req: Request<Streaming<pb::UploadPackageRequest>>,
    ) -> Result<Response<pb::UploadPackageResponse>, Status> {
        let cx = self.context(&req)?;
        let mut inbound = req.into_inner();
        let first = tokio::time::timeout(self.body_timeout, inbound.message()).await;
        let target = match first {
            Ok(Ok(Some(pb::UploadPackageRequest {
                kind: Some(upload_package_request::Kind::Package(target)),
            }))) => target,
            Ok(Ok(_)) => {
                return Err(to_status(Error::invalid(
                    "package",
                    "the first message must name the package",
                )));
            }
            Ok(Err(status)) => return Err(status),
            Err(_) => {
                return Err(Status::deadline_exceeded(format!(
                    "no first message within {} s",
                    self.body_timeout.as_secs()
                )));
            }
        };
        let chunks = inbound.map(|message| match message {
            Ok(pb::UploadPackageRequest {
                kind: Some(upload_package_request::Kind::Data(data)),
            }) => Ok(bytes::Bytes::from(data)),
            Ok(_) => Err(std::io::Error::other("every message after the first carries data")),
            Err(status) => Err(std::io::Error::other(status.message().to_owned())),
        });
        let uploaded = self
            .plane
            .upload_package(
                &cx,
                &ClusterRef::new(&target.namespace, &target.name),
                &target.package,
                None,
                chunks.boxed(),
            )
            .await
            .map_err(to_status)?;
        Ok(Response::new(pb::UploadPackageResponse {
            bytes: uploaded.bytes,
            working_dir: uploaded.working_dir,
        }))
    }
}
