//! Request ids: the server's own for every request, and the client's kept
//! apart as a correlation id.

use tracing::Instrument as _;

use axum::{
    extract::Request,
    http::{HeaderMap, HeaderName, HeaderValue},
    middleware::Next,
    response::Response,
};

/// Header carrying the server's request id on every answer (and to
/// Kubernetes). A client's value in it is taken as its correlation id.
pub const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// Header carrying the client's own id, echoed back on the answer.
pub const CORRELATION_ID: HeaderName = HeaderName::from_static("x-correlation-id");

/// Longest client-chosen id kept.
const MAX_CLIENT_ID: usize = 128;

/// The ids of one request, in its extensions.
#[derive(Debug, Clone)]
pub struct RequestIds {
    /// The server's id (UUID v7): unique, never the client's.
    pub request_id: String,
    /// The client's id, when it sent a usable one.
    pub correlation_id: Option<String>,
}

/// A client id that is one short token of letters, digits and `-_.:`;
/// anything else (several values, 8 KB, control characters) is ignored.
fn client_id(headers: &HeaderMap, name: &HeaderName) -> Option<String> {
    let mut values = headers.get_all(name).iter();
    let value = values.next()?;
    let usable = values.next().is_none()
        && !value.is_empty()
        && value.len() <= MAX_CLIENT_ID
        && value
            .as_bytes()
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.:".contains(b));
    usable.then(|| value.to_str().ok().map(str::to_owned)).flatten()
}

/// Middleware: gives the request a fresh server id (replacing whatever the
/// client put in `x-request-id`, so later layers and Kubernetes see only
/// the server's), keeps the client's id as its correlation id, and puts
/// both on the answer.
pub async fn assign_request_ids(mut request: Request, next: Next) -> Response {
    let headers = request.headers();
    let correlation_id = client_id(headers, &CORRELATION_ID).or_else(|| client_id(headers, &REQUEST_ID));
    let request_id = uuid::Uuid::now_v7().to_string();
    let id_value = HeaderValue::from_str(&request_id).ok();
    let headers = request.headers_mut();
    headers.remove(CORRELATION_ID);
    headers.remove(REQUEST_ID);
    if let Some(v) = &id_value {
        headers.insert(REQUEST_ID, v.clone());
    }
    // Every log line of the request's handling names it, however deep.
    let span = tracing::info_span!("request", request_id = %request_id);
    request.extensions_mut().insert(RequestIds {
        request_id,
        correlation_id: correlation_id.clone(),
    });
    let mut response = next.run(request).instrument(span).await;
    let headers = response.headers_mut();
    if let Some(v) = id_value {
        headers.insert(REQUEST_ID, v);
    }
    if let Some(v) = correlation_id.and_then(|c| HeaderValue::from_str(&c).ok()) {
        headers.insert(CORRELATION_ID, v);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&HeaderName, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (name, value) in pairs {
            h.append((*name).clone(), HeaderValue::from_str(value).unwrap());
        }
        h
    }

    #[test]
    fn only_one_short_plain_id_is_kept() {
        assert_eq!(
            client_id(&headers(&[(&REQUEST_ID, "trace-1:a.b_c")]), &REQUEST_ID).as_deref(),
            Some("trace-1:a.b_c")
        );
        for bad in ["", "a b", "a\"b", &"x".repeat(129)] {
            assert_eq!(client_id(&headers(&[(&REQUEST_ID, bad)]), &REQUEST_ID), None, "{bad:?}");
        }
        let two = headers(&[(&REQUEST_ID, "a"), (&REQUEST_ID, "b")]);
        assert_eq!(client_id(&two, &REQUEST_ID), None);
    }
}
