//! `krayne.v1.ClusterService` over the control plane.

use std::time::Duration;

use futures::{StreamExt as _, stream::BoxStream};
use krayne_proto::v1::{self as pb, cluster_service_server, create_cluster_request::Source};
use tonic::{Request, Response, Status};

use super::{
    convert,
    gate::ClientDeadline,
    handler::{Grpc, page},
    status::to_status,
};
use crate::{
    control::{CreateInput, KeepInput, ResumeInput, ScaleInput},
    domain::{ClusterRef, Error, PodLogParts, PodLogQuery, parse_yaml},
};

#[tonic::async_trait]
impl cluster_service_server::ClusterService for Grpc {
    async fn create_cluster(
        &self,
        req: Request<pb::CreateClusterRequest>,
    ) -> Result<Response<pb::CreateClusterResponse>, Status> {
        let cx = self.context(&req)?;
        let body = req.into_inner();
        let config = match body.source {
            Some(Source::Spec(spec)) => krayne_proto::config::spec_to_tree(&spec),
            Some(Source::ConfigYaml(text)) => parse_yaml(&text).map_err(to_status)?,
            None => {
                return Err(to_status(Error::invalid("source", "give a spec or config_yaml")));
            }
        };
        let field_validation = convert::field_validation(body.field_validation).map_err(to_status)?;
        let created = self
            .plane
            .create(
                &cx,
                CreateInput {
                    config,
                    namespace: None,
                    dry_run: body.dry_run,
                    field_validation,
                    queue: body.queue,
                },
            )
            .await
            .map_err(to_status)?;
        let manifest = convert::to_struct(created.manifest);
        Ok(Response::new(pb::CreateClusterResponse {
            cluster: Some(convert::cluster_info(created.cluster)),
            manifest,
            warnings: created.warnings.into_iter().map(convert::field_warning).collect(),
            placement: created.placement.map(|p| p.why),
        }))
    }

    async fn get_cluster(&self, req: Request<pb::GetClusterRequest>) -> Result<Response<pb::ClusterInfo>, Status> {
        let cx = self.context(&req)?;
        let r = req.into_inner();
        let info = self
            .plane
            .get(&cx, &ClusterRef::new(&r.namespace, &r.name))
            .await
            .map_err(to_status)?;
        Ok(Response::new(convert::cluster_info(info)))
    }

    async fn list_clusters(
        &self,
        req: Request<pb::ListClustersRequest>,
    ) -> Result<Response<pb::ListClustersResponse>, Status> {
        let cx = self.context(&req)?;
        let r = req.into_inner();
        let namespace = Some(r.namespace.as_str()).filter(|n| !n.is_empty());
        let p = self
            .plane
            .list(&cx, namespace, &page(r.page_size, &r.page_token)?)
            .await
            .map_err(to_status)?;
        Ok(Response::new(pb::ListClustersResponse {
            clusters: p.items.iter().map(|c| convert::cluster_info(c.info.clone())).collect(),
            next_page_token: p.next_page_token.unwrap_or_default(),
        }))
    }

    async fn describe_cluster(
        &self,
        req: Request<pb::DescribeClusterRequest>,
    ) -> Result<Response<pb::ClusterDetails>, Status> {
        let cx = self.context(&req)?;
        let r = req.into_inner();
        let details = self
            .plane
            .describe(&cx, &ClusterRef::new(&r.namespace, &r.name))
            .await
            .map_err(to_status)?;
        Ok(Response::new(convert::cluster_details(details)))
    }

    async fn scale_cluster(
        &self,
        req: Request<pb::ScaleClusterRequest>,
    ) -> Result<Response<pb::ScaleClusterResponse>, Status> {
        let cx = self.context(&req)?;
        let r = req.into_inner();
        let input = ScaleInput {
            worker_group: r.worker_group,
            replicas: r.replicas,
            min_replicas: r.min_replicas,
            max_replicas: r.max_replicas,
        };
        let info = self
            .plane
            .scale(&cx, &ClusterRef::new(&r.namespace, &r.name), input)
            .await
            .map_err(to_status)?;
        Ok(Response::new(pb::ScaleClusterResponse {
            cluster: Some(convert::cluster_info(info)),
        }))
    }

    async fn suspend_cluster(
        &self,
        req: Request<pb::SuspendClusterRequest>,
    ) -> Result<Response<pb::SuspendClusterResponse>, Status> {
        let cx = self.context(&req)?;
        let r = req.into_inner();
        let info = self
            .plane
            .suspend(&cx, &ClusterRef::new(&r.namespace, &r.name))
            .await
            .map_err(to_status)?;
        Ok(Response::new(pb::SuspendClusterResponse {
            cluster: Some(convert::cluster_info(info)),
        }))
    }

    async fn resume_cluster(
        &self,
        req: Request<pb::ResumeClusterRequest>,
    ) -> Result<Response<pb::ResumeClusterResponse>, Status> {
        let cx = self.context(&req)?;
        let r = req.into_inner();
        let info = self
            .plane
            .resume(
                &cx,
                &ClusterRef::new(&r.namespace, &r.name),
                ResumeInput { queue: r.queue },
            )
            .await
            .map_err(to_status)?;
        Ok(Response::new(pb::ResumeClusterResponse {
            cluster: Some(convert::cluster_info(info)),
        }))
    }

    async fn keep_cluster(
        &self,
        req: Request<pb::KeepClusterRequest>,
    ) -> Result<Response<pb::KeepClusterResponse>, Status> {
        let cx = self.context(&req)?;
        let r = req.into_inner();
        let input = match r.keep {
            Some(pb::keep_cluster_request::Keep::For(d)) => KeepInput {
                for_: Some(d),
                until: None,
            },
            Some(pb::keep_cluster_request::Keep::Until(t)) => KeepInput {
                for_: None,
                until: Some(
                    jiff::Timestamp::new(t.seconds, t.nanos)
                        .map_or_else(|_| format!("{}s", t.seconds), |t| t.to_string()),
                ),
            },
            None => KeepInput::default(),
        };
        let info = self
            .plane
            .keep(&cx, &ClusterRef::new(&r.namespace, &r.name), &input)
            .await
            .map_err(to_status)?;
        Ok(Response::new(pb::KeepClusterResponse {
            cluster: Some(convert::cluster_info(info)),
        }))
    }

    async fn delete_cluster(
        &self,
        req: Request<pb::DeleteClusterRequest>,
    ) -> Result<Response<pb::DeleteClusterResponse>, Status> {
        let cx = self.context(&req)?;
        let r = req.into_inner();
        self.plane
            .delete(&cx, &ClusterRef::new(&r.namespace, &r.name))
            .await
            .map_err(to_status)?;
        Ok(Response::new(pb::DeleteClusterResponse {}))
    }

    type WaitClusterStream = BoxStream<'static, Result<pb::WaitClusterResponse, Status>>;

    async fn wait_cluster(
        &self,
        req: Request<pb::WaitClusterRequest>,
    ) -> Result<Response<Self::WaitClusterStream>, Status> {
        let cx = self.context(&req)?;
        let client_deadline = req
            .extensions()
            .get::<ClientDeadline>()
            .map(|d| d.0.saturating_duration_since(tokio::time::Instant::now()));
        let r = req.into_inner();
        let asked = Some(r.timeout_seconds)
            .filter(|t| *t > 0)
            .map(|t| Duration::from_secs(t.into()));
        // The client's grpc-timeout bounds the wait too.
        let timeout = match (asked, client_deadline) {
            (Some(a), Some(c)) => Some(a.min(c)),
            (a, c) => a.or(c),
        };
        let updates = self
            .plane
            .wait(&cx, &ClusterRef::new(&r.namespace, &r.name), timeout)
            .await
            .map_err(to_status)?;
        let stream = updates.map(|u| {
            u.map(|info| pb::WaitClusterResponse {
                cluster: Some(convert::cluster_info(info)),
            })
            .map_err(to_status)
        });
        Ok(Response::new(stream.boxed()))
    }

    type WatchClustersStream = BoxStream<'static, Result<pb::WatchClustersResponse, Status>>;

    async fn watch_clusters(
        &self,
        req: Request<pb::WatchClustersRequest>,
    ) -> Result<Response<Self::WatchClustersStream>, Status> {
        let cx = self.context(&req)?;
        let r = req.into_inner();
        let namespace = Some(r.namespace.as_str()).filter(|n| !n.is_empty());
        let (from, timeout) =
            convert::watch_start(&r.resource_version, r.send_initial_events, r.timeout_seconds).map_err(to_status)?;
        let watch = self
            .plane
            .watch_clusters(&cx, namespace, from, timeout)
            .await
            .map_err(to_status)?;
        let stream = watch.map(|e| e.map(|e| convert::watch_event(&e)).map_err(to_status));
        Ok(Response::new(stream.boxed()))
    }

    async fn get_cluster_logs(
        &self,
        req: Request<pb::ClusterLogsRequest>,
    ) -> Result<Response<pb::ClusterLogs>, Status> {
        let cx = self.context(&req)?;
        let r = req.into_inner();
        let query = log_query(&r).map_err(to_status)?;
        let log = self
            .plane
            .cluster_logs(&cx, &ClusterRef::new(&r.namespace, &r.name), query)
            .await
            .map_err(to_status)?;
        Ok(Response::new(pb::ClusterLogs {
            pod: log.pod,
            container: log.container,
            text: log.text,
        }))
    }

    type TailClusterLogsStream = BoxStream<'static, Result<pb::ClusterLogChunk, Status>>;

    async fn tail_cluster_logs(
        &self,
        req: Request<pb::ClusterLogsRequest>,
    ) -> Result<Response<Self::TailClusterLogsStream>, Status> {
        let cx = self.context(&req)?;
        let r = req.into_inner();
        let query = log_query(&r).map_err(to_status)?;
        let (pod, container, chunks) = self
            .plane
            .follow_cluster_logs(&cx, &ClusterRef::new(&r.namespace, &r.name), query)
            .await
            .map_err(to_status)?;
        // The first message names the pod and container, with no text.
        let first = futures::stream::once(async move {
            Ok(pb::ClusterLogChunk {
                pod,
                container,
                text: String::new(),
            })
        });
        let rest = chunks.map(|chunk| {
            chunk
                .map(|text| pb::ClusterLogChunk {
                    text,
                    ..pb::ClusterLogChunk::default()
                })
                .map_err(to_status)
        });
        Ok(Response::new(first.chain(rest).boxed()))
    }

    async fn list_ray_logs(&self, req: Request<pb::RayLogsRequest>) -> Result<Response<pb::RayLogFiles>, Status> {
        let cx = self.context(&req)?;
        let r = req.into_inner();
        let node = Some(r.node.as_str()).filter(|n| !n.is_empty());
        let files = self
            .plane
            .ray_log_files(&cx, &ClusterRef::new(&r.namespace, &r.name), node)
            .await
            .map_err(to_status)?;
        Ok(Response::new(pb::RayLogFiles {
            node_id: files.node_id,
            node_ip: files.node_ip,
            is_head_node: files.is_head_node,
            groups: files
                .files
                .into_iter()
                .map(|(component, files)| pb::RayLogGroup { component, files })
                .collect(),
        }))
    }

    async fn get_ray_log(&self, req: Request<pb::RayLogRequest>) -> Result<Response<pb::RayLog>, Status> {
        let cx = self.context(&req)?;
        let r = req.into_inner();
        let node = Some(r.node.as_str()).filter(|n| !n.is_empty());
        let text = self
            .plane
            .ray_log_file(&cx, &ClusterRef::new(&r.namespace, &r.name), node, &r.file, r.lines)
            .await
            .map_err(to_status)?;
        Ok(Response::new(pb::RayLog { text }))
    }

    type TailRayLogStream = BoxStream<'static, Result<pb::RayLog, Status>>;

    async fn tail_ray_log(&self, req: Request<pb::RayLogRequest>) -> Result<Response<Self::TailRayLogStream>, Status> {
        let cx = self.context(&req)?;
        let r = req.into_inner();
        let node = Some(r.node.as_str()).filter(|n| !n.is_empty());
        let chunks = self
            .plane
            .follow_ray_log_file(&cx, &ClusterRef::new(&r.namespace, &r.name), node, &r.file, r.lines)
            .await
            .map_err(to_status)?;
        Ok(Response::new(
            chunks
                .map(|c| c.map(|text| pb::RayLog { text }).map_err(to_status))
                .boxed(),
        ))
    }
}

/// The request's query, as the REST one is read.
fn log_query(r: &pb::ClusterLogsRequest) -> Result<PodLogQuery, Error> {
    PodLogQuery::from_parts(&PodLogParts {
        pod: &r.pod,
        node_type: &r.node_type,
        group: &r.group,
        container: &r.container,
        tail_lines: r.tail_lines,
        since_seconds: r.since_seconds,
        previous: r.previous,
    })
}
