//! The REST transport's names for things: the paths of a service's proxy
//! and its sign-in link, the session cookie, and a sign-in link as the
//! absolute URLs a browser opens (the gRPC transport answers the same
//! links: they lead here).

use krayne_control::SignInLink;

use crate::domain::{Error, PublicUrl};

/// The name of the session cookie (path-scoped to one service's proxy, or
/// host-only on the service's own host).
pub(crate) const SESSION_COOKIE: &str = "krayne_session";

/// Where a service's own host takes sign-in links (`--apps-domain`).
pub(crate) const APP_SIGN_IN: &str = "/_krayne/sign-in";

/// The proxy path of a service: a session's cookie path.
pub(crate) use krayne_core::manifest::proxy_path;

/// Where a service's sign-in links are opened.
fn sign_in_path(namespace: &str, name: &str, service: &str) -> String {
    format!("/v1/namespaces/{namespace}/clusters/{name}/services/{service}/sessions/sign-in")
}

/// The link and the service as absolute URLs: under the server's public
/// URL when it has one, else under the host the request was sent to when
/// that is this machine's loopback (the sandbox, a local server). Any
/// other `Host` is the client's word: a link built from it would hand the
/// ticket to whoever that host is. A service's own host is https when the
/// public URL is, or when the client asking for the link spoke https
/// (`https`: a trusted proxy said so).
pub(crate) fn link_urls(
    link: &SignInLink,
    public: Option<&PublicUrl>,
    host: Option<&str>,
    https: bool,
) -> Result<(String, String), Error> {
    if let Some(app) = &link.app_host {
        let scheme = if https || public.is_some_and(PublicUrl::is_https) {
            "https"
        } else {
            "http"
        };
        return Ok((
            format!("{scheme}://{app}{APP_SIGN_IN}?ticket={}", link.ticket),
            format!("{scheme}://{app}/"),
        ));
    }
    let origin = match (public, host) {
        (Some(url), _) => url.to_string(),
        (None, Some(host)) if is_loopback(host) => {
            format!("{}://{host}", if https { "https" } else { "http" })
        }
        (None, _) => {
            // The server's configuration, not the caller's mistake, and
            // nothing a retry changes.
            return Err(Error::FailedPrecondition(
                "this server was started without --public-url, so it can name itself in a sign-in link \
                 only to clients on its own machine; start it with --public-url"
                    .into(),
            ));
        }
    };
    let (namespace, name, service) = (&link.namespace, &link.cluster, &link.service);
    Ok((
        format!(
            "{origin}{}?ticket={}",
            sign_in_path(namespace, name, service),
            link.ticket
        ),
        format!("{origin}{}/", proxy_path(namespace, name, service)),
    ))
}

/// Whether `host` (a `Host` header: name or address, maybe a port) is
/// this machine's loopback.
fn is_loopback(host: &str) -> bool {
    match url::Url::parse(&format!("http://{host}/"))
        .ok()
        .and_then(|u| u.host().map(|h| h.to_owned()))
    {
        Some(url::Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_are_under_the_public_url_else_the_host() {
        let mut link = SignInLink {
            namespace: "ns".into(),
            cluster: "c".into(),
            service: "dashboard".into(),
            ticket: "t".into(),
            app_host: None,
            expires_at: jiff::Timestamp::UNIX_EPOCH,
            session_seconds: 1,
        };
        let urls = |link: &SignInLink, public: Option<&PublicUrl>, host: Option<&str>, https: bool| {
            link_urls(link, public, host, https)
        };
        let public = PublicUrl::parse("https://ml.example.com/krayne/").ok();
        assert_eq!(
            urls(&link, public.as_ref(), Some("ignored"), false).unwrap(),
            (
                "https://ml.example.com/krayne/v1/namespaces/ns/clusters/c/services/dashboard/sessions/sign-in?ticket=t"
                    .to_owned(),
                "https://ml.example.com/krayne/v1/namespaces/ns/clusters/c/services/dashboard/proxy/".to_owned()
            )
        );
        assert_eq!(
            urls(&link, None, Some("127.0.0.1:8080"), false).unwrap().1,
            "http://127.0.0.1:8080/v1/namespaces/ns/clusters/c/services/dashboard/proxy/"
        );
        for local in ["localhost:9", "[::1]:8080", "127.0.0.2"] {
            assert!(urls(&link, None, Some(local), false).is_ok(), "{local}");
        }
        for foreign in [
            "evil.example",
            "evil.example:8080",
            "10.0.0.1",
            "localhost.evil.example",
            "",
            "a b",
        ] {
            let refused = urls(&link, None, Some(foreign), false).unwrap_err();
            assert!(refused.to_string().contains("--public-url"), "{foreign}: {refused}");
        }
        assert!(urls(&link, None, None, false).is_err());
        link.app_host = Some("dashboard--c--ns.apps.example.com".into());
        assert!(
            urls(&link, None, None, true)
                .unwrap()
                .0
                .starts_with("https://dashboard--c--ns.")
        );
        assert_eq!(
            urls(&link, public.as_ref(), None, false).unwrap(),
            (
                "https://dashboard--c--ns.apps.example.com/_krayne/sign-in?ticket=t".to_owned(),
                "https://dashboard--c--ns.apps.example.com/".to_owned()
            )
        );
    }
}
