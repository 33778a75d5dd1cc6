//! Identity routes.

use axum::{Json, extract::State};

use super::{
    AppState,
    dto::{NamespaceList, PageQuery, WhoAmI},
    extract::{Caller, QueryOf},
    problem::{ApiError, Problem},
    responses::{KubernetesReads, Refusals},
};
use crate::domain::{ClientSettings, PageRequest, VersionInfo};

/// Who the caller is.
///
/// Subject, groups and teams, the effective role on each namespace, and
/// every grant behind them: enough to answer "why can't I see X".
#[utoipa::path(get, path = "/v1/whoami", tag = "identity",
    responses(
        Refusals, KubernetesReads,
        (status = 200, description = "The caller", body = WhoAmI),
    ))]
pub(super) async fn whoami(State(s): State<AppState>, Caller(cx): Caller) -> Result<Json<WhoAmI>, ApiError> {
    Ok(Json(s.plane.whoami(&cx).await?))
}

/// The namespaces the caller may use, with their role.
#[utoipa::path(get, path = "/v1/namespaces", tag = "identity", params(PageQuery),
    responses(
        Refusals, KubernetesReads,
        (status = 200, description = "One page of namespaces", body = NamespaceList),
        (status = 400, description = "Bad page size or token", body = Problem, content_type = "application/problem+json"),
    ))]
pub(super) async fn namespaces(
    State(s): State<AppState>,
    Caller(cx): Caller,
    QueryOf(q): QueryOf<PageQuery>,
) -> Result<Json<NamespaceList>, ApiError> {
    let page = PageRequest::new(q.page_size.unwrap_or(0), q.page_token.as_deref().unwrap_or(""))?;
    let p = s.plane.namespaces(&cx, &page).await?;
    Ok(Json(NamespaceList {
        namespaces: p.items,
        next_page_token: p.next_page_token,
    }))
}

/// The server's version, build and switched-on features.
///
/// Needs no token (like `/healthz`): clients ask it before they log in, and
/// `krayne version` compares it with its own.
#[utoipa::path(get, path = "/v1/version", tag = "identity", security(()),
    responses(
        (status = 200, description = "The server's version", body = VersionInfo),
    ))]
pub(super) async fn version(State(s): State<AppState>) -> Json<VersionInfo> {
    Json(s.plane.version())
}

/// What a client needs before it signs in: where people sign in.
///
/// Needs no token: `krayne login --server URL` reads the identity
/// provider's issuer, the client id and the scopes from here, so nobody
/// has to be told them.
#[utoipa::path(get, path = "/.well-known/krayne", tag = "identity", security(()),
    responses(
        (status = 200, description = "Where to sign in", body = ClientSettings),
    ))]
pub(super) async fn client_settings(State(s): State<AppState>) -> Json<ClientSettings> {
    Json(s.plane.client_settings())
}
