//! A cluster's services: list them, tunnel to them, SSH through a tunnel.

mod command;
pub(crate) mod credentials;
pub(crate) mod detached;
pub(crate) mod list;
pub(crate) mod open;
pub(crate) mod ssh;
pub(crate) mod tunnel;

pub(crate) use command::Command;

/// A service's state as the CLI and the TUI print it.
pub(crate) fn state_name(service: &krayne_client::proto::HeadService) -> &'static str {
    use krayne_client::proto::ServiceState;
    match service.state() {
        ServiceState::Available => "available",
        ServiceState::Unreachable => "unreachable",
        ServiceState::Pending | ServiceState::Unspecified => "pending",
    }
}

/// How to reach a service through the server: the proxy's URL for HTTP
/// services (the server's word for it when it gave one), the command that
/// tunnels to the others.
pub(crate) fn access(server: &str, namespace: &str, cluster: &str, service: &str, given: Option<&str>) -> String {
    if let Some(url) = given.filter(|u| !u.is_empty()) {
        return url.to_owned();
    }
    match service {
        "dashboard" | "notebook" | "code-server" => krayne_client::proxy_url(server, namespace, cluster, service),
        "ssh" => format!("krayne ssh {cluster} -n {namespace}"),
        _ => format!("krayne tunnel {cluster} {service} -n {namespace}"),
    }
}
