//! Audit rows as the database sees them: every value as text (Postgres
//! casts it), so one code path serves both backends.

use serde_json::Value;

use crate::domain::{
    audit::{AuditEntry, Outcome, RequestMeta, Transport},
    text::{MAX_FREE_TEXT_BYTES, bounded, escape_controls},
};

/// Columns in insert order.
pub(crate) const COLUMNS: [&str; 21] = [
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
    "correlation_id",
];

/// Timestamps as fixed-width UTC text, so they sort as text (SQLite) and
/// parse as `timestamptz` (Postgres). Unparsable input is kept as given.
pub(crate) fn stamp(text: &str) -> String {
    text.parse::<jiff::Timestamp>()
        .map(|t| t.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string())
        .unwrap_or_else(|_| text.to_owned())
}

/// Longest text kept in an indexed column: a B-tree entry must stay under
/// a third of a page (2 704 bytes in Postgres), and no valid name is longer.
const INDEXED_MAX_BYTES: usize = 256;

/// `text` as any database stores it: Postgres refuses NUL in `text` and
/// `\u0000` in `jsonb`, so a caller who sends one must not make the row
/// (and the mutation it guards) fail; other control characters are
/// escaped, so a value read back and printed cannot forge lines.
pub(crate) fn storable(text: &str) -> String {
    escape_controls(&text.replace('\0', "\u{FFFD}")).into_owned()
}

/// [`storable`], cut to `max` bytes (at a character boundary, marked `…`).
fn cut(text: &str, max: usize) -> String {
    bounded(&storable(text), max).into_owned()
}

/// Free text taken from a request (user agent, error, e-mail): at most
/// [`MAX_FREE_TEXT_BYTES`], so a flood of 60 KB headers cannot fill the
/// database.
pub(crate) fn free_text(text: &str) -> String {
    cut(text, MAX_FREE_TEXT_BYTES)
}

/// [`storable`], cut to fit an index: the refusal of an absurd name is
/// still recorded.
pub(crate) fn indexable(text: &str) -> String {
    cut(text, INDEXED_MAX_BYTES)
}

/// JSON with [`storable`] strings and keys.
fn json(v: &impl serde::Serialize) -> String {
    fn clean(v: Value) -> Value {
        match v {
            Value::String(s) => Value::String(free_text(&s)),
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
pub(crate) fn values(e: &AuditEntry) -> [Option<String>; 21] {
    [
        Some(e.id.clone()),
        Some(stamp(&e.occurred_at)),
        e.completed_at.as_deref().map(stamp),
        Some(indexable(&e.meta.request_id)),
        Some(indexable(&e.subject)),
        e.email.as_deref().map(free_text),
        Some(json(&e.groups)),
        Some(json(&e.teams)),
        e.meta.source_ip.as_deref().map(indexable),
        e.meta.user_agent.as_deref().map(free_text),
        Some(e.meta.transport.as_str().to_owned()),
        Some(indexable(&e.action)),
        e.namespace.as_deref().map(indexable),
        e.cluster.as_deref().map(indexable),
        Some(json(&e.summary)),
        Some(e.outcome.as_str().to_owned()),
        e.http_status.map(|s| s.to_string()),
        e.grpc_code.clone(),
        e.error.as_deref().map(free_text),
        e.duration_ms.map(|d| d.to_string()),
        e.meta.correlation_id.as_deref().map(indexable),
    ]
}

/// One row read back, every column as text.
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct RawRow {
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
    correlation_id: Option<String>,
}

impl From<RawRow> for AuditEntry {
    fn from(r: RawRow) -> Self {
        let list = |s: &str| serde_json::from_str::<Vec<String>>(s).unwrap_or_default();
        Self {
            id: r.id,
            occurred_at: r.occurred_at,
            meta: RequestMeta {
                request_id: r.request_id.into(),
                correlation_id: r.correlation_id,
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

    use super::{free_text, indexable, json, stamp, storable};

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
    fn free_text_is_bounded_and_cannot_forge_lines() {
        let ua = free_text(&format!("x\n\u{1b}[2J{}", "u".repeat(60_000)));
        assert!(ua.len() <= 512 && ua.ends_with('…'), "{}", ua.len());
        assert!(ua.starts_with("x\\n\\u{1b}[2Juuu"), "{ua}");
        assert_eq!(storable("a\0b\n"), "a\u{FFFD}b\\n");
        let summary = json(&json!({"agent": "z".repeat(10_000)}));
        assert!(summary.len() < 600, "{}", summary.len());
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
