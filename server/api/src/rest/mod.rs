//! The REST transport: axum routes documented with utoipa, problem+json
//! errors, and the HTTP middleware (request ids, tracing, timeouts, body
//! limit, gzip, CORS). Calls the control plane (`krayne_control::ControlPlane`) only.

mod allocation;
mod audit;
mod clusters;
mod dto;
pub(crate) mod extract;
mod identity;
mod jobs;
pub(crate) mod paths;
mod pod_logs;
pub(crate) mod problem;
mod quotas;
mod rayjobs;
pub(crate) mod responses;
mod services;
mod usage;
mod warnings;
mod watch;

use std::{sync::Arc, time::Duration};

pub use crate::browser::{AppHosts, by_host};
use axum::{
    Router,
    extract::{DefaultBodyLimit, Request},
    http::{HeaderValue, Method, StatusCode, header},
    middleware::{self, Next},
    response::{IntoResponse, Response},
};
pub use problem::Problem;
use tower_http::{
    catch_panic::CatchPanicLayer,
    compression::CompressionLayer,
    cors::{AllowOrigin, CorsLayer},
    sensitive_headers::SetSensitiveRequestHeadersLayer,
    trace::TraceLayer,
};
use utoipa::{
    Modify, OpenApi,
    openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme},
};
use utoipa_axum::{router::OpenApiRouter, routes};
use utoipa_swagger_ui::SwaggerUi;

pub use crate::edge::REQUEST_ID;
use crate::{
    auth::Authenticator,
    control::ControlPlane,
    edge::{self, BodyTimeout, CORRELATION_ID, DeadlineBody, DeclaredRefusal},
};

/// What the handlers share.
#[derive(Clone)]
pub struct AppState {
    /// The use cases.
    pub plane: ControlPlane,
    /// Token verification and team mapping.
    pub auth: Authenticator,
    /// How long a proxied request's body may pause between frames (a
    /// stalled upload must not hold a connection to a service).
    pub proxy_body_idle: Duration,
    /// Browser sessions' idle connections to services.
    pub(crate) upstreams: Arc<crate::browser::upstreams::Upstreams>,
}

impl AppState {
    /// The handlers' state over `plane`.
    pub fn new(plane: ControlPlane, auth: Authenticator, proxy_body_idle: Duration) -> Self {
        // A page's requests come in bursts; an idle connection holds one
        // of its caller's tunnel permits, so it is not kept for long.
        let upstreams = crate::browser::upstreams::Upstreams::new(Duration::from_secs(60), plane.stopping());
        Self {
            plane,
            auth,
            proxy_body_idle,
            upstreams,
        }
    }
}

/// HTTP limits and browser access.
#[derive(Debug, Clone)]
pub struct RestSettings {
    /// Largest request body, in bytes.
    pub body_limit: usize,
    /// Longest a unary request may take (waits have their own timeout).
    pub request_timeout: Duration,
    /// Longest a request body may take to arrive, on every route and
    /// both transports (a declared body never sent must not hold a
    /// connection).
    pub body_timeout: Duration,
    /// Origins allowed to call from a browser (exact matches).
    pub cors_origins: Vec<String>,
}

impl Default for RestSettings {
    fn default() -> Self {
        Self {
            body_limit: 1024 * 1024,
            request_timeout: Duration::from_secs(30),
            body_timeout: Duration::from_secs(10),
            cors_origins: Vec::new(),
        }
    }
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "krayne",
        description = "Multi-tenant control plane for Ray clusters on Kubernetes. Every route under /v1 needs \
                       `Authorization: Bearer <JWT>`; errors are RFC 9457 problem documents.",
        license(name = "Apache-2.0")
    ),
    modifiers(&BearerAuth),
    // Query parameters refer to these; routes register only body schemas.
    // The create body is inline; its sections refer to these.
    components(schemas(crate::domain::FieldValidation, crate::domain::Quantity, crate::domain::UpscalingMode)),
    security(("bearer" = [])),
    tags(
        (name = "clusters", description = "Ray cluster lifecycle"),
        (name = "identity", description = "Who the caller is and what they may use"),
        (name = "usage", description = "GPU-, CPU- and memory-hours per namespace, cluster, creator, team and day"),
        (name = "audit", description = "Who did what to which cluster, and how it ended"),
        (name = "services", description = "A cluster's services (dashboard, Ray client, notebook, code-server, SSH) through this server"),
        (name = "jobs", description = "Ray jobs on a cluster, through its head's Jobs API"),
        (name = "rayjobs", description = "Jobs with a cluster of their own (KubeRay RayJobs; `krayne run`)"),
    )
)]
struct ApiDoc;

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        let scheme = HttpBuilder::new()
            .scheme(HttpAuthScheme::Bearer)
            .bearer_format("JWT")
            .build();
        components.add_security_scheme("bearer", SecurityScheme::Http(scheme));
    }
}

fn api_routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .routes(routes!(identity::whoami))
        .routes(routes!(identity::namespaces))
        .routes(routes!(identity::version))
        .routes(routes!(identity::client_settings))
        .routes(routes!(quotas::get_quota))
        .routes(routes!(usage::namespace_usage))
        .routes(routes!(usage::usage))
        .routes(routes!(allocation::allocation))
        .routes(routes!(clusters::list_all))
        .routes(routes!(clusters::list, clusters::create))
        .routes(routes!(clusters::get, clusters::delete))
        .routes(routes!(clusters::describe))
        .routes(routes!(clusters::scale))
        .routes(routes!(clusters::suspend))
        .routes(routes!(clusters::keep))
        .routes(routes!(clusters::resume))
        .routes(routes!(services::list_services))
        .routes(routes!(services::ray_credentials))
        .routes(routes!(crate::browser::sessions::create_session))
        .routes(routes!(crate::browser::sessions::sign_in))
        .routes(routes!(jobs::list_jobs, jobs::submit_job))
        .routes(routes!(jobs::get_job, jobs::delete_job))
        .routes(routes!(jobs::stop_job))
        .routes(routes!(rayjobs::list_rayjobs, rayjobs::create_rayjob))
        .routes(routes!(rayjobs::get_rayjob, rayjobs::delete_rayjob))
        .routes(routes!(audit::list_audit_events))
}

/// The OpenAPI document of the REST API.
pub fn openapi() -> utoipa::openapi::OpenApi {
    let (_, mut api) = api_routes().merge(long_lived()).split_for_parts();
    api.info.version = env!("CARGO_PKG_VERSION").to_owned();
    api
}

/// Routes without the request timeout: long polls carry their own
/// (`timeout_seconds`), tunnels their idle timeout.
fn long_lived() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(clusters::wait))
        .routes(routes!(services::tunnel))
        .merge(streams())
}

/// Routes whose bodies stream, either way: no compression (a followed
/// log's lines must not wait in an encoder), no API body limit (a package
/// has its own, and an idle timeout instead of a total one).
fn streams() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(jobs::job_logs))
        .routes(routes!(rayjobs::rayjob_logs))
        .routes(routes!(pod_logs::cluster_logs))
        .routes(routes!(pod_logs::ray_logs))
        .routes(routes!(pod_logs::ray_log_file))
        .routes(routes!(jobs::has_package, jobs::upload_package))
}

async fn timeout(limit: Duration, request: Request, next: Next) -> Response {
    match tokio::time::timeout(limit, next.run(request)).await {
        Ok(response) => response,
        Err(_) => Problem::new(
            StatusCode::GATEWAY_TIMEOUT,
            "deadline_exceeded",
            "the request took too long",
        )
        .into_response(),
    }
}

/// Middleware: a body declared over the limit is refused (413) as soon as
/// the headers are in, not after waiting for it; every body must arrive
/// within the body timeout (else 408, see `extract`).
async fn body_limits(limit: usize, body_timeout: Duration, request: Request, next: Next) -> Response {
    let on_timeout = |d| -> axum::BoxError { Box::new(BodyTimeout(d)) };
    match edge::check_declared(request, Some(limit as u64), body_timeout, on_timeout) {
        Ok(request) => {
            let timed = |body| axum::body::Body::new(DeadlineBody::total(body, body_timeout, on_timeout));
            next.run(request.map(timed)).await
        }
        Err(DeclaredRefusal::TooLarge(n)) => Problem::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            format!("the body declares {n} bytes; this server accepts at most {limit}"),
        )
        .into_response(),
        Err(DeclaredRefusal::Unreadable) => {
            Problem::new(StatusCode::BAD_REQUEST, "invalid_argument", "unreadable Content-Length").into_response()
        }
    }
}

/// What gzip may hold back: not a watch's events (an encoder would keep
/// them until its buffer fills), nor the other defaults' exclusions.
fn compressible() -> impl tower_http::compression::Predicate {
    use tower_http::compression::predicate::{DefaultPredicate, NotForContentType, Predicate as _};
    DefaultPredicate::new()
        .and(NotForContentType::const_new("application/x-ndjson"))
        .and(NotForContentType::const_new("text/event-stream"))
}

fn cors(origins: &[String]) -> CorsLayer {
    let origins: Vec<HeaderValue> = origins.iter().filter_map(|o| HeaderValue::from_str(o).ok()).collect();
    CorsLayer::new()
        .allow_origin(AllowOrigin::list(origins))
        .allow_methods([Method::GET, Method::POST, Method::DELETE])
        .allow_headers([header::AUTHORIZATION, header::CONTENT_TYPE, REQUEST_ID, CORRELATION_ID])
        .expose_headers([REQUEST_ID, CORRELATION_ID, header::WARNING])
        .max_age(Duration::from_secs(600))
}

fn panic_response(_: Box<dyn std::any::Any + Send + 'static>) -> Response {
    tracing::error!("a request handler panicked");
    let body = serde_json::json!({"type": "https://krayne.dev/problems/internal", "title": "Internal Server Error",
        "status": 500, "detail": "internal error", "code": "internal"});
    (
        StatusCode::INTERNAL_SERVER_ERROR,
        [(header::CONTENT_TYPE, "application/problem+json")],
        body.to_string(),
    )
        .into_response()
}

/// A request's span: its method and path, never its query (a sign-in
/// link's ticket rides there).
pub(crate) fn request_span<B>(request: &axum::http::Request<B>) -> tracing::Span {
    tracing::debug_span!("request", method = %request.method(), path = %request.uri().path())
}

/// The REST API, `/openapi.json` and `/docs`, with every middleware.
pub fn router(state: AppState, settings: &RestSettings) -> Router {
    let limit = settings.request_timeout;
    let (body_limit, body_timeout) = (settings.body_limit, settings.body_timeout);
    let (unary, _) = api_routes().split_for_parts();
    let unary = unary.layer(middleware::from_fn(move |r, n| timeout(limit, r, n)));
    let (waits, _) = OpenApiRouter::new()
        .routes(routes!(clusters::wait))
        .routes(routes!(services::tunnel))
        .split_for_parts();
    let (streamed, _) = streams().split_for_parts();
    let doc = openapi();
    let proxied = crate::browser::proxy::router(state.clone());
    let rest = unary
        .merge(waits)
        .route_layer(middleware::from_fn(crate::ops::track_http))
        .fallback(|| async { Problem::new(StatusCode::NOT_FOUND, "not_found", "no such route") })
        .method_not_allowed_fallback(|| async {
            Problem::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed",
                "this route does not take that method",
            )
        })
        .layer(middleware::from_fn(move |r, n| {
            body_limits(body_limit, body_timeout, r, n)
        }))
        .layer(middleware::from_fn(problem::render_problems))
        .layer(DefaultBodyLimit::max(settings.body_limit))
        .with_state(state.clone());
    // The proxy's answers pass through untouched (the service's errors
    // are the service's): no compression, problems only for krayne's own
    // refusals, no body
    // limits or request timeout (its connections have their own).
    let proxied = proxied
        .route_layer(middleware::from_fn(crate::ops::track_http))
        .layer(middleware::from_fn(problem::render_own_problems));
    let streamed = streamed
        .route_layer(middleware::from_fn(crate::ops::track_http))
        .layer(middleware::from_fn(problem::render_problems))
        .layer(cors(&settings.cors_origins))
        .with_state(state.clone());
    Router::new()
        .merge(SwaggerUi::new("/docs").url("/openapi.json", doc))
        .merge(rest)
        .layer(CompressionLayer::new().gzip(true).compress_when(compressible()))
        .layer(cors(&settings.cors_origins))
        .merge(streamed)
        .merge(proxied)
        .layer(
            TraceLayer::new_for_http()
                .make_span_with(request_span)
                // A 5xx is logged where krayne knows why (an internal
                // error, an outage); a head's or service's 502 is its
                // tenant's doing, which must not flood the log.
                .on_failure(tower_http::trace::DefaultOnFailure::new().level(tracing::Level::DEBUG)),
        )
        .layer(SetSensitiveRequestHeadersLayer::new([header::AUTHORIZATION]))
        .layer(CatchPanicLayer::custom(panic_response))
}

#[cfg(test)]
#[path = "schema_tests.rs"]
mod schema_tests;
