//! What Kubernetes RBAC sees in a request: its verb and resource, worked out
//! from the method and path as the API server's request-info resolver does.
//! Tests compare it with the rules of krayne's Helm chart.

use std::sync::Arc;

use super::state::RequestRecord;

/// What RBAC grants the sandbox's callers, when it is told (a kubeconfig
/// bound to exactly a chart's Roles): any access it does not allow is
/// refused 403, as kube-apiserver refuses it.
#[derive(Clone)]
pub struct Grants(Arc<dyn Fn(&Access) -> bool + Send + Sync>);

impl Grants {
    /// Grants what `allows` says yes to.
    pub fn new(allows: impl Fn(&Access) -> bool + Send + Sync + 'static) -> Self {
        Self(Arc::new(allows))
    }

    /// Whether `access` is granted.
    pub fn allows(&self, access: &Access) -> bool {
        (self.0)(access)
    }
}

impl std::fmt::Debug for Grants {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Grants(..)")
    }
}

/// The authorization attributes of one request.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Access {
    /// A request for an API object or collection.
    Resource {
        /// API group; `""` for the core group.
        group: String,
        /// Resource (plural), e.g. `rayclusters`.
        resource: String,
        /// Subresource, e.g. `status`.
        subresource: Option<String>,
        /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`
        /// or `deletecollection`.
        verb: String,
        /// Namespace of a namespaced request; `None` when cluster-wide.
        namespace: Option<String>,
    },
    /// A request for another path, such as `/version`.
    NonResource {
        /// The path.
        path: String,
        /// The method, lower-case.
        verb: String,
    },
}

impl RequestRecord {
    /// Every authorization this request needs. A WebSocket `GET` that
    /// connects to a pod (`pods/portforward`, `exec`, `attach`: how
    /// kube-rs, client-go 1.31+ and the Python client open them) is `get`
    /// on the subresource, as the API server's request-info resolver makes
    /// it; Kubernetes 1.35+ checks `create` as well (the
    /// `AuthorizePodWebsocketUpgradeCreatePermission` gate, on by default),
    /// so both are required here, the stricter of the two. A server-side
    /// apply that creates its object needs `create` besides `patch`, as the
    /// API server's patch handler checks.
    pub fn accesses(&self) -> Vec<Access> {
        let primary = self.access();
        let mut all = vec![primary.clone()];
        if self.creates
            && let Access::Resource {
                group,
                resource,
                subresource: None,
                namespace,
                ..
            } = primary.clone()
        {
            all.push(Access::Resource {
                group,
                resource,
                subresource: None,
                verb: "create".to_owned(),
                namespace,
            });
        }
        if let Access::Resource {
            subresource: Some(sub),
            verb,
            ..
        } = &primary
            && matches!(sub.as_str(), "portforward" | "exec" | "attach")
            && verb == "get"
            && let Access::Resource {
                group,
                resource,
                subresource,
                namespace,
                ..
            } = primary.clone()
        {
            all.push(Access::Resource {
                group,
                resource,
                subresource,
                verb: "create".to_owned(),
                namespace,
            });
        }
        all
    }

    /// The RBAC attributes of this request, as the API server's
    /// request-info resolver works them out (one verb, from the method).
    pub fn access(&self) -> Access {
        let (path, query) = self.uri.split_once('?').unwrap_or((&self.uri, ""));
        let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        let (group, rest) = match segments.as_slice() {
            ["api", _version, rest @ ..] if !rest.is_empty() => ("", rest),
            ["apis", group, _version, rest @ ..] if !rest.is_empty() => (*group, rest),
            _ => {
                return Access::NonResource {
                    path: path.to_owned(),
                    verb: self.method.to_ascii_lowercase(),
                };
            }
        };
        let (namespace, rest) = match rest {
            ["namespaces", ns, more @ ..] if !more.is_empty() => (Some((*ns).to_owned()), more),
            _ => (None, rest),
        };
        let (resource, name, subresource) = match rest {
            [resource] => (*resource, None, None),
            [resource, name] => (*resource, Some(*name), None),
            [resource, name, sub, ..] => (*resource, Some(*name), Some((*sub).to_owned())),
            [] => ("", None, None),
        };
        let watching = query.split('&').any(|kv| kv == "watch=true" || kv == "watch=1");
        // Connecting to a pod (port-forward, exec): `create` for SPDY's
        // POST, `get` for a WebSocket's GET (see `accesses`).
        let connects = matches!(subresource.as_deref(), Some("portforward" | "exec" | "attach"));
        let verb = match (self.method.as_str(), name.is_some()) {
            ("GET", _) if connects => "get",
            ("GET", _) if watching => "watch",
            ("GET", true) => "get",
            ("GET", false) => "list",
            ("POST", _) => "create",
            ("PUT", _) => "update",
            ("PATCH", _) => "patch",
            ("DELETE", true) => "delete",
            ("DELETE", false) => "deletecollection",
            (other, _) => {
                return Access::NonResource {
                    path: path.to_owned(),
                    verb: other.to_ascii_lowercase(),
                };
            }
        };
        Access::Resource {
            group: group.to_owned(),
            resource: resource.to_owned(),
            subresource,
            verb: verb.to_owned(),
            namespace,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn access(method: &str, uri: &str) -> Access {
        RequestRecord {
            method: method.into(),
            uri: uri.into(),
            request_id: None,
            creates: false,
        }
        .access()
    }

    fn resource(group: &str, resource: &str, sub: Option<&str>, verb: &str, ns: Option<&str>) -> Access {
        Access::Resource {
            group: group.into(),
            resource: resource.into(),
            subresource: sub.map(Into::into),
            verb: verb.into(),
            namespace: ns.map(Into::into),
        }
    }

    #[test]
    fn verbs_follow_the_method_the_name_and_watch() {
        let ray = "/apis/ray.io/v1/namespaces/ml/rayclusters";
        assert_eq!(
            access("GET", ray),
            resource("ray.io", "rayclusters", None, "list", Some("ml"))
        );
        assert_eq!(
            access("GET", &format!("{ray}/a")),
            resource("ray.io", "rayclusters", None, "get", Some("ml"))
        );
        assert_eq!(
            access(
                "GET",
                &format!("{ray}?fieldSelector=metadata.name%3Da&watch=true&resourceVersion=0")
            ),
            resource("ray.io", "rayclusters", None, "watch", Some("ml"))
        );
        assert_eq!(
            access("POST", &format!("{ray}?dryRun=All")),
            resource("ray.io", "rayclusters", None, "create", Some("ml"))
        );
        assert_eq!(
            access("PATCH", &format!("{ray}/a")),
            resource("ray.io", "rayclusters", None, "patch", Some("ml"))
        );
        assert_eq!(
            access("PUT", &format!("{ray}/a/status")),
            resource("ray.io", "rayclusters", Some("status"), "update", Some("ml"))
        );
        assert_eq!(
            access("DELETE", &format!("{ray}/a")),
            resource("ray.io", "rayclusters", None, "delete", Some("ml"))
        );
        assert_eq!(
            access("DELETE", ray),
            resource("ray.io", "rayclusters", None, "deletecollection", Some("ml"))
        );
    }

    #[test]
    fn core_group_cluster_scope_and_non_resource_paths() {
        assert_eq!(
            access("GET", "/api/v1/namespaces"),
            resource("", "namespaces", None, "list", None)
        );
        assert_eq!(
            access("GET", "/api/v1/namespaces/ml"),
            resource("", "namespaces", None, "get", None)
        );
        assert_eq!(
            access("GET", "/api/v1/namespaces/ml/pods?labelSelector=ray.io%2Fcluster"),
            resource("", "pods", None, "list", Some("ml"))
        );
        assert_eq!(
            access("GET", "/apis/ray.io/v1/rayclusters"),
            resource("ray.io", "rayclusters", None, "list", None)
        );
        assert_eq!(
            access("GET", "/version"),
            Access::NonResource {
                path: "/version".into(),
                verb: "get".into()
            }
        );
        assert_eq!(
            access("GET", "/apis"),
            Access::NonResource {
                path: "/apis".into(),
                verb: "get".into()
            }
        );
    }

    #[test]
    fn a_websocket_port_forward_needs_get_and_create_and_spdy_create() {
        let record = |method: &str| RequestRecord {
            method: method.into(),
            uri: "/api/v1/namespaces/ml/pods/head-0/portforward?ports=22".into(),
            request_id: None,
            creates: false,
        };
        let verbs = |method: &str| -> Vec<String> {
            record(method)
                .accesses()
                .into_iter()
                .filter_map(|a| match a {
                    Access::Resource { verb, .. } => Some(verb),
                    Access::NonResource { .. } => None,
                })
                .collect()
        };
        assert_eq!(verbs("GET"), ["get", "create"]);
        assert_eq!(verbs("POST"), ["create"]);
    }
}
