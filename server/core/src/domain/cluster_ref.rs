//! A cluster named by a request, as one value.

use std::fmt;

/// A cluster named by a request (a REST path, a gRPC message): its
/// namespace and name, carried as one value from the transport through
/// the use cases. Made once at the edge; its form is checked by the use
/// case that authorizes it, after the caller's role, so refusals keep
/// their order (a caller without the role learns nothing of the name:
/// 403 before a name's 400) and each is audited.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClusterRef {
    namespace: String,
    name: String,
}

impl ClusterRef {
    /// The cluster `name` of `namespace`, as the request gave them.
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
        }
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
}
