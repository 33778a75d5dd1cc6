//! Per-service origins (`--apps-domain`): each HTTP service of each
//! cluster at a host of its own, `{svc}--{cluster}--{ns}.{domain}`, so one
//! cluster's pages share no origin with another's or with the API.

use crate::manifest::SERVICE_NAMES;

/// The domain under which services get their hosts (`apps.example.com`,
/// optionally with a port, `apps.localhost:8080`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppsDomain {
    domain: String,
}

/// The longest DNS label.
const MAX_LABEL: usize = 63;

/// Which service a host names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppHost {
    /// Namespace.
    pub namespace: String,
    /// Cluster.
    pub name: String,
    /// Service.
    pub service: String,
}

impl AppsDomain {
    /// Parses a domain (lower-cased): DNS labels, an optional port.
    pub fn parse(text: &str) -> Result<Self, String> {
        let domain = text.trim().trim_start_matches('.').to_ascii_lowercase();
        let (name, port) = domain
            .split_once(':')
            .map_or((domain.as_str(), None), |(n, p)| (n, Some(p)));
        let labels_ok = !name.is_empty()
            && name.split('.').all(|l| {
                !l.is_empty()
                    && l.len() <= MAX_LABEL
                    && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                    && !l.starts_with('-')
                    && !l.ends_with('-')
            });
        if !labels_ok || port.is_some_and(|p| p.parse::<u16>().is_err()) {
            return Err(format!(
                "{text:?}: expected a DNS name such as apps.example.com (a port may follow)"
            ));
        }
        Ok(Self { domain })
    }

    /// The host of service `service` of cluster `name` in `namespace`,
    /// when its label fits DNS (63 characters) and reads back unambiguously
    /// (no `--` in the cluster's or namespace's name).
    pub fn host(&self, namespace: &str, name: &str, service: &str) -> Option<String> {
        let label = format!("{service}--{name}--{namespace}");
        (label.len() <= MAX_LABEL && !name.contains("--") && !namespace.contains("--"))
            .then(|| format!("{label}.{}", self.domain))
    }

    /// The service a request's `Host` names, if it is one of this
    /// domain's (the port is ignored); `Err` for a host under the domain
    /// that names none.
    pub fn resolve(&self, host: &str) -> Option<Result<AppHost, ()>> {
        let bare = |h: &str| h.split(':').next().unwrap_or("").to_ascii_lowercase();
        let host = bare(host);
        let label = host.strip_suffix(&format!(".{}", bare(&self.domain)))?;
        let named = SERVICE_NAMES.iter().find_map(|svc| {
            let rest = label.strip_prefix(svc)?.strip_prefix("--")?;
            let (name, namespace) = rest.split_once("--")?;
            (!name.is_empty() && !namespace.is_empty() && !namespace.contains("--")).then(|| AppHost {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
                service: (*svc).to_owned(),
            })
        });
        Some(named.ok_or(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_are_made_and_read_back() {
        let d = AppsDomain::parse("Apps.Example.com").unwrap();
        let host = d.host("ml-team", "demo", "code-server").unwrap();
        assert_eq!(host, "code-server--demo--ml-team.apps.example.com");
        let back = d.resolve(&format!("{host}:443")).unwrap().unwrap();
        assert_eq!(
            (back.namespace.as_str(), back.name.as_str(), back.service.as_str()),
            ("ml-team", "demo", "code-server")
        );
        assert_eq!(d.resolve("api.example.com"), None);
        assert_eq!(d.resolve("nope--demo--ml.apps.example.com"), Some(Err(())));
        assert_eq!(d.resolve("apps.example.com"), None);
        assert!(d.host("ml", "a--b", "dashboard").is_none(), "ambiguous");
        assert!(d.host("ml", &"c".repeat(60), "dashboard").is_none(), "too long for DNS");
        let local = AppsDomain::parse("apps.localhost:8080").unwrap();
        assert_eq!(
            local.host("ns", "c", "dashboard").unwrap(),
            "dashboard--c--ns.apps.localhost:8080"
        );
        assert!(local.resolve("dashboard--c--ns.apps.localhost:8080").is_some());
        for bad in ["", "-x.com", "a..b", "x.com:port", "exa mple.com"] {
            assert!(AppsDomain::parse(bad).is_err(), "{bad}");
        }
    }
}
