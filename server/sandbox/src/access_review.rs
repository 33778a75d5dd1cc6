//! `authorization.k8s.io/v1` SelfSubjectAccessReviews, so that `kubectl
//! auth can-i` answers: allowed, unless the sandbox was told to forbid
//! that verb on that resource ([`crate::Sandbox::forbid`]), as its RBAC
//! refuses such requests.

use axum::{Json, extract::State, response::IntoResponse as _, response::Response};
use serde_json::{Value, json};

use super::{ApiError, api::Shared};

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
    if !content_type.starts_with("application/json") {
        // Only JSON here: clients fall back to it, as from an API server
        // that does not speak protobuf.
        return ApiError::unsupported_media_type(content_type).into_response();
    }
    let Ok(mut review) = serde_json::from_slice::<Value>(&body) else {
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
