//! Browser sessions: a bearer caller asks for a sign-in link; the browser
//! opens it and gets a session cookie scoped to one service's proxy path.

use axum::{
    Extension, Json,
    extract::{Path, Query, Request, State, rejection::QueryRejection},
    http::{HeaderMap, HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};
use cookie::{Cookie, SameSite};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::sign_in_page;
use crate::rest::{
    AppState,
    extract::{Caller, ClusterPath, ServiceSegment},
    paths::{SESSION_COOKIE, link_urls, proxy_path},
    problem::{ApiError, Problem},
    responses::{Editor, KubernetesReads, Refusals},
};
use crate::{
    control::{SignInLink, SignedIn},
    domain::{Error, PublicUrl, audit::Transport},
    edge::{self, ViaHttps},
};

/// A sign-in link for a browser.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct BrowserSession {
    /// Open this in a browser, once, before `expires_at`: it sets the
    /// session cookie and leads to the service. It carries a credential:
    /// do not share or log it.
    pub sign_in_url: String,
    /// Until when the link can be opened (RFC 3339, about a minute).
    pub expires_at: String,
    /// Where the link leads (the service through the proxy).
    pub service_url: String,
    /// How long the session lasts once the link is opened, in seconds.
    pub session_seconds: u64,
}

impl BrowserSession {
    fn new(link: &SignInLink, public: Option<&PublicUrl>, host: Option<&str>, https: bool) -> Result<Self, Error> {
        let (sign_in_url, service_url) = link_urls(link, public, host, https)?;
        Ok(Self {
            sign_in_url,
            expires_at: link.expires_at.to_string(),
            service_url,
            session_seconds: link.session_seconds,
        })
    }
}

/// Start a browser session to an HTTP service.
///
/// A browser cannot send a bearer token: this answers a sign-in link,
/// valid for about a minute and usable once (on any replica), that sets
/// an `HttpOnly`, `SameSite=Lax` session cookie for this service's proxy
/// path only (`Secure` when the server's public URL is https) and leads
/// the browser there. Each proxied request re-checks the session's caller
/// against the current team mapping. Needs the editor role; the session
/// is audited (`service.connect`, via `browser-session`) when the link is
/// opened.
#[utoipa::path(post, path = "/v1/namespaces/{namespace}/clusters/{name}/services/{service}/sessions", tag = "services",
    params(
        ("namespace" = String, Path, description = "Kubernetes namespace"),
        ("name" = String, Path, description = "Cluster name"),
        ("service" = String, Path, description = "An HTTP service: `dashboard`, `notebook` or `code-server`"),
    ),
    responses(
        Refusals, KubernetesReads, Editor,
        (status = 201, description = "A sign-in link", body = BrowserSession),
        (status = 400, description = "A TCP service, or not a namespace or cluster name Kubernetes could hold", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such cluster, or the cluster declares no such service", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The caller's token carries too much to fit in a browser session", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "This server issues no browser sessions", body = Problem, content_type = "application/problem+json"),
    ))]
pub(crate) async fn create_session(
    State(s): State<AppState>,
    Caller(cx): Caller,
    ClusterPath(cluster): ClusterPath,
    Path(ServiceSegment { service }): Path<ServiceSegment>,
    headers: HeaderMap,
    https: Option<Extension<ViaHttps>>,
) -> Result<(StatusCode, Json<BrowserSession>), ApiError> {
    let link = s.plane.sign_in_link(&cx, &cluster, &service).await?;
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    let session = BrowserSession::new(&link, s.plane.public_url(), host, https.is_some())?;
    Ok((StatusCode::CREATED, Json(session)))
}

/// The sign-in link's query.
#[derive(Debug, Deserialize)]
pub(crate) struct SignInQuery {
    /// The link's ticket.
    ticket: String,
}

/// Open a sign-in link (in a browser).
///
/// Sets the session cookie and redirects (303) to the service. No bearer
/// token: the link is the credential, once, within its minute. A link
/// opened twice, late, or for another path is refused (401).
#[utoipa::path(get, path = "/v1/namespaces/{namespace}/clusters/{name}/services/{service}/sessions/sign-in", tag = "services",
    security(()),
    params(
        ("namespace" = String, Path, description = "Kubernetes namespace"),
        ("name" = String, Path, description = "Cluster name"),
        ("service" = String, Path, description = "The service the link is for"),
        ("ticket" = String, Query, description = "The link's ticket (a credential: never log it)"),
    ),
    responses(
        Refusals, KubernetesReads,
        (status = 303, description = "Signed in: `Set-Cookie` holds the session, `Location` the service"),
        (status = 400, description = "No ticket", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "The link's caller is no longer an editor of the namespace", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "The cluster or its service is gone", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The audit log cannot be written, or this server issues no browser sessions", body = Problem, content_type = "application/problem+json"),
    ))]
pub(crate) async fn sign_in(
    State(s): State<AppState>,
    ClusterPath(cluster): ClusterPath,
    Path(ServiceSegment { service }): Path<ServiceSegment>,
    query: Result<Query<SignInQuery>, QueryRejection>,
    request: Request,
) -> Result<Response, ApiError> {
    let ticket = ticket(query)?;
    let (namespace, name) = (cluster.namespace(), cluster.name());
    if s.plane
        .apps_domain()
        .and_then(|d| d.host(namespace, name, &service))
        .is_some()
    {
        return Err(Problem::new(
            StatusCode::BAD_REQUEST,
            "invalid_argument",
            format!("this server serves {service} of {name} at a host of its own: open the link krayne open gives"),
        )
        .into());
    }
    let meta = edge::request_meta(request.headers(), request.extensions(), Transport::Rest);
    let landing = Landing::proxy(&s, namespace, name, &service);
    let signed = match s.plane.sign_in(&meta, &cluster, &service, &ticket).await {
        Ok(signed) => signed,
        // A reload, or a link from the history: a page, not a problem
        // document a person cannot act on.
        Err(e) if sign_in_page::wants_page(request.method(), request.headers(), &e) => {
            return Ok(sign_in_page::spent_link_page(
                namespace,
                name,
                &service,
                &landing.location,
                &e,
            ));
        }
        Err(e) => return Err(e.into()),
    };
    Ok(signed_in_response(&s, signed, landing, via_https(&request)))
}

/// A sign-in link's ticket, or why there is none.
pub(crate) fn ticket(query: Result<Query<SignInQuery>, QueryRejection>) -> Result<String, ApiError> {
    match query {
        Ok(Query(q)) => Ok(q.ticket),
        Err(_) => Err(Problem::new(
            StatusCode::BAD_REQUEST,
            "invalid_argument",
            "a sign-in link carries its ticket: open the link exactly as krayne gave it",
        )
        .into()),
    }
}

/// Whether a trusted proxy says `request`'s client spoke https.
pub(crate) fn via_https(request: &Request) -> bool {
    request.extensions().get::<ViaHttps>().is_some()
}

/// Where an opened sign-in link sets its cookie (the cookie's path) and
/// sends the browser on to.
pub(crate) struct Landing {
    /// The cookie's path: the service's proxy as the browser sees it
    /// (behind the public URL's prefix), or `/` on its own host.
    pub(super) path: String,
    /// Where to send the browser.
    pub(super) location: String,
}

impl Landing {
    /// The service's proxy on this server; the cookie goes to every
    /// service of the cluster (`…/clusters/{name}/services`): signed in to
    /// the notebook, the same browser opens the cluster's dashboard.
    pub(super) fn proxy(s: &AppState, namespace: &str, name: &str, service: &str) -> Self {
        let prefix = s.plane.public_url().map_or("", PublicUrl::prefix);
        let proxy = format!("{prefix}{}", proxy_path(namespace, name, service));
        let services = format!("{prefix}/v1/namespaces/{namespace}/clusters/{name}/services");
        Self {
            location: format!("{proxy}/"),
            path: services,
        }
    }

    /// The service's own host (`--apps-domain`).
    pub(super) fn own_host() -> Self {
        Self {
            path: "/".to_owned(),
            location: "/".to_owned(),
        }
    }
}

/// The answer to an opened sign-in link: the cookie (`Secure` when the
/// browser reached us over https: the public URL is https, or a trusted
/// proxy said so), and the way on.
pub(crate) fn signed_in_response(s: &AppState, signed: SignedIn, landing: Landing, https: bool) -> Response {
    let max_age = i64::try_from(signed.max_age.as_secs()).unwrap_or(i64::MAX);
    let secure = https || s.plane.public_url().is_some_and(PublicUrl::is_https);
    let cookie = Cookie::build((SESSION_COOKIE, signed.session))
        .path(landing.path)
        .http_only(true)
        .same_site(SameSite::Lax)
        .secure(secure)
        .max_age(cookie::time::Duration::seconds(max_age))
        .build();
    let mut response = StatusCode::SEE_OTHER.into_response();
    let headers = response.headers_mut();
    for (name, value) in [
        (header::SET_COOKIE, cookie.encoded().to_string()),
        (header::LOCATION, landing.location),
        (header::CACHE_CONTROL, "no-store".to_owned()),
        (header::REFERRER_POLICY, "no-referrer".to_owned()),
    ] {
        if let Ok(value) = HeaderValue::from_str(&value) {
            headers.insert(name, value);
        }
    }
    response
}

/// The values of the session cookies a request carries.
pub(crate) fn session_cookies(headers: &HeaderMap) -> Vec<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(Cookie::split_parse_encoded)
        .filter_map(Result::ok)
        .filter(|c| c.name() == SESSION_COOKIE)
        .map(|c| c.value().to_owned())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_cookies_are_found_among_others() {
        let mut h = HeaderMap::new();
        h.insert(
            header::COOKIE,
            HeaderValue::from_static("_xsrf=1; krayne_session=a.b.c; theme=dark"),
        );
        h.append(header::COOKIE, HeaderValue::from_static("krayne_session=d.e.f"));
        assert_eq!(session_cookies(&h), ["a.b.c", "d.e.f"]);
        assert!(session_cookies(&HeaderMap::new()).is_empty());
    }
}
