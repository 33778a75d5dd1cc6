//! What a browser that arrives at a service's proxy without a session
//! sees: a page saying how to get in, instead of a problem document it
//! cannot act on.

use axum::{
    http::{HeaderMap, HeaderValue, Method, StatusCode, header},
    response::{IntoResponse as _, Response},
};

use crate::domain::Error;

/// Whether a refused request is a person's browser opening a page: a
/// `GET` that accepts HTML and sent no token of its own (a script that
/// sent a wrong token wants the problem document).
pub(crate) fn wants_page(method: &Method, headers: &HeaderMap, refusal: &Error) -> bool {
    let accepts_html = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("text/html"));
    matches!(refusal, Error::Unauthenticated(_))
        && matches!(*method, Method::GET | Method::HEAD)
        && accepts_html
        && !headers.contains_key(header::AUTHORIZATION)
}

/// Only names as Kubernetes spells them go into a page: nothing to
/// escape, nothing a crafted URL can inject.
fn plain(s: &str) -> Option<&str> {
    (!s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'))
    .then_some(s)
}

fn escaped(refusal: &Error) -> String {
    refusal
        .to_string()
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The page for a sign-in link opened again, or too late (a reload, a
/// link from the history): a browser that opened it a moment ago is
/// signed in and may go on to `location` (the service's proxy, made of
/// the same checked names); else how to get a new one.
pub(crate) fn spent_link_page(namespace: &str, name: &str, service: &str, location: &str, refusal: &Error) -> Response {
    let go_on = match (plain(namespace), plain(name), plain(service)) {
        (Some(_), Some(name), Some(service)) => format!(
            r#"<p>If this browser opened it a moment ago, it is signed in: <a id="go-on" href="{location}">open {service} of {name}</a>.</p>"#
        ),
        _ => String::new(),
    };
    let (namespace, name, service) = (
        plain(namespace).unwrap_or("NAMESPACE"),
        plain(name).unwrap_or("NAME"),
        plain(service).unwrap_or("SERVICE"),
    );
    let body = format!(
        r#"<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>This sign-in link was used</title></head>
<body style="font-family: sans-serif; max-width: 44em; margin: 3em auto; line-height: 1.5">
<h1>This sign-in link was used</h1>
<p>A sign-in link opens once, within a minute of being made.</p>
{go_on}
<p>Otherwise get a new link from a terminal where <code>krayne</code> is signed in:</p>
<pre id="command" style="background: #f4f4f4; padding: .8em">krayne open {name} {service} -n {namespace}</pre>
<p style="color: #666">Refused: <span id="reason">{why}</span></p>
</body>
</html>
"#,
        why = escaped(refusal)
    );
    html(body)
}

/// A 401 HTML answer, not cached.
fn html(body: String) -> Response {
    let mut response = (StatusCode::UNAUTHORIZED, body).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static(r#"Bearer realm="krayne""#),
    );
    response
}

/// The 401 page for service `service` of cluster `name`: how to sign in
/// (`krayne open`, or a session from a portal), and why this was refused.
pub(crate) fn page(namespace: &str, name: &str, service: &str, refusal: &Error) -> Response {
    let (namespace, name, service) = (
        plain(namespace).unwrap_or("NAME"),
        plain(name).unwrap_or("NAME"),
        plain(service).unwrap_or("NAME"),
    );
    let why = escaped(refusal);
    let body = format!(
        r#"<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>Sign in to open {service} of {name}</title></head>
<body style="font-family: sans-serif; max-width: 44em; margin: 3em auto; line-height: 1.5">
<h1>Sign in to open {service} of {name}</h1>
<p>This is the <b>{service}</b> of Ray cluster <b>{name}</b> in namespace <b>{namespace}</b>,
reached through krayne. A browser gets in with a one-time sign-in link; this one has no session.</p>
<p>Open it from a terminal where <code>krayne</code> is signed in:</p>
<pre id="command" style="background: #f4f4f4; padding: .8em">krayne open {name} {service} -n {namespace}</pre>
<p>A portal asks for a link with <code>POST /v1/namespaces/{namespace}/clusters/{name}/services/{service}/sessions</code>
and opens its <code>sign_in_url</code>. Scripts send <code>Authorization: Bearer &lt;token&gt;</code> instead.</p>
<p style="color: #666">Refused: <span id="reason">{why}</span></p>
</body>
</html>
"#
    );
    html(body)
}

#[cfg(test)]
mod tests {
    use crate::domain::AuthFailure;

    use super::*;

    fn html() -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::ACCEPT,
            HeaderValue::from_static("text/html,application/xhtml+xml"),
        );
        headers
    }

    #[test]
    fn only_a_browser_without_a_token_gets_the_page() {
        let missing = Error::Unauthenticated(AuthFailure::MissingToken);
        assert!(wants_page(&Method::GET, &html(), &missing));
        assert!(
            !wants_page(&Method::POST, &html(), &missing),
            "a form post is not a navigation"
        );
        assert!(
            !wants_page(&Method::GET, &HeaderMap::new(), &missing),
            "curl accepts */*"
        );
        let mut with_token = html();
        with_token.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer x"));
        assert!(!wants_page(&Method::GET, &with_token, &missing));
        assert!(!wants_page(
            &Method::GET,
            &html(),
            &Error::PermissionDenied("no".into())
        ));
    }

    async fn text(response: Response) -> String {
        let body = axum::body::to_bytes(response.into_body(), 1 << 20).await.unwrap();
        String::from_utf8(body.to_vec()).unwrap()
    }

    #[tokio::test]
    async fn the_page_names_the_command_and_nothing_it_was_not_sure_of() {
        let missing = Error::Unauthenticated(AuthFailure::MissingToken);
        let response = page("ml-team", "demo", "dashboard", &missing);
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(response.headers()[header::CONTENT_TYPE], "text/html; charset=utf-8");
        let body = text(response).await;
        assert!(body.contains("krayne open demo dashboard -n ml-team"), "{body}");
        assert!(body.contains("missing bearer token"), "{body}");
        let crafted = text(page("ml-team", "<script>x", "dashboard", &missing)).await;
        assert!(!crafted.contains("<script>") && crafted.contains("krayne open NAME dashboard"));
    }
}
