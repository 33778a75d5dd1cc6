//! Per-service hosts (`--apps-domain`): a request to
//! `{svc}--{cluster}--{ns}.{domain}` belongs to that service, whole: its
//! sign-in link at `/_krayne/sign-in`, every other path proxied as it is.
//! A session cookie there is host-only, so no other cluster's pages (nor
//! the API's origin) ever share an origin with it.

use axum::{
    Extension, Router,
    extract::{Query, Request, State, rejection::QueryRejection},
    http::{StatusCode, header},
    middleware::{self, Next},
    response::{IntoResponse, Response},
    routing::get,
};
use tower::ServiceExt as _;
use tower_http::trace::TraceLayer;

use super::{
    proxy::{Target, forward},
    sessions::{Landing, SignInQuery, signed_in_response, ticket, via_https},
};
use crate::rest::{
    AppState,
    paths::{APP_SIGN_IN, proxy_path},
    problem::{ApiError, Problem, render_own_problems},
    request_span,
};
use crate::{
    domain::{AppHost, AppsDomain, ClusterRef, PublicUrl, audit::Transport},
    edge,
};

/// The router of service hosts.
fn router(state: AppState) -> Router {
    Router::new()
        .route(APP_SIGN_IN, get(sign_in))
        .fallback(proxy)
        .route_layer(middleware::from_fn(crate::ops::track_http))
        .layer(middleware::from_fn(render_own_problems))
        .layer(
            TraceLayer::new_for_http()
                .make_span_with(request_span)
                // A 5xx is logged where krayne knows why (an internal
                // error, an outage); a head's or service's 502 is its
                // tenant's doing, which must not flood the log.
                .on_failure(tower_http::trace::DefaultOnFailure::new().level(tracing::Level::DEBUG)),
        )
        .with_state(state)
}

/// What routes requests by host: the domain, and the services' router
/// (built once).
#[derive(Clone)]
pub struct AppHosts {
    domain: AppsDomain,
    router: Router,
}

impl AppHosts {
    /// The host routing of a server with an apps domain; `None` without.
    pub fn of(state: &AppState) -> Option<Self> {
        let domain = state.plane.apps_domain()?.clone();
        Some(Self {
            domain,
            router: router(state.clone()),
        })
    }
}

/// Middleware in front of everything: a request to a service's host goes
/// to that service; every other request goes on.
pub async fn by_host(State(hosts): State<AppHosts>, mut request: Request, next: Next) -> Response {
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(str::to_owned)
        .or_else(|| request.uri().authority().map(ToString::to_string));
    match host.and_then(|h| hosts.domain.resolve(&h)) {
        None => next.run(request).await,
        Some(Err(())) => Problem::new(
            StatusCode::NOT_FOUND,
            "not_found",
            "no service of any cluster at this host",
        )
        .into_response(),
        Some(Ok(app)) => {
            request.extensions_mut().insert(app);
            match hosts.router.oneshot(request).await {
                Ok(response) => response,
                Err(never) => match never {},
            }
        }
    }
}

/// `/_krayne/sign-in?ticket=…` on a service's host: a host-only cookie.
async fn sign_in(
    State(s): State<AppState>,
    Extension(app): Extension<AppHost>,
    query: Result<Query<SignInQuery>, QueryRejection>,
    request: Request,
) -> Result<Response, ApiError> {
    let ticket = ticket(query)?;
    let meta = edge::request_meta(request.headers(), request.extensions(), Transport::Rest);
    let signed = s
        .plane
        .sign_in(
            &meta,
            &ClusterRef::new(&app.namespace, &app.name),
            &app.service,
            &ticket,
        )
        .await?;
    Ok(signed_in_response(&s, signed, Landing::own_host(), via_https(&request)))
}

/// Every other path of a service's host: the service's own.
async fn proxy(
    State(s): State<AppState>,
    Extension(app): Extension<AppHost>,
    request: Request,
) -> Result<Response, ApiError> {
    let path_and_query = request.uri().path_and_query().map_or("/", |p| p.as_str()).to_owned();
    // Jupyter serves under the base URL its cluster was created with:
    // its own links carry it; anything else goes under it.
    let upstream = if app.service == "notebook" {
        let public = s.plane.public_url().map_or("", PublicUrl::prefix);
        let base = format!("{public}{}/", proxy_path(&app.namespace, &app.name, &app.service));
        if path_and_query.starts_with(&base) {
            path_and_query
        } else {
            format!("{base}{}", path_and_query.trim_start_matches('/'))
        }
    } else {
        path_and_query
    };
    let target = Target {
        cluster: ClusterRef::new(app.namespace, app.name),
        service: app.service,
        upstream,
        browser_path: request.uri().path().to_owned(),
        browser_prefix: None,
    };
    forward(&s, target, request).await
}
