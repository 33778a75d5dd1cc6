//! The audit route.

use axum::{Json, extract::State};

use super::{
    AppState,
    dto::{AuditEventList, AuditQuery},
    extract::{Caller, QueryOf},
    problem::{ApiError, Problem},
    responses::Refusals,
};
use crate::domain::{PageRequest, audit::AuditFilter};

/// Read the audit log, newest first.
///
/// Namespace admins see their namespaces' rows; global admins see all,
/// including refused tokens (`auth.denied`).
#[utoipa::path(get, path = "/v1/audit", tag = "audit", params(AuditQuery),
    responses(
        Refusals,
        (status = 200, description = "One page of audit events", body = AuditEventList),
        (status = 400, description = "Bad filter, page size or token", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "No admin role on the namespace (or on any)", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The audit database is unavailable", body = Problem, content_type = "application/problem+json"),
    ))]
pub(super) async fn list_audit_events(
    State(s): State<AppState>,
    Caller(cx): Caller,
    QueryOf(q): QueryOf<AuditQuery>,
) -> Result<Json<AuditEventList>, ApiError> {
    let page = PageRequest::new(q.page_size.unwrap_or(0), q.page_token.as_deref().unwrap_or(""))?;
    let filter = AuditFilter {
        scope: None,
        namespace: q.namespace,
        actor: q.actor,
        action: q.action,
        outcome: q.outcome,
        cluster: q.cluster,
        correlation_id: q.correlation_id,
        since: q.since,
        until: q.until,
    };
    let p = s.plane.audit_log(&cx, filter, &page).await?;
    Ok(Json(AuditEventList {
        events: p.items.into_iter().map(Into::into).collect(),
        next_page_token: p.next_page_token,
    }))
}
