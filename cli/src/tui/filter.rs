//! The explorer's `/` filter, as Krayne reads it: free words match the
//! cluster's name; `status:`, `ns:` and `service:` words match those.
//! Every word must match; case does not matter.

use krayne_client::proto::ClusterInfo;

/// A parsed filter.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Filter {
    terms: Vec<Term>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Term {
    Name(String),
    Status(String),
    Namespace(String),
    Service(String),
}

impl Filter {
    /// Reads the filter line; an empty line matches everything.
    pub(crate) fn parse(text: &str) -> Self {
        let terms = text
            .split_whitespace()
            .map(|word| {
                let lower = word.to_lowercase();
                match lower.split_once(':') {
                    Some(("status", v)) => Term::Status(v.to_owned()),
                    Some(("ns" | "namespace", v)) => Term::Namespace(v.to_owned()),
                    Some(("service" | "svc", v)) => Term::Service(v.to_owned()),
                    _ => Term::Name(lower),
                }
            })
            .collect();
        Self { terms }
    }

    /// Whether `cluster` passes every word.
    pub(crate) fn matches(&self, cluster: &ClusterInfo) -> bool {
        self.terms.iter().all(|term| match term {
            Term::Name(v) => cluster.name.to_lowercase().contains(v.as_str()),
            Term::Status(v) => cluster.status.to_lowercase().starts_with(v.as_str()),
            Term::Namespace(v) => cluster.namespace.to_lowercase().contains(v.as_str()),
            Term::Service(v) => services(cluster).iter().any(|s| s.starts_with(v.as_str())),
        })
    }
}

/// The services a cluster declares, in Krayne's order.
pub(crate) fn services(cluster: &ClusterInfo) -> Vec<&'static str> {
    [
        ("dashboard", &cluster.dashboard_url),
        ("client", &cluster.client_url),
        ("notebook", &cluster.notebook_url),
        ("code-server", &cluster.code_server_url),
        ("ssh", &cluster.ssh_url),
    ]
    .into_iter()
    .filter(|(_, url)| url.as_deref().is_some_and(|u| !u.is_empty()))
    .map(|(name, _)| name)
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(name: &str, namespace: &str, status: &str, notebook: bool) -> ClusterInfo {
        ClusterInfo {
            name: name.into(),
            namespace: namespace.into(),
            status: status.into(),
            dashboard_url: Some("http://10.0.0.1:8265".into()),
            notebook_url: notebook.then(|| "http://10.0.0.1:8888".into()),
            ..ClusterInfo::default()
        }
    }

    #[test]
    fn free_words_match_the_name_in_any_case() {
        let c = cluster("Train-GPU", "ml-team", "ready", false);
        assert!(Filter::parse("").matches(&c));
        assert!(Filter::parse("gpu").matches(&c));
        assert!(Filter::parse("TRAIN gpu").matches(&c));
        assert!(!Filter::parse("train cpu").matches(&c));
    }

    #[test]
    fn prefixed_words_match_their_field() {
        let c = cluster("train", "ml-team", "pods-pending", true);
        assert!(Filter::parse("status:pods").matches(&c));
        assert!(!Filter::parse("status:ready").matches(&c));
        assert!(Filter::parse("ns:ml").matches(&c));
        assert!(!Filter::parse("ns:data").matches(&c));
        assert!(Filter::parse("service:notebook").matches(&c));
        assert!(!Filter::parse("service:ssh").matches(&c));
        assert!(Filter::parse("train status:pods-pending ns:ml-team svc:dash").matches(&c));
    }

    #[test]
    fn services_are_the_declared_ones_in_order() {
        assert_eq!(services(&cluster("a", "b", "ready", true)), ["dashboard", "notebook"]);
        assert_eq!(Filter::parse(" "), Filter::default());
    }
}
