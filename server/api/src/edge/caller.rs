//! Who is calling: the same for both transports, from headers only, so a
//! request without a valid token is refused before its body is read.

use std::net::SocketAddr;

use axum::{
    extract::ConnectInfo,
    http::{Extensions, HeaderMap, header},
};

use super::{RequestIds, Source};
use crate::{
    auth::Authenticator,
    control::{Context, ControlPlane},
    domain::{
        Error,
        audit::{RequestMeta, Transport},
        text::printable,
    },
};

/// The `Authorization` a request carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Authorization<'a> {
    /// None, or exactly one (text; an unreadable value counts as absent
    /// text and fails as an invalid token).
    One(Option<&'a str>),
    /// More than one: which of them would be the caller's is anyone's
    /// guess, so none is.
    Several,
}

/// The request's `Authorization` header (or `authorization` metadata).
pub fn authorization(headers: &HeaderMap) -> Authorization<'_> {
    let mut values = headers.get_all(header::AUTHORIZATION).iter();
    match (values.next(), values.next()) {
        (None, _) => Authorization::One(None),
        (Some(v), None) => Authorization::One(Some(v.to_str().unwrap_or(""))),
        (Some(_), Some(_)) => Authorization::Several,
    }
}

/// Everything about a request but its payload, as logs and the audit log
/// see it: the server's request id, the client's correlation id, the
/// source address (see [`super::TrustedProxies`]) and the user agent,
/// escaped and bounded.
pub fn request_meta(headers: &HeaderMap, extensions: &Extensions, transport: Transport) -> RequestMeta {
    let ids = extensions.get::<RequestIds>();
    let source = extensions
        .get::<Source>()
        .map(|s| s.0)
        .or_else(|| extensions.get::<ConnectInfo<SocketAddr>>().map(|c| c.0.ip()));
    RequestMeta {
        request_id: ids
            .map_or_else(|| uuid::Uuid::now_v7().to_string(), |i| i.request_id.clone())
            .into(),
        correlation_id: ids.and_then(|i| i.correlation_id.clone()),
        transport,
        source_ip: source.map(|ip| ip.to_canonical().to_string()),
        user_agent: headers
            .get(header::USER_AGENT)
            .map(|v| printable(&String::from_utf8_lossy(v.as_bytes()))),
    }
}

/// Authenticates a request from its headers and admits it under its
/// caller's rate. A refusal is audited (aggregated per source, see the
/// service's denials) and answered `Unauthenticated`, or `RateLimited`
/// when the source is over its rate of denials; several `Authorization`
/// headers are answered `several` (each transport says it its own way).
pub async fn authenticate(
    plane: &ControlPlane,
    auth: &Authenticator,
    headers: &HeaderMap,
    extensions: &Extensions,
    transport: Transport,
    several: Error,
) -> Result<Context, Error> {
    let meta = request_meta(headers, extensions, transport);
    let header = match authorization(headers) {
        Authorization::One(header) => header,
        Authorization::Several => {
            return Err(plane
                .refuse_unauthenticated(&meta, several, "more than one authorization header")
                .await);
        }
    };
    match auth.authenticate(header).await {
        Ok(principal) => {
            let cx = Context { principal, meta };
            plane.admit(&cx)?;
            Ok(cx)
        }
        Err(rejected) => Err(plane
            .refuse_unauthenticated(&meta, rejected.error, &printable(&rejected.detail))
            .await),
    }
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    #[test]
    fn one_authorization_or_none_is_read_and_two_are_refused() {
        let mut h = HeaderMap::new();
        assert_eq!(authorization(&h), Authorization::One(None));
        h.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer a"));
        assert_eq!(authorization(&h), Authorization::One(Some("Bearer a")));
        h.append(header::AUTHORIZATION, HeaderValue::from_static("Bearer b"));
        assert_eq!(authorization(&h), Authorization::Several);
    }

    #[test]
    fn user_agents_are_escaped_and_bounded() {
        let mut h = HeaderMap::new();
        let agent = format!("evil\t{}", "u".repeat(60_000));
        h.insert(header::USER_AGENT, HeaderValue::from_str(&agent).unwrap());
        let meta = request_meta(&h, &Extensions::new(), Transport::Rest);
        let ua = meta.user_agent.unwrap();
        assert!(ua.len() <= 512 && ua.starts_with("evil\\tuuu"), "{}", ua.len());
        assert!(!meta.request_id.is_empty() && meta.correlation_id.is_none());
    }
}
