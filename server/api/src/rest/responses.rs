//! Error answers several routes share, declared once for the OpenAPI
//! document (`responses(Refusals, …)` in a route's `#[utoipa::path]`, first,
//! so a route's own description of the same status wins), so each
//! operation lists the 4xx and 5xx it can really return. The variants are
//! never built: each only names a status and its problem document.
#![expect(dead_code, reason = "response declarations for utoipa; never constructed")]

use utoipa::IntoResponses;

use super::problem::Problem;

/// What any route under `/v1` can answer before or besides its own work.
#[derive(IntoResponses)]
pub(crate) enum Refusals {
    /// A request krayne cannot read at all.
    #[response(
        status = 400,
        description = "Malformed request: an unreadable `Content-Length`, several `Authorization` headers, a bad query",
        content_type = "application/problem+json"
    )]
    InvalidArgument(Problem),
    /// No valid token.
    #[response(
        status = 401,
        description = "No valid token (`WWW-Authenticate: Bearer`)",
        content_type = "application/problem+json"
    )]
    Unauthenticated(Problem),
    /// Over a rate.
    #[response(
        status = 429,
        description = "Over the caller's rate, or its address's rate of refused tokens; see `Retry-After`",
        content_type = "application/problem+json"
    )]
    RateLimited(Problem),
    /// A declared body over the limit (any method).
    #[response(
        status = 413,
        description = "Body (or its declared length) over the limit",
        content_type = "application/problem+json"
    )]
    PayloadTooLarge(Problem),
    /// krayne's fault.
    #[response(
        status = 500,
        description = "krayne failed (e.g. Kubernetes refused krayne's own request); the `request_id` finds it in the logs",
        content_type = "application/problem+json"
    )]
    Internal(Problem),
    /// Too slow.
    #[response(
        status = 504,
        description = "No answer in time (Kubernetes too slow, or the request timeout)",
        content_type = "application/problem+json"
    )]
    DeadlineExceeded(Problem),
}

/// What a route that reads from Kubernetes (or its cache) can answer.
#[derive(IntoResponses)]
pub(crate) enum KubernetesReads {
    /// Kubernetes cannot be reached.
    #[response(
        status = 503,
        description = "Kubernetes unreachable",
        content_type = "application/problem+json"
    )]
    Unavailable(Problem),
    /// Kubernetes is too slow.
    #[response(
        status = 504,
        description = "Kubernetes did not answer in time",
        content_type = "application/problem+json"
    )]
    DeadlineExceeded(Problem),
}

/// What a route that reads a request body can answer about the body itself.
#[derive(IntoResponses)]
pub(crate) enum Bodies {
    /// The body came too slowly.
    #[response(
        status = 408,
        description = "The body did not arrive within the body timeout",
        content_type = "application/problem+json"
    )]
    RequestTimeout(Problem),
    /// The body is too large.
    #[response(
        status = 413,
        description = "Body (or its declared length) over the limit",
        content_type = "application/problem+json"
    )]
    PayloadTooLarge(Problem),
}

/// What a route that reads one cluster can answer about its caller and
/// the cluster.
#[derive(IntoResponses)]
pub(crate) enum ViewerOfCluster {
    /// The caller may not read the namespace.
    #[response(
        status = 403,
        description = "No viewer role on the namespace",
        content_type = "application/problem+json"
    )]
    PermissionDenied(Problem),
    /// No cluster of that name.
    #[response(
        status = 404,
        description = "No such cluster",
        content_type = "application/problem+json"
    )]
    NotFound(Problem),
}

/// What a route that changes one cluster can answer about its caller and
/// the cluster.
#[derive(IntoResponses)]
pub(crate) enum EditorOfCluster {
    /// The caller may not change the namespace's clusters.
    #[response(
        status = 403,
        description = "No editor role on the namespace",
        content_type = "application/problem+json"
    )]
    PermissionDenied(Problem),
    /// No cluster of that name.
    #[response(
        status = 404,
        description = "No such cluster",
        content_type = "application/problem+json"
    )]
    NotFound(Problem),
}

/// A route for viewers whose 404 says more than "no such cluster".
#[derive(IntoResponses)]
pub(crate) enum Viewer {
    /// The caller may not read the namespace.
    #[response(
        status = 403,
        description = "No viewer role on the namespace",
        content_type = "application/problem+json"
    )]
    PermissionDenied(Problem),
}

/// A route for editors whose 404 says more than "no such cluster".
#[derive(IntoResponses)]
pub(crate) enum Editor {
    /// The caller may not change the namespace's clusters.
    #[response(
        status = 403,
        description = "No editor role on the namespace",
        content_type = "application/problem+json"
    )]
    PermissionDenied(Problem),
}
