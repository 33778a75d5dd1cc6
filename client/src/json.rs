//! krayne messages as JSON, with the proto field names the REST API uses.

use std::sync::OnceLock;

use prost_reflect::{DescriptorPool, DynamicMessage, SerializeOptions};
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
    proto::NamespaceQuota => "krayne.v1.NamespaceQuota",
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
/// 64-bit numbers as numbers, and every field, including zero values.
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
    Ok(whole_numbers(value))
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
        assert!(v.get("head_ip").is_none(), "unset optional fields are left out: {v}");
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
