//! The client's address. `X-Forwarded-For` and `Forwarded` are anyone's to
//! write, so they are believed only when the TCP peer is a configured
//! trusted proxy (`--trusted-proxies`); otherwise the source is the peer.

use std::{net::IpAddr, net::SocketAddr, sync::Arc};

use axum::{
    extract::{ConnectInfo, Request, State},
    http::{HeaderMap, header},
    middleware::Next,
    response::Response,
};
use ipnet::IpNet;

/// The address a request came from, in its extensions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Source(pub IpAddr);

/// In a request's extensions when a trusted proxy says the client spoke
/// https to it (`X-Forwarded-Proto`, or `proto=` of `Forwarded`): cookies
/// set for that client are `Secure`, links given to it are https.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ViaHttps;

/// The one forwarding header the trusted proxies write. Only that one is
/// read: most proxies append to `X-Forwarded-For` and pass a client's own
/// `Forwarded` through untouched (or the other way round), so reading
/// whichever is present would let a client name any address.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ForwardedHeader {
    /// `X-Forwarded-For` (nginx, most ingresses and cloud load balancers).
    #[default]
    XForwardedFor,
    /// RFC 7239 `Forwarded`.
    Forwarded,
}

impl std::str::FromStr for ForwardedHeader {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "x-forwarded-for" => Ok(Self::XForwardedFor),
            "forwarded" => Ok(Self::Forwarded),
            other => Err(format!("{other:?}: expected x-forwarded-for or forwarded")),
        }
    }
}

/// Networks whose connections may name the client in a forwarding header.
#[derive(Debug, Clone, Default)]
pub struct TrustedProxies {
    nets: Arc<Vec<IpNet>>,
    header: ForwardedHeader,
}

impl TrustedProxies {
    /// Reads the client from `header` instead of `X-Forwarded-For`.
    pub fn with_header(mut self, header: ForwardedHeader) -> Self {
        self.header = header;
        self
    }

    /// Parses CIDRs (`10.0.0.0/8`) or single addresses (`10.1.2.3`).
    pub fn parse(entries: &[String]) -> Result<Self, String> {
        let mut nets = Vec::new();
        for entry in entries.iter().map(|e| e.trim()).filter(|e| !e.is_empty()) {
            let net = entry
                .parse::<IpNet>()
                .or_else(|_| entry.parse::<IpAddr>().map(IpNet::from))
                .map_err(|_| format!("--trusted-proxies: {entry:?} is not an address or a CIDR"))?;
            nets.push(net);
        }
        Ok(Self {
            nets: Arc::new(nets),
            header: ForwardedHeader::default(),
        })
    }

    fn trusts(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        self.nets.iter().any(|n| n.contains(&ip))
    }

    /// Whether a trusted proxy (`peer`) says its client spoke https: the
    /// last value of the configured header's protocol (the nearest proxy's).
    pub fn via_https(&self, peer: IpAddr, headers: &HeaderMap) -> bool {
        if !self.trusts(peer) {
            return false;
        }
        let proto = match self.header {
            ForwardedHeader::XForwardedFor => headers
                .get_all("x-forwarded-proto")
                .iter()
                .filter_map(|v| v.to_str().ok())
                .flat_map(|v| v.split(','))
                .last()
                .map(|p| p.trim().to_owned()),
            ForwardedHeader::Forwarded => headers
                .get_all(header::FORWARDED)
                .iter()
                .filter_map(|v| v.to_str().ok())
                .flat_map(|v| v.split(','))
                .last()
                .and_then(|element| {
                    element.split(';').find_map(|pair| {
                        let (key, value) = pair.split_once('=')?;
                        key.trim()
                            .eq_ignore_ascii_case("proto")
                            .then(|| value.trim().trim_matches('"').to_owned())
                    })
                }),
        };
        proto.is_some_and(|p| p.eq_ignore_ascii_case("https"))
    }

    /// The client of a connection from `peer` that sent `headers`: the
    /// nearest address in the configured header's chain that is not a trusted proxy
    /// (walking back from the peer), or the peer when it is not trusted or
    /// the chain is absent or unreadable.
    pub fn client(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        if !self.trusts(peer) {
            return peer;
        }
        let chain = match self.header {
            ForwardedHeader::XForwardedFor => x_forwarded_for(headers),
            ForwardedHeader::Forwarded => forwarded_for(headers),
        };
        let Some(chain) = chain else {
            return peer;
        };
        let mut client = peer;
        for hop in chain.iter().rev() {
            let Some(ip) = hop else { return client };
            client = *ip;
            if !self.trusts(*ip) {
                break;
            }
        }
        client
    }
}

/// `X-Forwarded-For` hops, oldest first (`None` for an unreadable hop).
fn x_forwarded_for(headers: &HeaderMap) -> Option<Vec<Option<IpAddr>>> {
    let hops: Vec<Option<IpAddr>> = headers
        .get_all("x-forwarded-for")
        .iter()
        .flat_map(|v| v.to_str().unwrap_or("?").split(','))
        .map(|hop| parse_node(hop.trim()))
        .collect();
    (!hops.is_empty()).then_some(hops)
}

/// RFC 7239 `Forwarded` `for=` hops, oldest first.
fn forwarded_for(headers: &HeaderMap) -> Option<Vec<Option<IpAddr>>> {
    let mut hops = Vec::new();
    for value in headers.get_all(header::FORWARDED) {
        for element in value.to_str().unwrap_or("for=?").split(',') {
            let node = element.split(';').find_map(|pair| {
                let (key, value) = pair.split_once('=')?;
                key.trim().eq_ignore_ascii_case("for").then(|| value.trim())
            });
            if let Some(node) = node {
                hops.push(parse_node(node.trim_matches('"')));
            }
        }
    }
    (!hops.is_empty()).then_some(hops)
}

/// An address as forwarding headers write it: `1.2.3.4`, `1.2.3.4:80`,
/// `[2001:db8::1]`, `[2001:db8::1]:80` or a bare IPv6 address.
fn parse_node(node: &str) -> Option<IpAddr> {
    if let Ok(ip) = node.parse::<IpAddr>() {
        return Some(ip);
    }
    if let Ok(sa) = node.parse::<SocketAddr>() {
        return Some(sa.ip());
    }
    node.strip_prefix('[')
        .and_then(|n| n.strip_suffix(']'))
        .and_then(|n| n.parse().ok())
}

/// Middleware: puts the request's [`Source`] in its extensions.
pub async fn resolve_source(State(trusted): State<TrustedProxies>, mut request: Request, next: Next) -> Response {
    let peer = request.extensions().get::<ConnectInfo<SocketAddr>>().map(|c| c.0.ip());
    if let Some(peer) = peer {
        let client = trusted.client(peer, request.headers());
        let https = trusted.via_https(peer, request.headers());
        request.extensions_mut().insert(Source(client));
        if https {
            request.extensions_mut().insert(ViaHttps);
        }
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn with(name: &'static str, values: &[&str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for v in values {
            h.append(name, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    fn proxies(list: &[&str]) -> TrustedProxies {
        TrustedProxies::parse(&list.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn only_a_trusted_proxy_says_the_client_spoke_https() {
        let xfp = with("x-forwarded-proto", &["http, https"]);
        assert!(proxies(&["10.0.0.0/8"]).via_https(ip("10.0.0.1"), &xfp));
        assert!(!proxies(&[]).via_https(ip("10.0.0.1"), &xfp));
        assert!(!proxies(&["10.0.0.0/8"]).via_https(ip("10.0.0.1"), &with("x-forwarded-proto", &["https, http"])));
        let fwd = with("forwarded", &[r#"for=1.2.3.4;proto=http, for=10.0.0.2;proto="https""#]);
        let p = proxies(&["10.0.0.0/8"]).with_header(ForwardedHeader::Forwarded);
        assert!(p.via_https(ip("10.0.0.1"), &fwd));
        assert!(!p.via_https(ip("10.0.0.1"), &xfp), "only the configured header");
    }

    #[test]
    fn forwarding_headers_are_ignored_from_untrusted_peers() {
        let xff = with("x-forwarded-for", &["203.0.113.7"]);
        assert_eq!(proxies(&[]).client(ip("198.51.100.1"), &xff), ip("198.51.100.1"));
        assert_eq!(
            proxies(&["10.0.0.0/8"]).client(ip("198.51.100.1"), &xff),
            ip("198.51.100.1")
        );
    }

    #[test]
    fn the_nearest_untrusted_hop_is_the_client() {
        let p = proxies(&["10.0.0.0/8", "192.0.2.9"]);
        // A client-written first hop cannot hide the real one.
        let xff = with("x-forwarded-for", &["1.1.1.1, 203.0.113.7", "10.2.3.4"]);
        assert_eq!(p.client(ip("10.0.0.1"), &xff), ip("203.0.113.7"));
        // Only the configured header counts: a client's own `Forwarded`
        // passed through an X-Forwarded-For proxy names nobody.
        let fwd = with("forwarded", &[r#"for="[2001:db8::1]:4711";proto=https, for=192.0.2.9"#]);
        assert_eq!(p.client(ip("10.0.0.1"), &fwd), ip("10.0.0.1"));
        let mut both = fwd.clone();
        both.append("x-forwarded-for", HeaderValue::from_static("203.0.113.99"));
        assert_eq!(p.client(ip("10.0.0.1"), &both), ip("203.0.113.99"));
        let rfc = p.clone().with_header(ForwardedHeader::Forwarded);
        assert_eq!(rfc.client(ip("10.0.0.1"), &both), ip("2001:db8::1"));
    }

    #[test]
    fn unreadable_chains_fall_back_to_the_last_trusted_hop() {
        let p = proxies(&["10.0.0.0/8"]);
        assert_eq!(p.client(ip("10.0.0.1"), &HeaderMap::new()), ip("10.0.0.1"));
        let junk = with("x-forwarded-for", &["203.0.113.7, garbage"]);
        assert_eq!(p.client(ip("10.0.0.1"), &junk), ip("10.0.0.1"));
        let all_trusted = with("x-forwarded-for", &["10.9.9.9"]);
        assert_eq!(p.client(ip("10.0.0.1"), &all_trusted), ip("10.9.9.9"));
    }

    #[test]
    fn bad_entries_are_refused() {
        assert!(TrustedProxies::parse(&["10.0.0.0/33".into()]).is_err());
        assert!(TrustedProxies::parse(&["proxy.local".into()]).is_err());
        assert!(TrustedProxies::parse(&["::1".into(), " 127.0.0.1 ".into()]).is_ok());
    }
}
