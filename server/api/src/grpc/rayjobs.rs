//! `krayne.v1.RayJobService`: jobs with a cluster of their own, over the
//! same use cases as REST.

use std::pin::Pin;

use futures::{Stream, StreamExt as _};
use krayne_proto::v1::{self as pb, ray_job_service_server};
use serde_json::{Map, Value, json};
use tonic::{Request, Response, Status};

use super::{convert, handler::Grpc, status::to_status};
use crate::{
    control::RunInput,
    domain::{ClusterRef, Error, RayJobInfo, RunState, parse_yaml},
};

fn state(s: RunState) -> pb::RunState {
    match s {
        RunState::Starting => pb::RunState::Starting,
        RunState::Submitting => pb::RunState::Submitting,
        RunState::Running => pb::RunState::Running,
        RunState::Succeeded => pb::RunState::Succeeded,
        RunState::Failed => pb::RunState::Failed,
        RunState::Stopped => pb::RunState::Stopped,
        RunState::Invalid => pb::RunState::Invalid,
        RunState::Suspended => pb::RunState::Suspended,
        RunState::Queued => pb::RunState::Queued,
    }
}

fn rayjob_message(j: RayJobInfo) -> pb::RayJob {
    pb::RayJob {
        name: j.name,
        namespace: j.namespace,
        state: state(j.state).into(),
        entrypoint: j.entrypoint,
        job_id: j.job_id.unwrap_or_default(),
        cluster: j.cluster.unwrap_or_default(),
        cluster_status: j.cluster_status.map(|s| s.to_string()).unwrap_or_default(),
        exit_code: j.exit_code,
        deployment_status: j.deployment_status.unwrap_or_default(),
        job_status: j.job_status.unwrap_or_default(),
        reason: j.reason.unwrap_or_default(),
        message: j.message.unwrap_or_default(),
        shutdown_after_job_finishes: j.shutdown_after_job_finishes,
        ttl_seconds_after_finished: j.ttl_seconds_after_finished,
        active_deadline_seconds: j.active_deadline_seconds,
        created_at: convert::timestamp(j.created_at.as_deref()),
        started_at: convert::timestamp(j.started_at.as_deref()),
        ended_at: convert::timestamp(j.ended_at.as_deref()),
        created_by: j.created_by.unwrap_or_default(),
        queue_position: j.queue_position,
        queued_since: convert::timestamp(j.queued_since.as_deref()),
        queue_reason: j.queue_reason,
        site: j.site,
        site_unavailable_since: convert::timestamp(j.site_unavailable_since.as_deref()),
    }
}

/// The run request REST takes, from the message's fields (unset ones left
/// out, so the model's defaults apply).
fn run_request(r: &pb::CreateRayJobRequest) -> Result<Value, Error> {
    let mut request = Map::new();
    request.insert("name".into(), json!(r.name));
    request.insert("entrypoint".into(), json!(r.entrypoint));
    if !r.cluster_yaml.trim().is_empty() {
        let cluster = parse_yaml(&r.cluster_yaml).map_err(|e| Error::invalid("cluster_yaml", e.to_string()))?;
        request.insert("cluster".into(), cluster);
    }
    if !r.submission_id.is_empty() {
        request.insert("submission_id".into(), json!(r.submission_id));
    }
    if let Some(env) = &r.runtime_env {
        let mut runtime_env = Map::new();
        if !env.working_dir.is_empty() {
            runtime_env.insert("working_dir".into(), json!(env.working_dir));
        }
        if !env.env_vars.is_empty() {
            runtime_env.insert("env_vars".into(), json!(env.env_vars));
        }
        if !env.pip.is_empty() {
            runtime_env.insert("pip".into(), json!(env.pip));
        }
        request.insert("runtime_env".into(), Value::Object(runtime_env));
    }
    if !r.metadata.is_empty() {
        request.insert("metadata".into(), json!(r.metadata));
    }
    for (field, value) in [
        ("entrypoint_num_cpus", r.entrypoint_num_cpus.map(|n| json!(n))),
        ("entrypoint_num_gpus", r.entrypoint_num_gpus.map(|n| json!(n))),
        (
            "shutdown_after_job_finishes",
            r.shutdown_after_job_finishes.map(|b| json!(b)),
        ),
        (
            "ttl_seconds_after_finished",
            r.ttl_seconds_after_finished.map(|n| json!(n)),
        ),
        ("active_deadline_seconds", r.active_deadline_seconds.map(|n| json!(n))),
    ] {
        if let Some(value) = value {
            request.insert(field.into(), value);
        }
    }
    Ok(Value::Object(request))
}

type LogChunks = Pin<Box<dyn Stream<Item = Result<pb::JobLogChunk, Status>> + Send>>;

type RayJobEvents = Pin<Box<dyn Stream<Item = Result<pb::WatchRayJobsResponse, Status>> + Send>>;

fn watch_event(e: &crate::domain::WatchEvent) -> pb::WatchRayJobsResponse {
    pb::WatchRayJobsResponse {
        r#type: convert::watch_event_type(e.kind).into(),
        resource_version: e.version.to_string(),
        rayjob: e.rayjob().map(|j| rayjob_message(RayJobInfo::clone(j))),
    }
}

#[tonic::async_trait]
impl ray_job_service_server::RayJobService for Grpc {
    async fn create_ray_job(
        &self,
        req: Request<pb::CreateRayJobRequest>,
    ) -> Result<Response<pb::CreateRayJobResponse>, Status> {
        let cx = self.context(&req)?;
        let r = req.into_inner();
        let field_validation = convert::field_validation(r.field_validation).map_err(to_status)?;
        let request = run_request(&r).map_err(to_status)?;
        let run = self
            .plane
            .create_rayjob(
                &cx,
                RunInput {
                    request,
                    namespace: r.namespace,
                    dry_run: r.dry_run,
                    field_validation,
                    queue: r.queue,
                },
            )
            .await
            .map_err(to_status)?;
        Ok(Response::new(pb::CreateRayJobResponse {
            rayjob: Some(rayjob_message(run.rayjob)),
            manifest: convert::to_struct(run.manifest),
            warnings: run.warnings.into_iter().map(convert::field_warning).collect(),
        }))
    }

    async fn list_ray_jobs(
        &self,
        req: Request<pb::ListRayJobsRequest>,
    ) -> Result<Response<pb::ListRayJobsResponse>, Status> {
        let cx = self.context(&req)?;
        let r = req.into_inner();
        let rayjobs = self.plane.rayjobs(&cx, &r.namespace).await.map_err(to_status)?;
        Ok(Response::new(pb::ListRayJobsResponse {
            rayjobs: rayjobs.into_iter().map(rayjob_message).collect(),
        }))
    }

    async fn get_ray_job(&self, req: Request<pb::RayJobRef>) -> Result<Response<pb::RayJob>, Status> {
        let cx = self.context(&req)?;
        let r = req.into_inner();
        let info = self
            .plane
            .rayjob(&cx, &ClusterRef::new(&r.namespace, &r.name))
            .await
            .map_err(to_status)?;
        Ok(Response::new(rayjob_message(info)))
    }

    async fn delete_ray_job(&self, req: Request<pb::RayJobRef>) -> Result<Response<pb::DeleteRayJobResponse>, Status> {
        let cx = self.context(&req)?;
        let r = req.into_inner();
        self.plane
            .delete_rayjob(&cx, &ClusterRef::new(&r.namespace, &r.name))
            .await
            .map_err(to_status)?;
        Ok(Response::new(pb::DeleteRayJobResponse {}))
    }

    async fn get_ray_job_logs(&self, req: Request<pb::RayJobRef>) -> Result<Response<pb::JobLogs>, Status> {
        let cx = self.context(&req)?;
        let r = req.into_inner();
        let logs = self
            .plane
            .rayjob_logs(&cx, &ClusterRef::new(&r.namespace, &r.name))
            .await
            .map_err(to_status)?;
        Ok(Response::new(pb::JobLogs { logs }))
    }

    type TailRayJobLogsStream = LogChunks;

    async fn tail_ray_job_logs(
        &self,
        req: Request<pb::RayJobRef>,
    ) -> Result<Response<Self::TailRayJobLogsStream>, Status> {
        let cx = self.context(&req)?;
        let r = req.into_inner();
        let lines = self
            .plane
            .follow_rayjob_logs(&cx, &ClusterRef::new(&r.namespace, &r.name))
            .await
            .map_err(to_status)?;
        let chunks = lines.map(|chunk| chunk.map(|text| pb::JobLogChunk { text }).map_err(to_status));
        Ok(Response::new(Box::pin(chunks)))
    }

    type WatchRayJobsStream = RayJobEvents;

    async fn watch_ray_jobs(
        &self,
        req: Request<pb::WatchRayJobsRequest>,
    ) -> Result<Response<Self::WatchRayJobsStream>, Status> {
        let cx = self.context(&req)?;
        let r = req.into_inner();
        let namespace = Some(r.namespace.as_str()).filter(|n| !n.is_empty());
        let (from, timeout) =
            convert::watch_start(&r.resource_version, r.send_initial_events, r.timeout_seconds).map_err(to_status)?;
        let watch = self
            .plane
            .watch_rayjobs(&cx, namespace, from, timeout)
            .await
            .map_err(to_status)?;
        let events = watch.map(|e| e.map(|e| watch_event(&e)).map_err(to_status));
        Ok(Response::new(Box::pin(events)))
    }
}
