//! Ray's token authentication on the dashboard stand-in, as a real Ray
//! 2.60 head answers (`../shared/reference/ray/token-auth.md`): no token
//! is 401, a wrong one (or one without `Bearer `) is 403, both as plain
//! text; `Authorization` wins over `X-Ray-Authorization` when both are
//! sent; a browser may carry it in the `ray-authentication-token` cookie.

use std::sync::Arc;

use axum::{
    extract::Request,
    http::{HeaderMap, StatusCode, header},
    middleware::Next,
    response::{IntoResponse, Response},
};

/// The header proxies (and krayne) send the token in.
const RAY_AUTH_HEADER: &str = "x-ray-authorization";
/// The cookie the dashboard's login page sets.
const RAY_AUTH_COOKIE: &str = "ray-authentication-token";

/// Lets `request` through only with `token`.
pub(super) async fn require(token: Arc<str>, request: Request, next: Next) -> Response {
    match presented(request.headers()) {
        None => plain(StatusCode::UNAUTHORIZED, "Unauthorized: Missing authentication token"),
        Some(given) if given == *token => next.run(request).await,
        Some(_) => plain(StatusCode::FORBIDDEN, "Forbidden: Invalid authentication token"),
    }
}

/// The token a request presents, in Ray's order: `Authorization`, then
/// `X-Ray-Authorization` (each `Bearer <token>`; anything else presents
/// a wrong token), then the cookie.
fn presented(headers: &HeaderMap) -> Option<String> {
    for name in [header::AUTHORIZATION.as_str(), RAY_AUTH_HEADER] {
        if let Some(value) = headers.get(name) {
            let value = value.to_str().unwrap_or("");
            return Some(
                value
                    .strip_prefix("Bearer ")
                    .map_or_else(|| format!("\0{value}"), str::to_owned),
            );
        }
    }
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|c| c.trim().split_once('='))
        .find(|(name, _)| *name == RAY_AUTH_COOKIE)
        .map(|(_, value)| value.to_owned())
}

fn plain(status: StatusCode, text: &'static str) -> Response {
    (status, [(header::CONTENT_TYPE, "text/plain; charset=utf-8")], text).into_response()
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn tokens_are_read_in_rays_order() {
        assert_eq!(presented(&headers(&[])), None);
        assert_eq!(
            presented(&headers(&[("authorization", "Bearer t")])).as_deref(),
            Some("t")
        );
        assert_eq!(
            presented(&headers(&[("x-ray-authorization", "Bearer t")])).as_deref(),
            Some("t")
        );
        let both = headers(&[("authorization", "Bearer a"), ("x-ray-authorization", "Bearer t")]);
        assert_eq!(presented(&both).as_deref(), Some("a"), "Authorization wins");
        let bare = presented(&headers(&[("x-ray-authorization", "t")])).unwrap();
        assert_ne!(bare, "t", "without Bearer it is a wrong token");
        let cookie = headers(&[("cookie", "a=b; ray-authentication-token=t")]);
        assert_eq!(presented(&cookie).as_deref(), Some("t"));
    }
}
