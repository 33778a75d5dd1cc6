//! `krayne.v1.AuditService` over the control plane.

use krayne_proto::v1::{self as pb, audit_service_server};
use tonic::{Request, Response, Status};

use super::{
    convert,
    handler::{Grpc, page},
    status::to_status,
};
use crate::domain::Error;

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
            .plane
            .audit_log(&cx, filter, &page(r.page_size, &r.page_token)?)
            .await
            .map_err(to_status)?;
        Ok(Response::new(pb::ListAuditEventsResponse {
            events: p.items.into_iter().map(|e| convert::audit_event(e.into())).collect(),
            next_page_token: p.next_page_token.unwrap_or_default(),
        }))
    }
}
