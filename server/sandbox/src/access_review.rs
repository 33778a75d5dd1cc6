//! `authorization.k8s.io/v1` SelfSubjectAccessReviews, so that `kubectl
//! auth can-i` answers: allowed, unless the sandbox was told to forbid
//! that verb on that resource ([`crate::Sandbox::forbid`]), as its RBAC
//! refuses such requests. kubectl sends the review as protobuf (the API
//! server's `k8s\0` envelope around it): its resource attributes are read
//! from that; the answer is JSON, which clients accept.

use axum::{Json, extract::State, response::IntoResponse as _, response::Response};
use serde_json::{Value, json};

use super::{ApiError, state::Shared};

/// `POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews`.
pub(super) async fn review(
    State(s): State<Shared>,
    headers: axum::http::HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let content_type = headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json");
    let read = if content_type.starts_with("application/vnd.kubernetes.protobuf") {
        from_protobuf(&body)
    } else if content_type.starts_with("application/json") {
        serde_json::from_slice::<Value>(&body).ok()
    } else {
        return ApiError::unsupported_media_type(content_type).into_response();
    };
    let Some(mut review) = read else {
        return ApiError::bad_request("the body is not a SelfSubjectAccessReview").into_response();
    };
    let attributes = &review["spec"]["resourceAttributes"];
    let (verb, resource, sub) = (
        attributes["verb"].as_str().unwrap_or(""),
        attributes["resource"].as_str().unwrap_or(""),
        attributes["subresource"].as_str().unwrap_or(""),
    );
    let rbac_name = if sub.is_empty() {
        resource.to_owned()
    } else {
        format!("{resource}/{sub}")
    };
    let refused = s
        .forbidden
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .any(|(v, r)| (v == verb || v == "*") && *r == rbac_name);
    review["status"] = if refused {
        json!({"allowed": false, "denied": true, "reason": "the sandbox forbids it (Sandbox::forbid)"})
    } else {
        json!({"allowed": true})
    };
    review["apiVersion"] = json!("authorization.k8s.io/v1");
    review["kind"] = json!("SelfSubjectAccessReview");
    (axum::http::StatusCode::CREATED, Json(review)).into_response()
}

/// The protobuf envelope's magic number.
const MAGIC: &[u8] = b"k8s\0";

/// `runtime.Unknown`, the envelope.
#[derive(Clone, PartialEq, prost::Message)]
struct Unknown {
    #[prost(bytes = "vec", optional, tag = "2")]
    raw: Option<Vec<u8>>,
}

/// The parts of `SelfSubjectAccessReview` a review needs.
#[derive(Clone, PartialEq, prost::Message)]
struct Review {
    #[prost(message, optional, tag = "2")]
    spec: Option<ReviewSpec>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct ReviewSpec {
    #[prost(message, optional, tag = "1")]
    resource_attributes: Option<ResourceAttributes>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct ResourceAttributes {
    #[prost(string, optional, tag = "1")]
    namespace: Option<String>,
    #[prost(string, optional, tag = "2")]
    verb: Option<String>,
    #[prost(string, optional, tag = "3")]
    group: Option<String>,
    #[prost(string, optional, tag = "5")]
    resource: Option<String>,
    #[prost(string, optional, tag = "6")]
    subresource: Option<String>,
    #[prost(string, optional, tag = "7")]
    name: Option<String>,
}

/// The object inside a protobuf body's `k8s\0` envelope.
pub(crate) fn unwrap_envelope(body: &[u8]) -> Option<Vec<u8>> {
    use prost::Message as _;
    Unknown::decode(body.strip_prefix(MAGIC)?).ok()?.raw
}

/// A protobuf review as the JSON one it stands for.
fn from_protobuf(body: &[u8]) -> Option<Value> {
    use prost::Message as _;
    let review = Review::decode(unwrap_envelope(body)?.as_slice()).ok()?;
    let a = review.spec?.resource_attributes?;
    Some(json!({
        "apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {
            "namespace": a.namespace, "verb": a.verb, "group": a.group,
            "resource": a.resource, "subresource": a.subresource, "name": a.name,
        }},
    }))
}
