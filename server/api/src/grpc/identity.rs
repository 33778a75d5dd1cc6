//! `krayne.v1.IdentityService` over the control plane.

use krayne_proto::v1::{self as pb, identity_service_server};
use tonic::{Request, Response, Status};

use super::{
    convert,
    handler::{Grpc, page},
    status::to_status,
};

#[tonic::async_trait]
impl identity_service_server::IdentityService for Grpc {
    async fn get_quota(&self, req: Request<pb::GetQuotaRequest>) -> Result<Response<pb::NamespaceQuota>, Status> {
        let cx = self.context(&req)?;
        let quota = self
            .plane
            .quota(&cx, &req.get_ref().namespace)
            .await
            .map_err(to_status)?;
        Ok(Response::new(pb::NamespaceQuota {
            namespace: quota.namespace,
            resources: quota.lines.into_iter().map(convert::quota_line).collect(),
            kueue_local_queue: quota.kueue_local_queue,
        }))
    }

    async fn who_am_i(&self, req: Request<pb::WhoAmIRequest>) -> Result<Response<pb::WhoAmIResponse>, Status> {
        let cx = self.context(&req)?;
        let id = self.plane.whoami(&cx).await.map_err(to_status)?;
        Ok(Response::new(pb::WhoAmIResponse {
            subject: id.subject,
            email: id.email,
            groups: id.groups,
            teams: id.teams,
            global_admin: id.global_admin,
            namespaces: id.namespaces.into_iter().map(convert::namespace_access).collect(),
            namespace_count: u64::try_from(id.namespace_count).unwrap_or(u64::MAX),
            grants: id
                .grants
                .into_iter()
                .map(|g| pb::Grant {
                    team: g.team,
                    pattern: g.pattern,
                    role: convert::role(g.role),
                    sites: g.sites.unwrap_or_default(),
                })
                .collect(),
            issuer: id.issuer,
            expires_at: convert::timestamp(id.expires_at.as_deref()),
        }))
    }

    async fn list_namespaces(
        &self,
        req: Request<pb::ListNamespacesRequest>,
    ) -> Result<Response<pb::ListNamespacesResponse>, Status> {
        let cx = self.context(&req)?;
        let r = req.into_inner();
        let p = self
            .plane
            .namespaces(&cx, &page(r.page_size, &r.page_token)?)
            .await
            .map_err(to_status)?;
        Ok(Response::new(pb::ListNamespacesResponse {
            namespaces: p.items.into_iter().map(convert::namespace_access).collect(),
            next_page_token: p.next_page_token.unwrap_or_default(),
        }))
    }
}
