//! NetworkPolicy ingress, enforced on the stand-ins' pod-IP listeners as a
//! network plugin enforces it: a pod that policies select (`Ingress`)
//! takes a connection only when a rule admits its source — a pod (found by
//! its IP) matching a rule's `podSelector`/`namespaceSelector`, or an
//! address in an `ipBlock` — on a port the rule lists (or any). A source
//! that is no pod's IP (the machine itself, say) is outside the cluster:
//! only an `ipBlock` admits it. `pods/portforward` enters a pod from its
//! node and is never subject to policies. A refused connection is closed
//! at once (a real plugin drops its packets; the client would time out).
//!
//! A pod registered as a process of this machine (krayne's own, by
//! [`crate::Sandbox::add_pod`]) shares its address with every program
//! here: a connection is that pod's only when its socket belongs to the
//! user the pod was registered for ([`RUNS_AS_UID`]), as the kernel's
//! socket table says. Anyone else on the machine — another user, or a
//! tenant's job, which the sandbox runs as `nobody` — is outside.

use std::net::IpAddr;

use serde_json::Value;

use crate::{Resource, store::Store};

/// The annotation of a pod that is a process of this machine: the uid whose
/// sockets are that pod's.
pub(crate) const RUNS_AS_UID: &str = "sandbox.krayne.dev/runs-as-uid";

/// Whether `store`'s policies let a connection from `peer` (whose socket
/// `peer_uid` owns, when known) reach `port` of `pod`.
pub(super) fn admits(store: &Store, pod: &Value, peer: IpAddr, peer_uid: Option<u32>, port: u16) -> bool {
    let namespace = pod["metadata"]["namespace"].as_str().unwrap_or_default();
    let (policies, _) = store.list(Resource::NetworkPolicy, Some(namespace), |p| {
        governs_ingress(p) && selects(&p["spec"]["podSelector"], &pod["metadata"]["labels"])
    });
    if policies.is_empty() {
        return true;
    }
    let peer_pod = store
        .list(Resource::Pod, None, |p| {
            p["status"]["podIP"].as_str().and_then(|ip| ip.parse::<IpAddr>().ok()) == Some(peer)
                && match p["metadata"]["annotations"][RUNS_AS_UID].as_str() {
                    Some(uid) => peer_uid.is_some_and(|peer| uid == peer.to_string()),
                    None => true,
                }
        })
        .0
        .into_iter()
        .next();
    policies.iter().any(|policy| {
        policy["spec"]["ingress"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|rule| on_port(rule, port) && from(rule, namespace, peer_pod.as_deref(), peer))
    })
}

/// The uid owning the other end of the loopback connection `peer` →
/// `local`, from the kernel's socket table; `None` when it is not there
/// (not a local connection, or `/proc` unreadable).
pub(super) fn peer_uid(peer: std::net::SocketAddr, local: std::net::SocketAddr) -> Option<u32> {
    let table = match peer {
        std::net::SocketAddr::V4(_) => procfs::net::tcp(),
        std::net::SocketAddr::V6(_) => procfs::net::tcp6(),
    };
    table
        .ok()?
        .into_iter()
        .find(|entry| entry.local_address == peer && entry.remote_address == local)
        .map(|entry| entry.uid)
}

/// Whether a policy restricts ingress (`policyTypes` absent means
/// `Ingress`, as Kubernetes defaults it).
fn governs_ingress(policy: &Value) -> bool {
    match policy["spec"]["policyTypes"].as_array() {
        Some(types) => types.iter().any(|t| t == "Ingress"),
        None => true,
    }
}

fn on_port(rule: &Value, port: u16) -> bool {
    match rule["ports"].as_array() {
        Some(ports) if !ports.is_empty() => ports.iter().any(|p| {
            let from = p["port"].as_u64();
            let to = p["endPort"].as_u64().or(from);
            from.is_none_or(|from| (from..=to.unwrap_or(from)).contains(&u64::from(port)))
        }),
        _ => true,
    }
}

fn from(rule: &Value, namespace: &str, peer_pod: Option<&Value>, peer: IpAddr) -> bool {
    let Some(peers) = rule["from"].as_array().filter(|p| !p.is_empty()) else {
        return true;
    };
    peers.iter().any(|entry| {
        if let Some(block) = entry.get("ipBlock") {
            return in_block(block, peer);
        }
        let Some(pod) = peer_pod else {
            return false;
        };
        let pod_namespace = pod["metadata"]["namespace"].as_str().unwrap_or_default();
        let namespace_ok = match entry.get("namespaceSelector") {
            // Kubernetes labels every namespace with its name.
            Some(selector) => selects(
                selector,
                &serde_json::json!({"kubernetes.io/metadata.name": pod_namespace}),
            ),
            None => pod_namespace == namespace,
        };
        let pod_ok = entry
            .get("podSelector")
            .is_none_or(|selector| selects(selector, &pod["metadata"]["labels"]));
        namespace_ok && pod_ok
    })
}

fn in_block(block: &Value, peer: IpAddr) -> bool {
    let within = |cidr: &Value| {
        cidr.as_str()
            .and_then(|c| c.parse::<ipnet::IpNet>().ok())
            .is_some_and(|net| net.contains(&peer))
    };
    within(&block["cidr"]) && !block["except"].as_array().into_iter().flatten().any(within)
}

/// Whether a label selector selects `labels` (`matchLabels` and
/// `matchExpressions`; an empty selector selects everything).
fn selects(selector: &Value, labels: &Value) -> bool {
    let label = |key: &str| labels.get(key).and_then(Value::as_str);
    let matched = selector["matchLabels"]
        .as_object()
        .into_iter()
        .flatten()
        .all(|(k, v)| label(k) == v.as_str());
    let expressions = selector["matchExpressions"].as_array().into_iter().flatten().all(|e| {
        let key = e["key"].as_str().unwrap_or_default();
        let values: Vec<&str> = e["values"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        match e["operator"].as_str() {
            Some("In") => label(key).is_some_and(|v| values.contains(&v)),
            Some("NotIn") => label(key).is_none_or(|v| !values.contains(&v)),
            Some("Exists") => label(key).is_some(),
            Some("DoesNotExist") => label(key).is_none(),
            _ => false,
        }
    });
    matched && expressions
}

#[cfg(test)]
mod peer_tests {
    /// The kernel's socket table names this process's user as the owner
    /// of a loopback connection it made.
    #[test]
    fn a_loopback_connections_user_is_read_from_the_socket_table() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, peer) = listener.accept().unwrap();
        assert_eq!(peer, client.local_addr().unwrap());
        let uid = super::peer_uid(peer, server.local_addr().unwrap());
        assert_eq!(uid, Some(nix::unistd::geteuid().as_raw()));
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn selectors_match_labels_and_expressions() {
        let labels = json!({"ray.io/cluster": "a", "team": "ml"});
        assert!(selects(&json!({}), &labels));
        assert!(selects(&json!({"matchLabels": {"ray.io/cluster": "a"}}), &labels));
        assert!(!selects(&json!({"matchLabels": {"ray.io/cluster": "b"}}), &labels));
        assert!(selects(
            &json!({"matchExpressions": [{"key": "team", "operator": "In", "values": ["ml", "x"]}]}),
            &labels
        ));
        assert!(!selects(
            &json!({"matchExpressions": [{"key": "team", "operator": "DoesNotExist"}]}),
            &labels
        ));
    }

    #[test]
    fn ports_and_blocks() {
        assert!(on_port(&json!({}), 8265));
        assert!(on_port(&json!({"ports": [{"port": 8000, "endPort": 9000}]}), 8265));
        assert!(!on_port(&json!({"ports": [{"port": 10001}]}), 8265));
        let ip: IpAddr = "10.0.0.5".parse().unwrap();
        assert!(in_block(&json!({"cidr": "10.0.0.0/8"}), ip));
        assert!(!in_block(&json!({"cidr": "10.0.0.0/8", "except": ["10.0.0.0/24"]}), ip));
    }
}
