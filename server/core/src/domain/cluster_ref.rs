//! A cluster named by a request, as one value, and where it lives.

use std::fmt;

use super::Atom;

/// A Kubernetes cluster krayne reaches: where a Ray cluster lives. Without
/// a sites file there is one, [`Site::local`] (the Kubernetes krayne runs
/// in); a sites file names several (docs/sites.md).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Site(Atom);

impl Site {
    /// The name of the one Kubernetes krayne has without a sites file.
    pub const LOCAL: &'static str = "local";

    /// The Kubernetes krayne runs in.
    pub fn local() -> Self {
        Self(Atom::from(Self::LOCAL))
    }

    /// The site named `name`.
    pub fn new(name: &str) -> Self {
        Self(Atom::new(name))
    }

    /// The site's name.
    pub fn name(&self) -> &str {
        self.0.as_str()
    }
}

impl Default for Site {
    fn default() -> Self {
        Self::local()
    }
}

impl fmt::Display for Site {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A cluster named by a request (a REST path, a gRPC message): its
/// namespace and name, and its site once known, carried as one value from
/// the transport through the use cases to the ports. A request names no
/// site (a cluster's name is unique across the fleet): the store finds it,
/// and a create's placement names it. Made once at the edge; its form is checked
/// by the use case that authorizes it, after the caller's role, so
/// refusals keep their order (a caller without the role learns nothing of
/// the name: 403 before a name's 400) and each is audited.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClusterRef {
    site: Option<Site>,
    namespace: String,
    name: String,
}

impl ClusterRef {
    /// The cluster `name` of `namespace`, as the request gave them,
    /// wherever it lives.
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            site: None,
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    /// The cluster `name` of `namespace` in `site`.
    pub fn at(site: Site, namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            site: Some(site),
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    /// The same cluster, known to live in `site`.
    #[must_use]
    pub fn placed(mut self, site: Site) -> Self {
        self.site = Some(site);
        self
    }

    /// Where it lives, when known (a placed create, a found cluster).
    pub fn site(&self) -> Option<&Site> {
        self.site.as_ref()
    }

    /// The namespace.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The cluster's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// `namespace/name`: a cluster's identity is unique across sites, so the
/// site is not part of how it is named to people.
impl fmt::Display for ClusterRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_names_the_namespace_then_the_cluster() {
        let c = ClusterRef::new("ml-team", "demo");
        assert_eq!(
            (c.namespace(), c.name(), c.to_string().as_str()),
            ("ml-team", "demo", "ml-team/demo")
        );
    }

    #[test]
    fn a_cluster_named_by_a_request_has_no_site_until_placed() {
        let c = ClusterRef::new("ml-team", "demo");
        assert_eq!(c.site(), None);
        let placed = c.clone().placed(Site::new("eu-1"));
        assert_eq!(placed, ClusterRef::at(Site::new("eu-1"), "ml-team", "demo"));
        assert_eq!(placed.to_string(), c.to_string());
    }
}
