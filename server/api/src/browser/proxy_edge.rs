//! What crosses the HTTP proxy, each way. Requests: hop-by-hop headers
//! dropped, krayne's credentials and the client's forwarding headers
//! removed; a browser session's unsafe requests and WebSocket upgrades
//! accepted only from the service's own origin (the cookie is sent by
//! every page of the same *site*, which includes other ports, sibling
//! hosts and other clusters' service hosts). Responses: a service's
//! cookies confined to its own path (or host) and never krayne's, its
//! redirects kept inside the service.

use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, header};
use cookie::Cookie;

/// Headers that belong to one connection, never forwarded (RFC 9110 §7.6.1).
const HOP_BY_HOP: [&str; 8] = [
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// Headers a client may write to name itself or its route; a service
/// behind krayne hears krayne's `X-Forwarded-*` only.
const CLIENT_FORWARDING: [&str; 4] = ["forwarded", "x-real-ip", "true-client-ip", "x-client-ip"];

/// Whether a client asks to upgrade the connection (a WebSocket).
pub(crate) fn wants_upgrade(headers: &HeaderMap) -> bool {
    headers.contains_key(header::UPGRADE)
        && headers
            .get_all(header::CONNECTION)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .any(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case("upgrade")))
}

/// Drops hop-by-hop headers (and those `Connection` names); keeps the
/// upgrade pair when `upgrade`.
pub(crate) fn drop_hop_by_hop(headers: &mut HeaderMap, upgrade: bool) {
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|t| HeaderName::try_from(t.trim()).ok())
        .collect();
    let upgrade_value = headers.get(header::UPGRADE).cloned();
    for name in named.iter().chain(&HOP_BY_HOP.map(HeaderName::from_static)) {
        headers.remove(name);
    }
    if let (true, Some(value)) = (upgrade, upgrade_value) {
        headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
        headers.insert(header::UPGRADE, value);
    }
}

/// Removes what the client wrote about its address and route
/// (`Forwarded`, `X-Real-IP`, every `X-Forwarded-*`): the proxy sets its
/// own.
pub(crate) fn drop_client_forwarding(headers: &mut HeaderMap) {
    let named: Vec<HeaderName> = headers
        .keys()
        .filter(|k| k.as_str().starts_with("x-forwarded-") || CLIENT_FORWARDING.contains(&k.as_str()))
        .cloned()
        .collect();
    for name in named {
        headers.remove(name);
    }
}

/// Whether a cookie's name is one of krayne's own, as written or once
/// percent-decoded (krayne reads its session cookie decoded).
fn is_kraynes(name: &str) -> bool {
    let raw = |n: &str| n.get(..6).is_some_and(|p| p.eq_ignore_ascii_case("krayne"));
    raw(name) || Cookie::parse_encoded(format!("{name}=")).is_ok_and(|c| raw(c.name()))
}

/// Whether a cookie named `name` carries a Ray token: a caller's own
/// token never reaches a head (krayne sends the cluster's).
fn is_ray_token(name: &str) -> bool {
    let raw = |n: &str| n.eq_ignore_ascii_case(crate::domain::ray_auth::RAY_AUTH_COOKIE);
    raw(name) || Cookie::parse_encoded(format!("{name}=")).is_ok_and(|c| raw(c.name()))
}

/// The `Cookie` header without krayne's own cookies or a Ray token.
pub(crate) fn foreign_cookies(headers: &HeaderMap) -> Option<HeaderValue> {
    let kept: Vec<&str> = headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .map(str::trim)
        .filter(|c| {
            let name = c.split('=').next().unwrap_or(c);
            !c.is_empty() && !is_kraynes(name) && !is_ray_token(name)
        })
        .collect();
    (!kept.is_empty())
        .then(|| HeaderValue::from_str(&kept.join("; ")).ok())
        .flatten()
}

/// How the browser sees a proxied service: the origin it talks to, and
/// in path mode the path the service lives under.
#[derive(Debug, Clone)]
pub(crate) struct Seen {
    /// `scheme://host[:port]/` as the browser addresses the request.
    origin: url::Url,
    /// The proxy path as the browser sees it (path mode), without the
    /// trailing slash; `None` on a service's own host.
    prefix: Option<String>,
    /// Whether the browser is known to speak https (an https public URL,
    /// or a trusted proxy's word): then an `http://` page of the same host
    /// is another origin.
    https: bool,
}

impl Seen {
    /// A service seen at `authority` (the `Host` the browser sent, or the
    /// public URL's), over https or not, under `prefix` in path mode.
    pub(super) fn new(https: bool, authority: &str, prefix: Option<String>) -> Option<Self> {
        let scheme = if https { "https" } else { "http" };
        let origin = url::Url::parse(&format!("{scheme}://{authority}/")).ok()?;
        origin.host_str()?;
        Some(Self { origin, prefix, https })
    }

    /// Whether `url` is on the service's host. Host and port decide: when
    /// krayne is not told how TLS ends in front of it, a scheme seen
    /// differently is the same place.
    fn same_host(&self, url: &url::Url) -> bool {
        url.host() == self.origin.host() && url.port() == self.origin.port()
    }

    /// Whether a page at `url` is the service's own (its scheme too, when
    /// https is known).
    fn same_origin(&self, url: &url::Url) -> bool {
        self.same_host(url) && (!self.https || url.scheme() == "https")
    }

    /// Whether the browser speaks https to the service.
    pub(super) fn https(&self) -> bool {
        self.https
    }

    /// Whether the service has a host of its own (no proxy path).
    pub(super) fn own_host(&self) -> bool {
        self.prefix.is_none()
    }
}

/// Why a browser session's request is refused: it is unsafe or an
/// upgrade, and it did not come from the service's own page; or it is a
/// read that another site's or origin's page made (an image, a script, a
/// fetch: services have GETs that act, as Ray's `/api/actors/kill`) and
/// not a navigation to the service (a link from the portal is fine).
pub(crate) fn cross_origin(method: &Method, upgrade: bool, headers: &HeaderMap, seen: &Seen) -> Option<String> {
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let site = text("sec-fetch-site");
    let safe = matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS);
    if safe && !upgrade {
        let navigates = text("sec-fetch-mode") == Some("navigate");
        return match site {
            Some(site) if !navigates && !matches!(site, "same-origin" | "none") => Some(format!(
                "a browser session's requests from another page than the service's own are refused \
                 (Sec-Fetch-Site: {site}); open the service itself"
            )),
            _ => None,
        };
    }
    let what = if upgrade { "a WebSocket" } else { "an unsafe request" };
    // Fetch metadata, where the browser sends it, says it outright.
    if let Some(site) = site
        && !matches!(site, "same-origin" | "none")
    {
        return Some(format!(
            "{what} of a browser session must come from the service's own page (Sec-Fetch-Site: {site})"
        ));
    }
    let mut origins = headers.get_all(header::ORIGIN).iter();
    let origin = match (origins.next(), origins.next()) {
        (Some(origin), None) => origin.to_str().ok(),
        (None, _) => return Some(format!("{what} of a browser session must send Origin")),
        (Some(_), Some(_)) => None,
    };
    match origin.and_then(|o| url::Url::parse(o).ok()) {
        Some(url) if seen.same_origin(&url) => None,
        _ => Some(format!(
            "{what} of a browser session must come from the service's own page ({}), not {}",
            seen.origin.origin().ascii_serialization(),
            origin.unwrap_or("an unreadable Origin")
        )),
    }
}

/// Keeps a service's response headers to the service: its cookies
/// confined to its proxy path (path mode; host-only on its own host) and
/// never named as krayne's; its `Location` resolved as the browser will
/// resolve it (against `browser_path`) and kept on the service, or
/// refused (`Err`, why) when it leaves it.
pub(crate) fn confine_response(headers: &mut HeaderMap, seen: &Seen, browser_path: &str) -> Result<(), String> {
    if !seen.own_host() {
        // They act on the whole origin, which in path mode is the API's
        // and every other service's: a service worker scoped to `/`
        // would serve them all, and `Clear-Site-Data` would sign every
        // session out.
        headers.remove("service-worker-allowed");
        headers.remove("clear-site-data");
    }
    // The cluster's Ray token reaches a browser only through the audited
    // credentials call, never echoed by a head.
    headers.remove(crate::domain::ray_auth::RAY_AUTH_HEADER);
    let cookies: Vec<HeaderValue> = headers
        .get_all(header::SET_COOKIE)
        .iter()
        .filter_map(|v| confine_cookie(v, seen))
        .collect();
    headers.remove(header::SET_COOKIE);
    for cookie in cookies {
        headers.append(header::SET_COOKIE, cookie);
    }
    let Some(location) = headers.get(header::LOCATION) else {
        return Ok(());
    };
    let location = location
        .to_str()
        .map_err(|_| "the service redirected to an unreadable location".to_owned())?;
    let kept = confine_location(location, seen, browser_path)?;
    let value = HeaderValue::from_str(&kept).map_err(|_| format!("the service redirected to {location:?}"))?;
    headers.insert(header::LOCATION, value);
    Ok(())
}

/// A service's cookie as the browser may keep it, or `None` to drop it:
/// krayne's names and cookies for a `Domain` (every sibling host) are
/// dropped; in path mode its `Path` goes under the proxy path.
fn confine_cookie(value: &HeaderValue, seen: &Seen) -> Option<HeaderValue> {
    let mut cookie = Cookie::parse(value.to_str().ok()?).ok()?;
    if is_kraynes(cookie.name()) || is_ray_token(cookie.name()) || cookie.domain().is_some() {
        return None;
    }
    if let Some(prefix) = &seen.prefix {
        let path = match cookie.path() {
            Some(p) if p == prefix || p.starts_with(&format!("{prefix}/")) => p.to_owned(),
            Some(p) if p.starts_with('/') => format!("{prefix}{p}"),
            _ => prefix.clone(),
        };
        cookie.set_path(path);
    }
    HeaderValue::from_str(&cookie.to_string()).ok()
}

/// A service's redirect, resolved against the page it answers
/// (`browser_path`) as the browser resolves it (backslashes, missing
/// slashes and all): on the service's origin it becomes an absolute path
/// (in path mode under the proxy path: a service serving at `/` means
/// its own `/`); anywhere else is refused.
fn confine_location(location: &str, seen: &Seen, browser_path: &str) -> Result<String, String> {
    let base = seen
        .origin
        .join(browser_path)
        .map_err(|_| "the request's path is not a URL path".to_owned())?;
    let target = base
        .join(location)
        .map_err(|_| format!("the service redirected to {location:?}, which is not a URL"))?;
    if !seen.same_host(&target) {
        return Err(format!(
            "the service redirected to another site ({}); krayne keeps redirects on the service",
            target.origin().ascii_serialization()
        ));
    }
    let path = target.path();
    let path = match &seen.prefix {
        Some(prefix) if !(path == prefix || path.starts_with(&format!("{prefix}/"))) => format!("{prefix}{path}"),
        _ => path.to_owned(),
    };
    // `//host` as a path is scheme-relative to the browser: `/.//host`
    // is the same path on this host.
    let path = if path.starts_with("//") {
        format!("/.{path}")
    } else {
        path
    };
    let query = target.query().map(|q| format!("?{q}")).unwrap_or_default();
    let fragment = target.fragment().map(|f| format!("#{f}")).unwrap_or_default();
    Ok(format!("{path}{query}{fragment}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: &str = "/v1/namespaces/ml/clusters/c/services/dashboard/proxy";

    fn path_mode() -> Seen {
        Seen::new(false, "127.0.0.1:8080", Some(P.to_owned())).unwrap()
    }

    fn own_host() -> Seen {
        Seen::new(true, "dashboard--c--ml.apps.example.com", None).unwrap()
    }

    #[test]
    fn hop_by_hop_headers_and_those_connection_names_are_dropped() {
        let mut h = HeaderMap::new();
        h.insert(header::CONNECTION, HeaderValue::from_static("keep-alive, x-secret"));
        h.insert("x-secret", HeaderValue::from_static("1"));
        h.insert(header::TRANSFER_ENCODING, HeaderValue::from_static("chunked"));
        h.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
        drop_hop_by_hop(&mut h, false);
        assert_eq!(h.len(), 1);
        assert!(h.contains_key(header::CONTENT_TYPE));

        let mut ws = HeaderMap::new();
        ws.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
        ws.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
        assert!(wants_upgrade(&ws));
        drop_hop_by_hop(&mut ws, true);
        assert_eq!(ws.get(header::UPGRADE).unwrap(), "websocket");
        assert_eq!(ws.get(header::CONNECTION).unwrap(), "upgrade");
    }

    #[test]
    fn a_clients_forwarding_headers_stay_here() {
        let mut h = HeaderMap::new();
        for name in [
            "forwarded",
            "x-real-ip",
            "x-forwarded-for",
            "x-forwarded-port",
            "true-client-ip",
        ] {
            h.insert(name, HeaderValue::from_static("203.0.113.9"));
        }
        h.insert(header::ACCEPT, HeaderValue::from_static("*/*"));
        drop_client_forwarding(&mut h);
        assert_eq!(h.keys().collect::<Vec<_>>(), [header::ACCEPT]);
    }

    #[test]
    fn krayne_cookies_stay_here() {
        let mut h = HeaderMap::new();
        h.insert(
            header::COOKIE,
            HeaderValue::from_static("krayne_session=abc; _xsrf=1; theme=dark; KRAYNE_x=1"),
        );
        assert_eq!(foreign_cookies(&h).unwrap(), "_xsrf=1; theme=dark");
        h.insert(header::COOKIE, HeaderValue::from_static("krayne_session=abc"));
        assert!(foreign_cookies(&h).is_none());
    }

    fn with(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn a_sessions_unsafe_requests_and_upgrades_come_from_the_services_own_page() {
        let seen = path_mode();
        let own = with(&[("origin", "http://127.0.0.1:8080"), ("sec-fetch-site", "same-origin")]);
        assert_eq!(cross_origin(&Method::POST, false, &own, &seen), None);
        assert_eq!(cross_origin(&Method::GET, true, &own, &seen), None);
        // Behind TLS that ends before krayne, the scheme differs.
        let tls = with(&[("origin", "https://127.0.0.1:8080")]);
        assert_eq!(cross_origin(&Method::DELETE, false, &tls, &seen), None);
        // Reads need nothing: a cross-site link may lead here.
        assert_eq!(cross_origin(&Method::GET, false, &HeaderMap::new(), &seen), None);
        for refused in [
            with(&[("origin", "http://127.0.0.1:9999")]),
            with(&[("origin", "http://127.0.0.1:8080"), ("sec-fetch-site", "same-site")]),
            with(&[("origin", "null")]),
            with(&[("origin", "http://127.0.0.1:8080"), ("origin", "http://127.0.0.1:8080")]),
            HeaderMap::new(),
        ] {
            assert!(
                cross_origin(&Method::POST, false, &refused, &seen).is_some(),
                "{refused:?}"
            );
            assert!(
                cross_origin(&Method::GET, true, &refused, &seen).is_some(),
                "{refused:?}"
            );
        }
        let sibling = with(&[("origin", "https://notebook--evil--other.apps.example.com")]);
        let why = cross_origin(&Method::GET, true, &sibling, &own_host()).unwrap();
        assert!(why.contains("https://dashboard--c--ml.apps.example.com"), "{why}");
        // Known https: a page of the same host over http is not the service's.
        let plain = with(&[("origin", "http://dashboard--c--ml.apps.example.com")]);
        assert!(cross_origin(&Method::POST, false, &plain, &own_host()).is_some());
    }

    #[test]
    fn reads_another_pages_makes_are_refused_but_links_are_followed() {
        let seen = path_mode();
        // An <img> or fetch from a sibling's page: Ray has GETs that act.
        let image = with(&[("sec-fetch-site", "same-site"), ("sec-fetch-mode", "no-cors")]);
        assert!(cross_origin(&Method::GET, false, &image, &seen).is_some());
        let fetched = with(&[("sec-fetch-site", "cross-site"), ("sec-fetch-mode", "cors")]);
        assert!(cross_origin(&Method::GET, false, &fetched, &seen).is_some());
        for fine in [
            with(&[("sec-fetch-site", "cross-site"), ("sec-fetch-mode", "navigate")]),
            with(&[("sec-fetch-site", "same-origin"), ("sec-fetch-mode", "cors")]),
            with(&[("sec-fetch-site", "none"), ("sec-fetch-mode", "navigate")]),
            HeaderMap::new(),
        ] {
            assert_eq!(cross_origin(&Method::GET, false, &fine, &seen), None, "{fine:?}");
        }
    }

    fn set_cookies(values: &[&'static str], seen: &Seen) -> Vec<String> {
        let mut h = HeaderMap::new();
        for v in values {
            h.append(header::SET_COOKIE, HeaderValue::from_static(v));
        }
        confine_response(&mut h, seen, &format!("{P}/")).unwrap();
        h.get_all(header::SET_COOKIE)
            .iter()
            .map(|v| v.to_str().unwrap().to_owned())
            .collect()
    }

    #[test]
    fn a_services_cookies_stay_on_the_service() {
        let kept = set_cookies(
            &[
                "krayne_session=x; Path=/",
                "evil=1; Path=/v1",
                "_xsrf=2; Path=/v1/namespaces/ml/clusters/c/services/dashboard/proxy/; HttpOnly",
                "theme=dark",
                "wide=1; Domain=apps.example.com; Path=/",
            ],
            &path_mode(),
        );
        assert_eq!(
            kept,
            [
                format!("evil=1; Path={P}/v1"),
                format!("_xsrf=2; HttpOnly; Path={P}/"),
                format!("theme=dark; Path={P}"),
            ]
        );
        let on_host = set_cookies(
            &[
                "a=1; Path=/",
                "b=2; Domain=.apps.example.com",
                "KRAYNE_x=1",
                "%6Brayne_session=x",
            ],
            &own_host(),
        );
        assert_eq!(on_host, ["a=1; Path=/"]);
        let mut h = HeaderMap::new();
        h.insert(header::COOKIE, HeaderValue::from_static("%4Brayne_session=abc; ok=1"));
        assert_eq!(
            foreign_cookies(&h).unwrap(),
            "ok=1",
            "a percent-encoded name is still krayne's"
        );
    }

    #[test]
    fn headers_acting_on_the_whole_origin_are_dropped_in_path_mode() {
        let mut h = HeaderMap::new();
        h.insert("service-worker-allowed", HeaderValue::from_static("/"));
        h.insert("clear-site-data", HeaderValue::from_static("\"*\""));
        confine_response(&mut h, &path_mode(), &format!("{P}/")).unwrap();
        assert!(h.is_empty(), "{h:?}");
        h.insert("service-worker-allowed", HeaderValue::from_static("/"));
        confine_response(&mut h, &own_host(), "/").unwrap();
        assert_eq!(h.len(), 1, "on its own host the origin is the service's");
    }

    #[test]
    fn redirects_stay_on_the_service() {
        let seen = path_mode();
        let here = format!("{P}/jobs/");
        for (location, kept) in [
            ("/jobs", format!("{P}/jobs")),
            (&format!("{P}/x?y=1#z"), format!("{P}/x?y=1#z")),
            ("tree", format!("{P}/jobs/tree")),
            ("../../../../../../../../../../whoami", format!("{P}/whoami")),
            ("http://127.0.0.1:8080/api", format!("{P}/api")),
            ("http:evil.example", format!("{P}/jobs/evil.example")),
        ] {
            assert_eq!(confine_location(location, &seen, &here), Ok(kept), "{location}");
        }
        for leaves in [
            "//evil.example/",
            "\\\\evil.example",
            "/\\evil.example",
            "https://evil.example/",
            "http://127.0.0.1:9999/",
            " //evil.example",
        ] {
            assert!(confine_location(leaves, &seen, &here).is_err(), "{leaves}");
        }
        let https = own_host();
        assert_eq!(confine_location("/lab?x", &https, "/tree"), Ok("/lab?x".to_owned()));
        // A path of two slashes would be scheme-relative to the browser.
        for dotted in ["/.//evil.example", "/x/..//evil.example", "/.\\/evil.example"] {
            let kept = confine_location(dotted, &https, "/").unwrap();
            assert!(kept.starts_with("/./"), "{dotted} → {kept}");
        }
        assert!(confine_location("http:evil.example", &https, "/").is_err());
        assert!(confine_location("https://notebook--c--ml.apps.example.com/", &https, "/").is_err());
    }
}
