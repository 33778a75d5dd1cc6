//! proto ⇄ domain, at the edge.

use krayne_proto::v1 as pb;
use serde_json::{Map, Value, json};

use crate::domain::{self, Role};

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

fn put<T: serde::Serialize>(map: &mut Map<String, Value>, key: &str, value: Option<T>) {
    if let Some(v) = value {
        map.insert(key.to_owned(), json!(v));
    }
}

/// A structured spec as the Krayne config tree the service validates, so
/// both transports report the same violations at the same paths.
pub(crate) fn spec_to_config(s: &pb::ClusterSpec) -> Value {
    let mut m = Map::new();
    m.insert("name".into(), json!(s.name));
    put(&mut m, "namespace", s.namespace.as_ref());
    if let Some(h) = &s.head {
        let mut head = Map::new();
        put(&mut head, "cpus", h.cpus.as_ref());
        put(&mut head, "memory", h.memory.as_ref());
        put(&mut head, "gpus", h.gpus);
        put(&mut head, "image", h.image.as_ref());
        put(&mut head, "runs_tasks", h.runs_tasks);
        m.insert("head".into(), Value::Object(head));
    }
    if !s.worker_groups.is_empty() {
        let groups = s
            .worker_groups
            .iter()
            .map(|g| {
                let mut group = Map::new();
                put(&mut group, "name", g.name.as_ref());
                put(&mut group, "replicas", g.replicas);
                put(&mut group, "min_replicas", g.min_replicas);
                put(&mut group, "max_replicas", g.max_replicas);
                put(&mut group, "cpus", g.cpus.as_ref());
                put(&mut group, "memory", g.memory.as_ref());
                put(&mut group, "gpus", g.gpus);
                put(&mut group, "image", g.image.as_ref());
                Value::Object(group)
            })
            .collect();
        m.insert("worker_groups".into(), Value::Array(groups));
    }
    if let Some(sv) = &s.services {
        let mut services = Map::new();
        put(&mut services, "notebook", sv.notebook);
        put(&mut services, "code_server", sv.code_server);
        put(&mut services, "ssh", sv.ssh);
        m.insert("services".into(), Value::Object(services));
    }
    if let Some(a) = &s.autoscaler {
        let mut autoscaler = Map::new();
        put(&mut autoscaler, "enabled", a.enabled);
        put(&mut autoscaler, "idle_timeout_seconds", a.idle_timeout_seconds);
        put(&mut autoscaler, "upscaling_mode", a.upscaling_mode.as_ref());
        put(&mut autoscaler, "cpu", a.cpu.as_ref());
        put(&mut autoscaler, "memory", a.memory.as_ref());
        m.insert("autoscaler".into(), Value::Object(autoscaler));
    }
    Value::Object(m)
}

/// A domain summary as the proto message.
pub(crate) fn cluster_info(i: domain::ClusterInfo) -> pb::ClusterInfo {
    pb::ClusterInfo {
        created_at: timestamp(i.created_at.as_deref()),
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
    }
}

/// An audit row as the proto message.
pub(crate) fn audit_event(e: domain::audit::AuditEntry) -> pb::AuditEvent {
    pb::AuditEvent {
        occurred_at: timestamp(Some(&e.occurred_at)),
        completed_at: timestamp(e.completed_at.as_deref()),
        id: e.id,
        request_id: e.meta.request_id,
        actor: Some(pb::Actor {
            subject: e.subject,
            email: e.email,
            groups: e.groups,
            teams: e.teams,
        }),
        source_ip: e.meta.source_ip,
        user_agent: e.meta.user_agent,
        transport: e.meta.transport.as_str().to_owned(),
        action: e.action,
        namespace: e.namespace,
        cluster: e.cluster,
        request_summary: to_struct(e.summary),
        outcome: e.outcome.as_str().to_owned(),
        http_status: e.http_status.map(u32::from),
        grpc_code: e.grpc_code,
        error: e.error,
        duration_ms: e.duration_ms,
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
    fn structured_specs_become_krayne_trees_with_only_what_is_set() {
        let spec = pb::ClusterSpec {
            name: "c".into(),
            head: Some(pb::HeadSpec {
                cpus: Some("2".into()),
                ..Default::default()
            }),
            worker_groups: vec![pb::WorkerGroupSpec {
                replicas: Some(3),
                ..Default::default()
            }],
            ..Default::default()
        };
        assert_eq!(
            spec_to_config(&spec),
            json!({"name": "c", "head": {"cpus": "2"}, "worker_groups": [{"replicas": 3}]})
        );
    }

    #[test]
    fn timestamps_parse_rfc3339() {
        let t = timestamp(Some("2025-01-02T03:04:05Z")).unwrap();
        assert_eq!(t.seconds, 1_735_787_045);
        assert!(timestamp(Some("yesterday")).is_none());
    }
}
