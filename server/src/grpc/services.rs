//! `krayne.v1.ClusterService` and `krayne.v1.IdentityService` over the
//! service layer.

use std::{net::SocketAddr, time::Duration};

use axum::extract::ConnectInfo;
use futures::{StreamExt as _, stream::BoxStream};
use krayne_proto::v1::{
    self as pb, audit_service_server, cluster_service_server, create_cluster_request::Source, identity_service_server,
};
use tonic::{Request, Response, Status};

use super::{convert, status::to_status};
use crate::{
    auth::Authenticator,
    domain::{
        Error, PageRequest,
        audit::{RequestMeta, Transport},
        parse_yaml,
    },
    service::{ClusterService, Context, CreateInput, ScaleInput},
};

/// Both gRPC services share the use cases and the authenticator.
#[derive(Clone)]
pub(crate) struct Grpc {
    pub(crate) service: ClusterService,
    pub(crate) auth: Authenticator,
}

fn metadata<T>(req: &Request<T>, key: &str) -> Option<String> {
    req.metadata().get(key).and_then(|v| v.to_str().ok()).map(str::to_owned)
}

impl Grpc {
    async fn context<T>(&self, req: &Request<T>) -> Result<Context, Status> {
        let source_ip = req
            .extensions()
            .get::<ConnectInfo<SocketAddr>>()
            .map(|c| c.0.ip().to_string())
            .or_else(|| req.remote_addr().map(|a| a.ip().to_string()));
        let meta = RequestMeta {
            request_id: metadata(req, "x-request-id").unwrap_or_else(|| uuid::Uuid::now_v7().to_string()),
            transport: Transport::Grpc,
            source_ip,
            user_agent: metadata(req, "user-agent"),
        };
        match self.auth.authenticate(metadata(req, "authorization").as_deref()).await {
            Ok(principal) => {
                let cx = Context { principal, meta };
                self.service.admit(&cx).map_err(to_status)?;
                Ok(cx)
            }
            Err(rejected) => {
                self.service.record_unauthenticated(&meta, &rejected.detail).await;
                Err(to_status(rejected.error))
            }
        }
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
        let cx = self.context(&req).await?;
        let body = req.into_inner();
        let config = match body.source {
            Some(Source::Spec(spec)) => krayne_proto::config::spec_to_tree(&spec),
            Some(Source::ConfigYaml(text)) => parse_yaml(&text).map_err(to_status)?,
            None => {
                return Err(to_status(Error::invalid("source", "give a spec or config_yaml")));
            }
        };
        let created = self
            .service
            .create(
                &cx,
                CreateInput {
                    config,
                    namespace: None,
                    dry_run: body.dry_run,
                },
            )
            .await
            .map_err(to_status)?;
        let manifest = convert::to_struct(created.manifest);
        Ok(Response::new(pb::CreateClusterResponse {
            cluster: Some(convert::cluster_info(created.cluster)),
            manifest,
        }))
    }

    async fn get_cluster(&self, req: Request<pb::GetClusterRequest>) -> Result<Response<pb::ClusterInfo>, Status> {
        let cx = self.context(&req).await?;
        let r = req.into_inner();
        let info = self.service.get(&cx, &r.namespace, &r.name).await.map_err(to_status)?;
        Ok(Response::new(convert::cluster_info(info)))
    }

    async fn list_clusters(
        &self,
        req: Request<pb::ListClustersRequest>,
    ) -> Result<Response<pb::ListClustersResponse>, Status> {
        let cx = self.context(&req).await?;
        let r = req.into_inner();
        let namespace = Some(r.namespace.as_str()).filter(|n| !n.is_empty());
        let p = self
            .service
            .list(&cx, namespace, &page(r.page_size, &r.page_token)?)
            .await
            .map_err(to_status)?;
        Ok(Response::new(pb::ListClustersResponse {
            clusters: p.items.into_iter().map(convert::cluster_info).collect(),
            next_page_token: p.next_page_token.unwrap_or_default(),
        }))
    }

    async fn describe_cluster(
        &self,
        req: Request<pb::DescribeClusterRequest>,
    ) -> Result<Response<pb::ClusterDetails>, Status> {
        let cx = self.context(&req).await?;
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
        let cx = self.context(&req).await?;
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
        let cx = self.context(&req).await?;
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
        let cx = self.context(&req).await?;
        let r = req.into_inner();
        let timeout = Some(r.timeout_seconds)
            .filter(|t| *t > 0)
            .map(|t| Duration::from_secs(t.into()));
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
}

#[tonic::async_trait]
impl identity_service_server::IdentityService for Grpc {
    async fn who_am_i(&self, req: Request<pb::WhoAmIRequest>) -> Result<Response<pb::WhoAmIResponse>, Status> {
        let cx = self.context(&req).await?;
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
        let cx = self.context(&req).await?;
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
        let cx = self.context(&req).await?;
        let r = req.into_inner();
        let filter = crate::domain::audit::AuditFilter {
            scope: None,
            namespace: non_empty(r.namespace),
            actor: non_empty(r.actor),
            action: non_empty(r.action),
            outcome: non_empty(r.outcome),
            cluster: non_empty(r.cluster),
            since: time("since", r.since.as_ref())?,
            until: time("until", r.until.as_ref())?,
        };
        let p = self
            .service
            .audit_log(&cx, filter, &page(r.page_size, &r.page_token)?)
            .await
            .map_err(to_status)?;
        Ok(Response::new(pb::ListAuditEventsResponse {
            events: p.items.into_iter().map(convert::audit_event).collect(),
            next_page_token: p.next_page_token.unwrap_or_default(),
        }))
    }
}
