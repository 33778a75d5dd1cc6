//! krayne messages as JSON, with the proto field names the REST API uses.

use std::sync::OnceLock;

use prost_reflect::{DescriptorPool, DynamicMessage, Kind, MessageDescriptor, ReflectMessage as _, SerializeOptions};
use serde_json::Value;
use tonic::Code;

use crate::{ClientError, proto};

/// A generated message with its full protobuf name.
pub trait ProtoMessage: prost::Message + Sized {
    /// `krayne.v1.ClusterInfo` and so on.
    const FULL_NAME: &'static str;
}

macro_rules! named {
    ($($ty:ty => $name:literal),* $(,)?) => {
        $(impl ProtoMessage for $ty { const FULL_NAME: &'static str = $name; })*
    };
}

named! {
    proto::ClusterInfo => "krayne.v1.ClusterInfo",
    proto::ClusterDetails => "krayne.v1.ClusterDetails",
    proto::CreateClusterResponse => "krayne.v1.CreateClusterResponse",
    proto::WhoAmIResponse => "krayne.v1.WhoAmIResponse",
    proto::NamespaceAccess => "krayne.v1.NamespaceAccess",
    proto::AuditEvent => "krayne.v1.AuditEvent",
    proto::GetVersionResponse => "krayne.v1.GetVersionResponse",
    proto::HeadService => "krayne.v1.HeadService",
    proto::BrowserSession => "krayne.v1.BrowserSession",
    proto::Job => "krayne.v1.Job",
    proto::RayJob => "krayne.v1.RayJob",
    proto::NamespaceQuota => "krayne.v1.NamespaceQuota",
    proto::UsageReport => "krayne.v1.UsageReport",
    proto::ClusterLogs => "krayne.v1.ClusterLogs",
    proto::RayLogFiles => "krayne.v1.RayLogFiles",
    prost_types::Struct => "google.protobuf.Struct",
}

fn pool() -> Result<&'static DescriptorPool, ClientError> {
    static POOL: OnceLock<Result<DescriptorPool, String>> = OnceLock::new();
    POOL.get_or_init(|| DescriptorPool::decode(krayne_proto::FILE_DESCRIPTOR_SET).map_err(|e| e.to_string()))
        .as_ref()
        .map_err(|e| ClientError::new(Code::Internal, format!("bad descriptor set: {e}")))
}

/// The message in protobuf's JSON mapping, keeping proto field names
/// (`dashboard_url`, as REST has them), timestamps as RFC 3339 text,
/// 64-bit numbers as numbers, and every field: zero values, and `null`
/// for an unset optional one (as Krayne's JSON has every field, and
/// scripts index them). Enum values are named as the REST API names them
/// (`available`, `editor`; a job's status as Ray does, `RUNNING`), not as
/// protobuf constants.
pub fn to_json<M: ProtoMessage>(message: &M) -> Result<Value, ClientError> {
    let descriptor = pool()?
        .get_message_by_name(M::FULL_NAME)
        .ok_or_else(|| ClientError::new(Code::Internal, format!("{} is not in the descriptor set", M::FULL_NAME)))?;
    let dynamic = DynamicMessage::decode(descriptor, message.encode_to_vec().as_slice())
        .map_err(|e| ClientError::new(Code::Internal, e.to_string()))?;
    let options = SerializeOptions::new()
        .use_proto_field_name(true)
        .stringify_64_bit_integers(false)
        .skip_default_fields(false);
    let value = dynamic
        .serialize_with_options(serde_json::value::Serializer, &options)
        .map_err(|e| ClientError::new(Code::Internal, e.to_string()))?;
    Ok(as_documented(whole_numbers(value), &dynamic.descriptor()))
}

/// `value` (a message of type `descriptor`) with every missing field as
/// `null` and enum constants as the REST API names them, all the way down
/// (well-known types such as timestamps and `Struct` are left as they are).
fn as_documented(mut value: Value, descriptor: &MessageDescriptor) -> Value {
    if descriptor.full_name().starts_with("google.protobuf.") {
        return value;
    }
    let Value::Object(map) = &mut value else {
        return value;
    };
    for field in descriptor.fields() {
        let Some(slot) = map.get_mut(field.name()) else {
            map.insert(field.name().to_owned(), Value::Null);
            continue;
        };
        let each = |v: &mut Value, f: &dyn Fn(Value) -> Value| *v = f(std::mem::take(v));
        let convert: Box<dyn Fn(Value) -> Value> = match field.kind() {
            Kind::Message(inner) if !field.is_map() => Box::new(move |v| as_documented(v, &inner)),
            Kind::Enum(e) => {
                let prefix = format!("{}_", screaming(e.name()));
                let keep_case = e.full_name() == "krayne.v1.JobStatus";
                Box::new(move |v| match v {
                    Value::String(s) => {
                        let short = s.strip_prefix(&prefix).unwrap_or(&s);
                        Value::String(if keep_case {
                            short.to_owned()
                        } else {
                            short.to_ascii_lowercase()
                        })
                    }
                    other => other,
                })
            }
            _ => continue,
        };
        match slot {
            Value::Array(items) if field.is_list() => items.iter_mut().for_each(|v| each(v, &*convert)),
            v => each(v, &*convert),
        }
    }
    value
}

/// `ServiceState` → `SERVICE_STATE`, as protobuf prefixes its constants.
fn screaming(name: &str) -> String {
    let mut out = String::new();
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

/// `google.protobuf.Struct` carries every number as a double; a manifest's
/// `replicas: 1` should not come back as `1.0`.
fn whole_numbers(value: Value) -> Value {
    match value {
        Value::Number(n) => match n.as_f64() {
            Some(f) if n.is_f64() && f.fract() == 0.0 && f.abs() < 9e15 => Value::from(f as i64),
            _ => Value::Number(n),
        },
        Value::Array(items) => Value::Array(items.into_iter().map(whole_numbers).collect()),
        Value::Object(map) => Value::Object(map.into_iter().map(|(k, v)| (k, whole_numbers(v))).collect()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn cluster_info_uses_field_names_and_rfc3339() {
        let info = proto::ClusterInfo {
            name: "c".into(),
            namespace: "ns".into(),
            status: "ready".into(),
            dashboard_url: Some("http://10.0.0.1:8265".into()),
            created_at: Some(prost_types::Timestamp {
                seconds: 1_735_787_045,
                nanos: 0,
            }),
            ..Default::default()
        };
        let v = to_json(&info).unwrap();
        assert_eq!(v["dashboard_url"], "http://10.0.0.1:8265");
        assert_eq!(v["created_at"], "2025-01-02T03:04:05Z");
        assert_eq!(v["ready_workers"], 0);
        assert_eq!(
            v["head_ip"],
            Value::Null,
            "an unset optional field is null, never left out: {v}"
        );
        assert_eq!(v["code_server_url"], Value::Null);
    }

    #[test]
    fn enums_are_named_as_the_rest_api_names_them() {
        let service = proto::HeadService {
            state: proto::ServiceState::Available.into(),
            ..Default::default()
        };
        assert_eq!(to_json(&service).unwrap()["state"], "available");
        let job = proto::Job {
            status: proto::JobStatus::Running.into(),
            ..Default::default()
        };
        assert_eq!(to_json(&job).unwrap()["status"], "RUNNING", "as Ray names it");
        let me = proto::WhoAmIResponse {
            namespaces: vec![proto::NamespaceAccess {
                role: proto::Role::Editor.into(),
                ..Default::default()
            }],
            ..Default::default()
        };
        let v = to_json(&me).unwrap();
        assert_eq!(
            v["namespaces"][0]["role"], "editor",
            "in lists and nested messages: {v}"
        );
        assert_eq!(v["email"], Value::Null);
        assert_eq!(screaming("WatchEventType"), "WATCH_EVENT_TYPE");
    }

    #[test]
    fn every_named_message_is_in_the_pool() {
        let manifest = prost_types::Struct {
            fields: [(
                "kind".to_owned(),
                prost_types::Value {
                    kind: Some(prost_types::value::Kind::StringValue("RayCluster".into())),
                },
            )]
            .into(),
        };
        assert_eq!(to_json(&manifest).unwrap(), json!({"kind": "RayCluster"}));
        let numbers = prost_types::Struct {
            fields: [1.0, 0.5]
                .iter()
                .enumerate()
                .map(|(i, n)| {
                    (
                        i.to_string(),
                        prost_types::Value {
                            kind: Some(prost_types::value::Kind::NumberValue(*n)),
                        },
                    )
                })
                .collect(),
        };
        assert_eq!(to_json(&numbers).unwrap(), json!({"0": 1, "1": 0.5}));
        let event = proto::AuditEvent {
            duration_ms: Some(12),
            ..Default::default()
        };
        assert_eq!(to_json(&event).unwrap()["duration_ms"], 12);
        to_json(&proto::ClusterDetails::default()).unwrap();
        to_json(&proto::CreateClusterResponse::default()).unwrap();
        to_json(&proto::WhoAmIResponse::default()).unwrap();
        to_json(&proto::NamespaceAccess::default()).unwrap();
    }
}
