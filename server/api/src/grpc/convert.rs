//! proto ⇄ domain, at the edge.

use krayne_proto::v1 as pb;
use serde_json::{Map, Value};

use crate::domain::{self, Role};

/// The request's `field_validation`; unspecified is `warn`.
pub(crate) fn field_validation(value: i32) -> Result<domain::FieldValidation, domain::Error> {
    use domain::FieldValidation as Mode;
    match pb::FieldValidation::try_from(value) {
        Ok(pb::FieldValidation::Unspecified | pb::FieldValidation::Warn) => Ok(Mode::Warn),
        Ok(pb::FieldValidation::Strict) => Ok(Mode::Strict),
        Ok(pb::FieldValidation::Ignore) => Ok(Mode::Ignore),
        Err(_) => Err(domain::Error::invalid(
            "field_validation",
            format!("unknown value {value}; use STRICT, WARN or IGNORE"),
        )),
    }
}

/// A field warning as the wire carries it.
pub(crate) fn field_warning(w: domain::FieldViolation) -> pb::FieldWarning {
    pb::FieldWarning {
        field: w.field,
        description: w.description,
    }
}

/// RFC 3339 text → protobuf timestamp.
pub(crate) fn timestamp(text: Option<&str>) -> Option<prost_types::Timestamp> {
    let t: jiff::Timestamp = text?.parse().ok()?;
    Some(prost_types::Timestamp {
        seconds: t.as_second(),
        nanos: t.subsec_nanosecond(),
    })
}

/// JSON → `google.protobuf.Value`.
fn proto_value(v: Value) -> prost_types::Value {
    use prost_types::value::Kind;
    let kind = match v {
        Value::Null => Kind::NullValue(0),
        Value::Bool(b) => Kind::BoolValue(b),
        Value::Number(n) => Kind::NumberValue(n.as_f64().unwrap_or_default()),
        Value::String(s) => Kind::StringValue(s),
        Value::Array(items) => Kind::ListValue(prost_types::ListValue {
            values: items.into_iter().map(proto_value).collect(),
        }),
        Value::Object(map) => Kind::StructValue(proto_struct(map)),
    };
    prost_types::Value { kind: Some(kind) }
}

fn proto_struct(map: Map<String, Value>) -> prost_types::Struct {
    prost_types::Struct {
        fields: map.into_iter().map(|(k, v)| (k, proto_value(v))).collect(),
    }
}

/// A JSON object as `google.protobuf.Struct`; `None` for anything else.
pub(crate) fn to_struct(v: Value) -> Option<prost_types::Struct> {
    match v {
        Value::Object(map) => Some(proto_struct(map)),
        _ => None,
    }
}

/// A watch event as the proto message.
pub(crate) fn watch_event(e: &domain::WatchEvent) -> pb::WatchClustersResponse {
    pb::WatchClustersResponse {
        r#type: watch_event_type(e.kind).into(),
        resource_version: e.version.to_string(),
        cluster: e.cluster().map(|c| cluster_info(c.info.clone())),
    }
}

/// Where a watch request starts and how long it may last, from its
/// `resource_version`, `send_initial_events` and `timeout_seconds`.
pub(crate) fn watch_start(
    resource_version: &str,
    send_initial_events: bool,
    timeout_seconds: u32,
) -> Result<(domain::WatchFrom, Option<std::time::Duration>), domain::Error> {
    let from = domain::WatchFrom::read(Some(resource_version), send_initial_events)?;
    Ok((from, domain::watch_timeout(timeout_seconds.into())?))
}

/// A watch event's type as the proto enum.
pub(crate) fn watch_event_type(kind: domain::WatchEventType) -> pb::WatchEventType {
    match kind {
        domain::WatchEventType::Added => pb::WatchEventType::Added,
        domain::WatchEventType::Modified => pb::WatchEventType::Modified,
        domain::WatchEventType::Deleted => pb::WatchEventType::Deleted,
        domain::WatchEventType::Bookmark => pb::WatchEventType::Bookmark,
    }
}

/// A domain summary as the proto message.
pub(crate) fn cluster_info(i: domain::ClusterInfo) -> pb::ClusterInfo {
    pb::ClusterInfo {
        created_at: timestamp(i.created_at.as_deref()),
        lifecycle_warned_at: timestamp(i.lifecycle_warned_at.as_deref()),
        idle_since: timestamp(i.idle_since.as_deref()),
        suspends_at: timestamp(i.suspends_at.as_deref()),
        expires_at: timestamp(i.expires_at.as_deref()),
        kept_until: timestamp(i.kept_until.as_deref()),
        queued_since: timestamp(i.queued_since.as_deref()),
        queue_position: i.queue_position,
        queue_reason: i.queue_reason,
        site: i.site,
        site_unavailable_since: timestamp(i.site_unavailable_since.as_deref()),
        name: i.name,
        namespace: i.namespace,
        status: i.status.as_str().to_owned(),
        head_ip: i.head_ip,
        dashboard_url: i.dashboard_url,
        client_url: i.client_url,
        notebook_url: i.notebook_url,
        code_server_url: i.code_server_url,
        ssh_url: i.ssh_url,
        num_workers: i.num_workers,
        autoscaling_enabled: i.autoscaling_enabled,
        ready_workers: i.ready_workers,
        suspended: i.suspended,
        created_by: i.created_by,
        lifecycle: i.lifecycle,
        resource_version: i.resource_version,
    }
}

/// A domain picture as the proto message.
pub(crate) fn cluster_details(d: domain::ClusterDetails) -> pb::ClusterDetails {
    pb::ClusterDetails {
        info: Some(cluster_info(d.info)),
        head: Some(pb::HeadDetails {
            cpus: d.head.cpus,
            memory: d.head.memory,
            gpus: d.head.gpus,
            image: d.head.image,
            runs_tasks: d.head.runs_tasks,
        }),
        worker_groups: d
            .worker_groups
            .into_iter()
            .map(|g| pb::WorkerGroupDetails {
                name: g.name,
                replicas: g.replicas,
                min_replicas: g.min_replicas,
                max_replicas: g.max_replicas,
                cpus: g.cpus,
                memory: g.memory,
                gpus: g.gpus,
                image: g.image,
            })
            .collect(),
        ray_version: d.ray_version,
        python_version: d.python_version,
        services: d.services,
        proxy_urls: d.proxy_urls.into_iter().collect(),
        conditions: d
            .conditions
            .into_iter()
            .map(|c| pb::Condition {
                last_transition_time: timestamp(c.last_transition_time.as_deref()),
                r#type: c.type_,
                status: c.status,
                reason: c.reason,
                message: c.message,
            })
            .collect(),
        pods: d
            .pods
            .into_iter()
            .map(|p| pb::PodInfo {
                created_at: timestamp(p.created_at.as_deref()),
                name: p.name,
                node_type: p.node_type,
                group: p.group,
                phase: p.phase,
                ready: p.ready,
                reason: p.reason,
                message: p.message,
                pod_ip: p.pod_ip,
                node_name: p.node_name,
                restarts: p.restarts,
            })
            .collect(),
        events: d
            .events
            .into_iter()
            .map(|e| pb::EventInfo {
                last_seen: timestamp(e.last_seen.as_deref()),
                r#type: e.type_,
                reason: e.reason,
                message: e.message,
                object_kind: e.object_kind,
                object_name: e.object_name,
                count: e.count,
            })
            .collect(),
    }
}

/// A domain role as the proto enum.
pub(crate) fn role(r: Role) -> i32 {
    let role = match r {
        Role::Viewer => pb::Role::Viewer,
        Role::Editor => pb::Role::Editor,
        Role::Admin => pb::Role::Admin,
    };
    role as i32
}

/// Namespace access as the proto message.
pub(crate) fn namespace_access(n: domain::NamespaceAccess) -> pb::NamespaceAccess {
    pb::NamespaceAccess {
        namespace: n.namespace,
        role: role(n.role),
        via_teams: n.via_teams,
        quota: n.quota.into_iter().map(quota_line).collect(),
    }
}

/// One resource of a quota as the proto message.
pub(crate) fn quota_line(l: domain::quota::QuotaLine) -> pb::QuotaLine {
    pb::QuotaLine {
        resource: l.resource.as_str().to_owned(),
        site: l.site,
        limit: l.limit,
        used: l.used,
        remaining: l.remaining,
        used_fraction: l.used_fraction,
    }
}

/// An audit event (the view REST serves as it is) as the proto message.
pub(crate) fn audit_event(e: domain::audit::AuditEvent) -> pb::AuditEvent {
    pb::AuditEvent {
        occurred_at: timestamp(Some(&e.occurred_at)),
        completed_at: timestamp(e.completed_at.as_deref()),
        id: e.id,
        request_id: e.request_id,
        actor: Some(pb::Actor {
            subject: e.actor.subject,
            email: e.actor.email,
            groups: e.actor.groups,
            teams: e.actor.teams,
        }),
        source_ip: e.source_ip,
        user_agent: e.user_agent,
        transport: e.transport,
        action: e.action,
        namespace: e.namespace,
        cluster: e.cluster,
        request_summary: to_struct(e.request_summary),
        outcome: e.outcome,
        http_status: e.http_status.map(u32::from),
        grpc_code: e.grpc_code,
        error: e.error,
        duration_ms: e.duration_ms,
        correlation_id: e.correlation_id,
    }
}

/// A protobuf timestamp as RFC 3339 text.
pub(crate) fn rfc3339(t: &prost_types::Timestamp) -> Option<String> {
    jiff::Timestamp::new(t.seconds, t.nanos).ok().map(|t| t.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_parse_rfc3339() {
        let t = timestamp(Some("2025-01-02T03:04:05Z")).unwrap();
        assert_eq!(t.seconds, 1_735_787_045);
        assert!(timestamp(Some("yesterday")).is_none());
    }
}
