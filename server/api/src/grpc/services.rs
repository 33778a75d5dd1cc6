//! `krayne.v1.ClusterService` and `krayne.v1.IdentityService` over the
//! service layer.

use std::time::Duration;

use futures::{StreamExt as _, stream::BoxStream};
use krayne_proto::v1::{
    self as pb, audit_service_server, cluster_service_server, create_cluster_request::Source, identity_service_server,
    version_service_server,
};
use tonic::{Request, Response, Status};

use super::{convert, gate::ClientDeadline, status::to_status};
use crate::{
    domain::{Error, PageRequest, WatchFrom, parse_yaml, watch_timeout},
    service::{ClusterService, Context, CreateInput, ScaleInput},
};

/// The gRPC services over the use cases.
#[derive(Clone)]
pub(crate) struct Grpc {
    pub(crate) service: ClusterService,
    /// How long a tunnel's opening message may take.
    pub(crate) body_timeout: Duration,
    /// Largest working-dir package uploaded to a head, in bytes.
    pub(crate) package_limit: u64,
}

impl Grpc {
    /// The caller, authenticated by the gate from metadata before the
    /// message was read.
    pub(super) fn context<T>(&self, req: &Request<T>) -> Result<Context, Status> {
        req.extensions()
            .get::<Context>()
            .cloned()
            .ok_or_else(|| to_status(Error::Internal("a krayne.v1 call passed no gate".into())))
    }
}

fn page(size: u32, token: &str) -> Result<PageRequest, Status> {
    PageRequest::new(size, token).map_err(to_status)
}

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
            .service
            .create(
                &cx,
                CreateInput {
                    config,
                    namespace: None,
                    dry_run: body.dry_run,
                    field_validation,
                },
            )
            .await
            .map_err(to_status)?;
        let manifest = convert::to_struct(created.manifest);
        Ok(Response::new(pb::CreateClusterResponse {
            cluster: Some(convert::cluster_info(created.cluster)),
            manifest,
            warnings: created.warnings.into_iter().map(convert::field_warning).collect(),
        }))
    }

    async fn get_cluster(&self, req: Request<pb::GetClusterRequest>) -> Result<Response<pb::ClusterInfo>, Status> {
        let cx = self.context(&req)?;
        let r = req.into_inner();
        let info = self.service.get(&cx, &r.namespace, &r.name).await.map_err(to_status)?;
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
            .service
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
            .service
            .describe(&cx, &r.namespace, &r.name)
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
            .service
            .scale(&cx, &r.namespace, &r.name, input)
            .await
            .map_err(to_status)?;
        Ok(Response::new(pb::ScaleClusterResponse {
            cluster: Some(convert::cluster_info(info)),
        }))
    }

    async fn delete_cluster(
        &self,
        req: Request<pb::DeleteClusterRequest>,
    ) -> Result<Response<pb::DeleteClusterResponse>, Status> {
        let cx = self.context(&req)?;
        let r = req.into_inner();
        self.service
            .delete(&cx, &r.namespace, &r.name)
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
            .service
            .wait(&cx, &r.namespace, &r.name, timeout)
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
        let from = WatchFrom::read(Some(r.resource_version.as_str()), r.send_initial_events).map_err(to_status)?;
        let timeout = watch_timeout(r.timeout_seconds.into()).map_err(to_status)?;
        let watch = self
            .service
            .watch_clusters(&cx, namespace, from, timeout)
            .await
            .map_err(to_status)?;
        let stream = watch.map(|e| e.map(|e| convert::watch_event(&e)).map_err(to_status));
        Ok(Response::new(stream.boxed()))
    }
}

#[tonic::async_trait]
impl identity_service_server::IdentityService for Grpc {
    async fn get_quota(&self, req: Request<pb::GetQuotaRequest>) -> Result<Response<pb::NamespaceQuota>, Status> {
        let cx = self.context(&req)?;
        let quota = self
            .service
            .quota(&cx, &req.get_ref().namespace)
            .await
            .map_err(to_status)?;
        Ok(Response::new(pb::NamespaceQuota {
            namespace: quota.namespace,
            resources: quota.lines.into_iter().map(convert::quota_line).collect(),
        }))
    }

    async fn who_am_i(&self, req: Request<pb::WhoAmIRequest>) -> Result<Response<pb::WhoAmIResponse>, Status> {
        let cx = self.context(&req)?;
        let id = self.service.whoami(&cx).await.map_err(to_status)?;
        Ok(Response::new(pb::WhoAmIResponse {
            subject: id.subject,
            email: id.email,
            groups: id.groups,
            teams: id.teams,
            global_admin: id.global_admin,
            namespaces: id.namespaces.into_iter().map(convert::namespace_access).collect(),
            grants: id
                .grants
                .into_iter()
                .map(|g| pb::Grant {
                    team: g.team,
                    pattern: g.pattern,
                    role: convert::role(g.role),
                })
                .collect(),
        }))
    }

    async fn list_namespaces(
        &self,
        req: Request<pb::ListNamespacesRequest>,
    ) -> Result<Response<pb::ListNamespacesResponse>, Status> {
        let cx = self.context(&req)?;
        let r = req.into_inner();
        let p = self
            .service
            .namespaces(&cx, &page(r.page_size, &r.page_token)?)
            .await
            .map_err(to_status)?;
        Ok(Response::new(pb::ListNamespacesResponse {
            namespaces: p.items.into_iter().map(convert::namespace_access).collect(),
            next_page_token: p.next_page_token.unwrap_or_default(),
        }))
    }
}

fn non_empty(s: String) -> Option<String> {
    Some(s).filter(|s| !s.is_empty())
}

/// An optional timestamp filter as RFC 3339 text; one that is no time at
/// all (nanos out of range, past year 9999) is refused, not ignored.
fn time(field: &str, t: Option<&prost_types::Timestamp>) -> Result<Option<String>, Status> {
    t.map(|t| convert::rfc3339(t).ok_or_else(|| to_status(Error::invalid(field, "is not a valid time"))))
        .transpose()
}

#[tonic::async_trait]
impl audit_service_server::AuditService for Grpc {
    async fn list_audit_events(
        &self,
        req: Request<pb::ListAuditEventsRequest>,
    ) -> Result<Response<pb::ListAuditEventsResponse>, Status> {
        let cx = self.context(&req)?;
        let r = req.into_inner();
        let filter = crate::domain::audit::AuditFilter {
            scope: None,
            namespace: non_empty(r.namespace),
            actor: non_empty(r.actor),
            action: non_empty(r.action),
            outcome: non_empty(r.outcome),
            cluster: non_empty(r.cluster),
            correlation_id: non_empty(r.correlation_id),
            since: time("since", r.since.as_ref())?,
            until: time("until", r.until.as_ref())?,
        };
        let p = self
            .service
            .audit_log(&cx, filter, &page(r.page_size, &r.page_token)?)
            .await
            .map_err(to_status)?;
        Ok(Response::new(pb::ListAuditEventsResponse {
            events: p.items.into_iter().map(|e| convert::audit_event(e.into())).collect(),
            next_page_token: p.next_page_token.unwrap_or_default(),
        }))
    }
}

#[tonic::async_trait]
impl version_service_server::VersionService for Grpc {
    async fn get_version(&self, _: Request<pb::GetVersionRequest>) -> Result<Response<pb::GetVersionResponse>, Status> {
        let v = self.service.version();
        Ok(Response::new(pb::GetVersionResponse {
            server_version: v.server_version,
            commit: v.commit,
            api_version: v.api_version,
            features: v.features,
        }))
    }
}
