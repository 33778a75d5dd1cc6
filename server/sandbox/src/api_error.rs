//! Kubernetes `Status` failures with the reasons and codes the real API uses.

use axum::{
    http::StatusCode,
    response::{IntoResponse, Response},
};
use serde_json::{Value, json};

use super::Resource;

/// A failed API call, rendered as a `v1.Status`.
#[derive(Debug, Clone)]
pub struct ApiError {
    /// HTTP status code.
    pub code: u16,
    /// `NotFound`, `AlreadyExists`, `Conflict`, `Invalid`, …
    pub reason: &'static str,
    /// Human-readable message.
    pub message: String,
    /// `details`, when there are any.
    pub details: Option<Value>,
}

impl ApiError {
    fn new(code: u16, reason: &'static str, message: String) -> Self {
        Self {
            code,
            reason,
            message,
            details: None,
        }
    }

    fn with_details(mut self, resource: Resource, name: &str) -> Self {
        let mut details = json!({"name": name, "kind": resource.plural()});
        if !resource.group().is_empty() {
            details["group"] = json!(resource.group());
        }
        self.details = Some(details);
        self
    }

    fn qualified(resource: Resource) -> String {
        match resource.group() {
            "" => resource.plural().to_owned(),
            group => format!("{}.{group}", resource.plural()),
        }
    }

    /// 404 for a missing object of a resource outside [`Resource`] (a
    /// CustomResourceDefinition).
    pub fn not_found_named(plural: &str, group: &str, name: &str) -> Self {
        let message = format!("{plural}.{group} \"{name}\" not found");
        let mut e = Self::new(404, "NotFound", message);
        e.details = Some(json!({"name": name, "group": group, "kind": plural}));
        e
    }

    /// 500 for what the sandbox itself cannot do.
    pub fn internal(message: String) -> Self {
        Self::new(500, "InternalError", message)
    }

    /// 404 for a missing object.
    pub fn not_found(resource: Resource, name: &str) -> Self {
        let message = format!("{} \"{name}\" not found", Self::qualified(resource));
        Self::new(404, "NotFound", message).with_details(resource, name)
    }

    /// 409 for a name already taken.
    pub fn already_exists(resource: Resource, name: &str) -> Self {
        let message = format!("{} \"{name}\" already exists", Self::qualified(resource));
        Self::new(409, "AlreadyExists", message).with_details(resource, name)
    }

    /// 409 for a stale `resourceVersion`.
    pub fn conflict(resource: Resource, name: &str) -> Self {
        let message = format!(
            "Operation cannot be fulfilled on {} \"{name}\": the object has been modified; \
             please apply your changes to the latest version and try again",
            Self::qualified(resource)
        );
        Self::new(409, "Conflict", message).with_details(resource, name)
    }

    /// 409 for a delete whose precondition (`UID`, `ResourceVersion`) the
    /// object no longer meets, in the API server's words.
    pub fn precondition_failed(resource: Resource, name: &str, field: &str, wanted: &str, actual: &str) -> Self {
        let message =
            format!("Precondition failed: {field} in precondition: {wanted}, {field} in object meta: {actual}");
        Self::new(409, "Conflict", message).with_details(resource, name)
    }

    /// 409 for a server-side apply that would change other managers'
    /// fields, naming each (`conflict with "m": .spec.holderIdentity`).
    pub fn apply_conflicts(resource: Resource, name: &str, conflicts: &[String]) -> Self {
        let message = format!(
            "Apply failed with {} conflict{}: {}",
            conflicts.len(),
            if conflicts.len() == 1 { "" } else { "s" },
            conflicts.join(", ")
        );
        Self::new(409, "Conflict", message).with_details(resource, name)
    }

    /// 422 with one cause per `(field, message)`.
    pub fn invalid(resource: Resource, name: &str, causes: &[(String, String)]) -> Self {
        let summary: Vec<String> = causes.iter().map(|(f, m)| format!("{f}: {m}")).collect();
        let message = format!("{} \"{name}\" is invalid: {}", resource.kind(), summary.join(", "));
        let mut e = Self::new(422, "Invalid", message).with_details(resource, name);
        if let Some(d) = e.details.as_mut() {
            d["kind"] = json!(resource.kind());
            d["causes"] = causes
                .iter()
                .map(|(field, m)| json!({"reason": "FieldValueInvalid", "message": m, "field": field}))
                .collect();
        }
        e
    }

    /// 404 for a path the API does not serve.
    pub fn not_found_path() -> Self {
        Self::new(
            404,
            "NotFound",
            "the server could not find the requested resource".into(),
        )
    }

    /// 422 for list or watch options the API server refuses, as
    /// kube-apiserver's `ValidateListOptions` words it.
    pub fn invalid_options(problems: &[String]) -> Self {
        let message = format!("ListOptions.meta.k8s.io \"\" is invalid: {}", problems.join(", "));
        Self::new(422, "Invalid", message)
    }

    /// 400 for a body or parameter that cannot be read.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message.into())
    }

    /// 405 for a verb the resource does not support.
    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        Self::new(405, "MethodNotAllowed", message.into())
    }

    /// 415 for a patch type the sandbox does not speak.
    pub fn unsupported_media_type(content_type: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json; got {content_type:?}"
            ),
        )
    }

    /// 403 as RBAC words it: `user` may not `verb` the resource.
    pub fn forbidden(user: &str, verb: &str, group: &str, resource: &str, namespace: Option<&str>) -> Self {
        let qualified = if group.is_empty() {
            resource.to_owned()
        } else {
            format!("{resource}.{group}")
        };
        let scope = namespace.map_or_else(
            || "at the cluster scope".to_owned(),
            |ns| format!("in the namespace \"{ns}\""),
        );
        let mut e = Self::new(
            403,
            "Forbidden",
            format!(
                "{qualified} is forbidden: User \"{user}\" cannot {verb} resource \"{resource}\" in API group \"{group}\" {scope}"
            ),
        );
        e.details = Some(json!({"kind": resource, "group": group}));
        e
    }

    /// 410 for a watch from a `resourceVersion` no longer kept.
    pub fn gone(rv: u64) -> Self {
        Self::new(410, "Expired", format!("too old resource version: {rv}"))
    }

    /// The `v1.Status` object.
    pub fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(d) = &self.details {
            status["details"] = d.clone();
        }
        status
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let code = StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        (code, axum::Json(self.to_status())).into_response()
    }
}
