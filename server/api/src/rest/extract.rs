//! Extractors: the authenticated caller, and bodies/queries whose
//! rejections are problem documents.

use axum::{
    body::Bytes,
    extract::{FromRequest, FromRequestParts, Path, Query, Request},
    http::{HeaderMap, HeaderValue, Method, StatusCode, header, request::Parts},
};
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::{AppState, problem::ApiError, problem::Problem};
use crate::{
    control::Context,
    domain::{AuthFailure, ClusterRef, Error, audit::Transport, parse_yaml},
    edge,
};

/// The authenticated caller of a request, with its circumstances: from
/// its `Authorization` header only.
pub(crate) struct Caller(pub Context);

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        if !parts.headers.contains_key(header::AUTHORIZATION) && query_token(parts).is_some() {
            let meta = edge::request_meta(&parts.headers, &parts.extensions, Transport::Rest);
            let refused = Error::Unauthenticated(AuthFailure::TokenInQuery);
            let detail = "a token in the query of a request that is no event-stream watch";
            return Err(state.plane.refuse_unauthenticated(&meta, refused, detail).await.into());
        }
        authenticated(parts, state, &parts.headers).await.map(Self)
    }
}

/// The caller of a list route, which a browser's `EventSource` may open as
/// a watch: it cannot send headers, so (as RFC 6750 §2.3 allows) its token
/// may ride in the query, on a GET with `watch=true` that accepts
/// `text/event-stream` only. With an `Authorization` header too, the
/// request has several credentials and is refused.
pub(crate) struct ListCaller(pub Context);

impl FromRequestParts<AppState> for ListCaller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let Some(token) = event_stream_token(parts) else {
            return Caller::from_request_parts(parts, state)
                .await
                .map(|Caller(cx)| Self(cx));
        };
        let mut with = parts.headers.clone();
        let bearer = HeaderValue::from_str(&format!("Bearer {token}"))
            .map_err(|_| Error::Unauthenticated(AuthFailure::InvalidToken))?;
        with.append(header::AUTHORIZATION, bearer);
        authenticated(parts, state, &with).await.map(Self)
    }
}

async fn authenticated(parts: &Parts, state: &AppState, headers: &HeaderMap) -> Result<Context, ApiError> {
    let several = Error::invalid("authorization", "send one Authorization header, not several");
    edge::authenticate(
        &state.plane,
        &state.auth,
        headers,
        &parts.extensions,
        Transport::Rest,
        several,
    )
    .await
    .map_err(ApiError::from)
}

/// The query's `access_token`, if it has one.
fn query_token(parts: &Parts) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct TokenQuery {
        access_token: Option<String>,
    }
    Query::<TokenQuery>::try_from_uri(&parts.uri).ok()?.0.access_token
}

/// The query's token, when the request is a GET watch asking for
/// `text/event-stream`.
fn event_stream_token(parts: &Parts) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct WatchQuery {
        watch: Option<bool>,
    }
    let accepts = parts
        .headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("text/event-stream"));
    let watch = Query::<WatchQuery>::try_from_uri(&parts.uri).ok()?.0.watch == Some(true);
    (parts.method == Method::GET && accepts && watch)
        .then(|| query_token(parts))
        .flatten()
}

/// How a body is written.
enum Format {
    Json,
    Yaml,
}

fn format_of(req: &Request, yaml_allowed: bool) -> Result<Format, ApiError> {
    let content_type = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let media = content_type.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    match media.as_str() {
        "application/json" => Ok(Format::Json),
        m if m.starts_with("application/") && m.ends_with("+json") => Ok(Format::Json),
        "application/yaml" | "application/x-yaml" | "text/yaml" if yaml_allowed => Ok(Format::Yaml),
        _ => {
            let accepted = if yaml_allowed {
                "application/json or application/yaml"
            } else {
                "application/json"
            };
            Err(ApiError::from(Problem::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                format!(
                    "send the body as {accepted} (got {content_type:?}); with curl add -H 'Content-Type: application/json'"
                ),
            )))
        }
    }
}

async fn body_bytes(req: Request) -> Result<Bytes, ApiError> {
    Bytes::from_request(req, &()).await.map_err(|rejection| {
        if edge::is_body_timeout(&rejection) {
            ApiError::from(Problem::new(
                StatusCode::REQUEST_TIMEOUT,
                "request_timeout",
                "the request body did not arrive in time",
            ))
        } else if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::from(Problem::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "payload_too_large",
                "the body is larger than this server accepts",
            ))
        } else {
            ApiError::from(Problem::new(
                StatusCode::BAD_REQUEST,
                "invalid_argument",
                rejection.body_text(),
            ))
        }
    })
}

fn not_json(e: &serde_json::Error) -> ApiError {
    Error::invalid("", format!("not valid JSON: {e}")).into()
}

/// A cluster config body: JSON, or YAML with a YAML content type.
pub(crate) struct ConfigBody(pub Value);

impl<S: Send + Sync> FromRequest<S> for ConfigBody {
    type Rejection = ApiError;

    async fn from_request(req: Request, _: &S) -> Result<Self, Self::Rejection> {
        let format = format_of(&req, true)?;
        let bytes = body_bytes(req).await?;
        let value = match format {
            Format::Json => serde_json::from_slice(&bytes).map_err(|e| not_json(&e))?,
            Format::Yaml => {
                let text = std::str::from_utf8(&bytes)
                    .map_err(|_| ApiError::from(Error::invalid("", "the YAML is not UTF-8")))?;
                parse_yaml(text)?
            }
        };
        Ok(Self(value))
    }
}

/// A JSON body of a known shape.
pub(crate) struct JsonBody<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, _: &S) -> Result<Self, Self::Rejection> {
        format_of(&req, false)?;
        let bytes = body_bytes(req).await?;
        serde_json::from_slice(&bytes).map(Self).map_err(|e| not_json(&e))
    }
}

/// A query string of a known shape.
pub(crate) struct QueryOf<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for QueryOf<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        Query::<T>::from_request_parts(parts, state)
            .await
            .map(|Query(q)| Self(q))
            .map_err(|e| Error::invalid("query", e.body_text()).into())
    }
}

/// The cluster a path names (`/v1/namespaces/{namespace}/clusters/{name}`
/// and every route below it), as one value for the use cases. Read by the
/// parameters' names, so a route with more segments (a job's `{id}`, a
/// service's `{service}`) reads those apart.
pub(crate) struct ClusterPath(pub ClusterRef);

/// The two segments of a cluster's path.
#[derive(serde::Deserialize)]
struct ClusterSegments {
    namespace: String,
    name: String,
}

impl<S: Send + Sync> FromRequestParts<S> for ClusterPath {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        Path::<ClusterSegments>::from_request_parts(parts, state)
            .await
            .map(|Path(p)| Self(ClusterRef::new(p.namespace, p.name)))
            .map_err(|e| Error::invalid("path", e.body_text()).into())
    }
}

/// A job's segment below its cluster's path (`…/jobs/{id}`).
#[derive(serde::Deserialize)]
pub(crate) struct JobSegment {
    /// The job's id.
    pub id: String,
}

/// A service's segment below its cluster's path (`…/{service}`).
#[derive(serde::Deserialize)]
pub(crate) struct ServiceSegment {
    /// The service's name.
    pub service: String,
}

/// A working-dir package's segment below its cluster's path
/// (`…/packages/{package}`).
#[derive(serde::Deserialize)]
pub(crate) struct PackageSegment {
    /// The package's name.
    pub package: String,
}
