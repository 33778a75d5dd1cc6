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

/// Longest text kept in an indexed column: a B-tree entry must stay under
/// a third of a page (2 704 bytes in Postgres), and no valid name is longer.
const INDEXED_MAX_BYTES: usize = 256;

/// `text` as any database stores it: Postgres refuses NUL in `text` and
/// `\u0000` in `jsonb`, so a caller who sends one must not make the row
/// (and the mutation it guards) fail.
pub(super) fn storable(text: &str) -> String {
    text.replace('\0', "\u{FFFD}")
}

/// [`storable`], cut (at a character boundary, marked with `…`) to fit an
/// index: the refusal of an absurd name is still recorded.
pub(super) fn indexable(text: &str) -> String {
    let text = storable(text);
    if text.len() <= INDEXED_MAX_BYTES {
        return text;
    }
    let mut end = INDEXED_MAX_BYTES - '…'.len_utf8();
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// JSON with [`storable`] strings and keys.
fn json(v: &impl serde::Serialize) -> String {
    fn clean(v: Value) -> Value {
        match v {
            Value::String(s) => Value::String(storable(&s)),
            Value::Array(items) => Value::Array(items.into_iter().map(clean).collect()),
            Value::Object(map) => Value::Object(map.into_iter().map(|(k, v)| (storable(&k), clean(v))).collect()),
            other => other,
        }
    }
    serde_json::to_value(v)
        .map(clean)
        .and_then(|v| serde_json::to_string(&v))
        .unwrap_or_else(|_| "null".into())
}

/// The values of `e`, in [`COLUMNS`] order.
pub(super) fn values(e: &AuditEntry) -> [Option<String>; 20] {
    [
        Some(e.id.clone()),
        Some(stamp(&e.occurred_at)),
        e.completed_at.as_deref().map(stamp),
        Some(storable(&e.meta.request_id)),
        Some(indexable(&e.subject)),
        e.email.as_deref().map(storable),
        Some(json(&e.groups)),
        Some(json(&e.teams)),
        e.meta.source_ip.clone(),
        e.meta.user_agent.as_deref().map(storable),
        Some(e.meta.transport.as_str().to_owned()),
        Some(indexable(&e.action)),
        e.namespace.as_deref().map(indexable),
        e.cluster.as_deref().map(indexable),
        Some(json(&e.summary)),
        Some(e.outcome.as_str().to_owned()),
        e.http_status.map(|s| s.to_string()),
        e.grpc_code.clone(),
        e.error.as_deref().map(storable),
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
    use serde_json::json;

    use super::{indexable, json, stamp, storable};

    #[test]
    fn stamps_are_fixed_width_utc() {
        assert_eq!(stamp("2025-01-02T03:04:05Z"), "2025-01-02T03:04:05.000000Z");
        assert_eq!(stamp("2025-01-02T04:04:05.5+01:00"), "2025-01-02T03:04:05.500000Z");
        assert!(stamp("2025-01-02T03:04:05.000001Z") > stamp("2025-01-02T03:04:05Z"));
    }

    #[test]
    fn nul_never_reaches_the_database() {
        assert_eq!(storable("a\0b"), "a\u{FFFD}b");
        let summary = json(&json!({"worker_group": "w\0", "k\0": ["\0"]}));
        assert!(!summary.contains("\\u0000"), "{summary}");
        assert_eq!(summary, "{\"worker_group\":\"w\u{FFFD}\",\"k\u{FFFD}\":[\"\u{FFFD}\"]}");
    }

    #[test]
    fn indexed_text_is_cut_at_a_character_boundary() {
        assert_eq!(indexable("ml-team"), "ml-team");
        let long = indexable(&"é".repeat(1_000));
        assert!(long.len() <= 256 && long.ends_with('…'), "{}", long.len());
        assert!(long.starts_with("éé"));
        assert_eq!(indexable(&"x".repeat(256)).len(), 256);
    }
}
