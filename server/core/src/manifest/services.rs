//! A head's services as krayne serves them: which it declares (Krayne's
//! detection: the head container's named ports ∪ the head service's), on
//! which port, and which head pod serves them.

use super::{LABEL_NODE_TYPE, ObservedCluster, ObservedPod, head_ports::SERVICE_PORTS};
use crate::domain::Atom;

/// A service the head declares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeclaredService {
    /// `dashboard`, `client`, `notebook`, `code-server` or `ssh`.
    pub name: &'static str,
    /// `http` or `tcp`.
    pub protocol: &'static str,
    /// Its port in the head pod.
    pub port: u16,
    /// Whether it listens on the pod's loopback only (Krayne's bootstrap
    /// binds the notebook, code-server and sshd there), so that nothing
    /// on the cluster network reaches it: krayne reaches it through
    /// `pods/portforward`, which enters the pod's network namespace,
    /// whatever its upstream mode.
    pub on_loopback: bool,
    /// The path it serves under: `/`, or the notebook's base URL when its
    /// head says one (`KRAYNE_NOTEBOOK_BASE_URL`).
    pub base_path: String,
}

/// The services Krayne's bootstrap starts, each bound to the pod's
/// loopback (see `bootstrap`); Ray's own (dashboard, client) listen on the
/// pod's IP.
const ON_LOOPBACK: [&str; 3] = ["notebook", "code-server", "ssh"];

/// The services the head declares, in Krayne's order (dashboard, client,
/// notebook, code-server, ssh), each on its declared port: the named
/// container port, else the named head service port.
pub fn declared_services(cluster: &ObservedCluster) -> Vec<DeclaredService> {
    let head = &cluster.spec.head_group_spec;
    let container_ports = head.template.spec.containers.iter().flat_map(|c| c.ports.iter());
    let service_ports = head.head_service.spec.ports.iter();
    let container_port = |name: &str| {
        container_ports
            .clone()
            .find(|p| p.name.as_deref() == Some(name))
            .and_then(|p| p.container_port)
    };
    // A head service's port is reached in the pod on its target: a number,
    // a container port's name, or (unset) the port itself.
    let service_port = |name: &str| {
        let p = service_ports.clone().find(|p| p.name.as_deref() == Some(name))?;
        match &p.target_port {
            Some(target) => target.parse().ok().or_else(|| container_port(target)),
            None => p.port,
        }
    };
    let port_of = |name: &str| {
        container_port(name)
            .or_else(|| service_port(name))
            .and_then(|p| u16::try_from(p).ok())
            .filter(|p| *p > 0)
    };
    // The Ray container's (the first), and only a path.
    let notebook_base = head
        .template
        .spec
        .containers
        .first()
        .and_then(|c| c.notebook_base.as_ref())
        .filter(|base| base.starts_with('/'));
    SERVICE_PORTS
        .iter()
        .filter_map(|(name, scheme, _)| {
            port_of(name).map(|port| DeclaredService {
                name,
                protocol: if *scheme == "http" { "http" } else { "tcp" },
                port,
                on_loopback: ON_LOOPBACK.contains(name),
                base_path: match notebook_base {
                    Some(base) if *name == "notebook" => base.to_string(),
                    _ => "/".to_owned(),
                },
            })
        })
        .collect()
}

/// The head pod that serves: Running, not being deleted, every container
/// ready, with an IP.
pub fn serving_head<'a>(pods: &[&'a ObservedPod]) -> Option<&'a ObservedPod> {
    pods.iter().copied().find(|p| {
        let statuses = &p.status.container_statuses;
        p.metadata.labels.get(LABEL_NODE_TYPE).map(Atom::as_str) == Some("head")
            && p.status.phase.as_deref() == Some("Running")
            && p.metadata.deletion_timestamp.is_none()
            && !statuses.is_empty()
            && statuses.iter().all(|c| c.ready == Some(true))
            && p.status.pod_ip.as_deref().is_some_and(|ip| !ip.is_empty())
    })
}

/// The path of the HTTP proxy to a service, without its trailing slash
/// (a browser opens it with one).
pub fn proxy_path(namespace: &str, cluster: &str, service: &str) -> String {
    format!("/v1/namespaces/{namespace}/clusters/{cluster}/services/{service}/proxy")
}

/// The path of the WebSocket tunnel to a service.
pub fn tunnel_path(namespace: &str, cluster: &str, service: &str) -> String {
    format!("/v1/namespaces/{namespace}/clusters/{cluster}/services/{service}/tunnel")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn cluster(head: serde_json::Value) -> ObservedCluster {
        serde_json::from_value(json!({"metadata": {"name": "c", "namespace": "ml"},
            "spec": {"headGroupSpec": head}}))
        .unwrap()
    }

    #[test]
    fn services_come_from_named_container_and_service_ports_in_krayne_order() {
        let c = cluster(json!({
            "template": {"spec": {"containers": [{"ports": [
                {"name": "ssh", "containerPort": 2222}, {"name": "dashboard", "containerPort": 8265},
                {"name": "gcs", "containerPort": 6379}]}]}},
            "headService": {"spec": {"ports": [{"name": "notebook", "port": 80, "targetPort": 8888},
                                                {"name": "client", "port": 10001}]}},
        }));
        let found: Vec<(&str, &str, u16)> = declared_services(&c)
            .iter()
            .map(|s| (s.name, s.protocol, s.port))
            .collect();
        assert_eq!(
            found,
            [
                ("dashboard", "http", 8265),
                ("client", "tcp", 10001),
                ("notebook", "http", 8888),
                ("ssh", "tcp", 2222)
            ],
            "the head service's target port is where the pod listens"
        );
    }

    #[test]
    fn only_a_running_ready_head_serves() {
        let pod = |phase: &str, ready: bool, node: &str| -> ObservedPod {
            serde_json::from_value(json!({
                "metadata": {"name": "h", "labels": {"ray.io/node-type": node}},
                "status": {"phase": phase, "podIP": "10.0.0.1", "containerStatuses": [{"ready": ready}]},
            }))
            .unwrap()
        };
        let (running, starting, worker) = (
            pod("Running", true, "head"),
            pod("Running", false, "head"),
            pod("Running", true, "worker"),
        );
        assert!(serving_head(&[&worker, &running]).is_some());
        assert!(serving_head(&[&starting, &worker]).is_none());
        assert!(serving_head(&[&pod("Pending", true, "head")]).is_none());
    }
}
