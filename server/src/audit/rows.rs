//! Audit rows as the database sees them: every value as text (Postgres
//! casts it), so one code path serves both backends.

use serde_json::Value;

use crate::domain::audit::{AuditEntry, Outcome, RequestMeta, Transport};

/// Columns in insert order.
pub(super) const COLUMNS: [&str; 20] = [
    "id",
    "occurred_at",
    "completed_at",
    "request_id",
    "actor_subject",
    "actor_email",
    "actor_groups",
    "actor_teams",
    "source_ip",
    "user_agent",
    "transport",
    "action",
    "namespace",
    "cluster",
    "request_summary",
    "outcome",
    "http_status",
    "grpc_code",
    "error",
    "duration_ms",
];

/// Timestamps as fixed-width UTC text, so they sort as text (SQLite) and
/// parse as `timestamptz` (Postgres). Unparsable input is kept as given.
pub(super) fn stamp(text: &str) -> String {
    text.parse::<jiff::Timestamp>()
        .map(|t| t.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string())
        .unwrap_or_else(|_| text.to_owned())
}

fn json(v: &impl serde::Serialize) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "null".into())
}

/// The values of `e`, in [`COLUMNS`] order.
pub(super) fn values(e: &AuditEntry) -> [Option<String>; 20] {
    [
        Some(e.id.clone()),
        Some(stamp(&e.occurred_at)),
        e.completed_at.as_deref().map(stamp),
        Some(e.meta.request_id.clone()),
        Some(e.subject.clone()),
        e.email.clone(),
        Some(json(&e.groups)),
        Some(json(&e.teams)),
        e.meta.source_ip.clone(),
        e.meta.user_agent.clone(),
        Some(e.meta.transport.as_str().to_owned()),
        Some(e.action.clone()),
        e.namespace.clone(),
        e.cluster.clone(),
        Some(json(&e.summary)),
        Some(e.outcome.as_str().to_owned()),
        e.http_status.map(|s| s.to_string()),
        e.grpc_code.clone(),
        e.error.clone(),
        e.duration_ms.map(|d| d.to_string()),
    ]
}

/// One row read back, every column as text.
#[derive(Debug, sqlx::FromRow)]
pub(super) struct RawRow {
    id: String,
    occurred_at: String,
    completed_at: Option<String>,
    request_id: String,
    actor_subject: String,
    actor_email: Option<String>,
    actor_groups: String,
    actor_teams: String,
    source_ip: Option<String>,
    user_agent: Option<String>,
    transport: String,
    action: String,
    namespace: Option<String>,
    cluster: Option<String>,
    request_summary: String,
    outcome: String,
    http_status: Option<String>,
    grpc_code: Option<String>,
    error: Option<String>,
    duration_ms: Option<String>,
}

impl From<RawRow> for AuditEntry {
    fn from(r: RawRow) -> Self {
        let list = |s: &str| serde_json::from_str::<Vec<String>>(s).unwrap_or_default();
        Self {
            id: r.id,
            occurred_at: r.occurred_at,
            meta: RequestMeta {
                request_id: r.request_id,
                transport: Transport::parse(&r.transport).unwrap_or(Transport::Rest),
                source_ip: r.source_ip,
                user_agent: r.user_agent,
            },
            subject: r.actor_subject,
            email: r.actor_email,
            groups: list(&r.actor_groups),
            teams: list(&r.actor_teams),
            action: r.action,
            namespace: r.namespace,
            cluster: r.cluster,
            summary: serde_json::from_str(&r.request_summary).unwrap_or(Value::Null),
            outcome: Outcome::parse(&r.outcome).unwrap_or(Outcome::Unknown),
            completed_at: r.completed_at,
            http_status: r.http_status.and_then(|s| s.parse().ok()),
            grpc_code: r.grpc_code,
            error: r.error,
            duration_ms: r.duration_ms.and_then(|s| s.parse().ok()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::stamp;

    #[test]
    fn stamps_are_fixed_width_utc() {
        assert_eq!(stamp("2025-01-02T03:04:05Z"), "2025-01-02T03:04:05.000000Z");
        assert_eq!(stamp("2025-01-02T04:04:05.5+01:00"), "2025-01-02T03:04:05.500000Z");
        assert!(stamp("2025-01-02T03:04:05.000001Z") > stamp("2025-01-02T03:04:05Z"));
    }
}
