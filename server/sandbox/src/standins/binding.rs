//! Where a head's own daemons listen, read from its `postStart` script the
//! way the daemons read their flags: Jupyter's `--ip`/`--ServerApp.ip`
//! (`localhost` when not given) and `--port`, code-server's `--bind-addr
//! HOST:PORT`, sshd's `ListenAddress=` (its own port, or `Port=`/`-p`, or
//! 22). A daemon bound to the pod's loopback is not
//! reachable at the pod's IP on a real node — only from inside the pod's
//! network namespace, which is where `pods/portforward` dials — and the
//! sandbox serves it the same way.

use std::{collections::BTreeSet, net::IpAddr};

use serde_json::Value;

/// The ports the head's `postStart` script binds to the pod's loopback.
pub(super) fn loopback_ports(pod: &Value) -> BTreeSet<u16> {
    let script = pod["spec"]["containers"][0]["lifecycle"]["postStart"]["exec"]["command"]
        .as_array()
        .and_then(|c| c.last())
        .and_then(Value::as_str)
        .unwrap_or_default();
    script.lines().filter_map(loopback_port).collect()
}

/// The port one line of the script binds to a loopback address, if any.
fn loopback_port(line: &str) -> Option<u16> {
    let words: Vec<&str> = line
        .split_whitespace()
        .map(|w| w.trim_matches(|c| c == '"' || c == '\''))
        .collect();
    // `--flag=value` or `--flag value`.
    let value = |flag: &str| {
        words.iter().enumerate().find_map(|(at, w)| {
            w.strip_prefix(flag)
                .and_then(|rest| rest.strip_prefix('='))
                .or_else(|| (*w == flag).then(|| words.get(at + 1).copied()).flatten())
        })
    };
    let number = |text: &str| text.trim_matches(|c| c == '"' || c == '\'').parse::<u16>().ok();
    if words.iter().any(|w| w.ends_with("jupyter")) {
        // Jupyter listens on `localhost` unless told otherwise.
        let host = value("--ip")
            .or_else(|| value("--ServerApp.ip"))
            .or_else(|| value("--NotebookApp.ip"))
            .unwrap_or("localhost");
        let port = value("--port")
            .or_else(|| value("--ServerApp.port"))
            .map_or(Some(8888), number)?;
        return is_loopback(host).then_some(port);
    }
    if let Some(at) = words.iter().position(|w| *w == "--bind-addr") {
        let (host, port) = words.get(at + 1)?.rsplit_once(':')?;
        return is_loopback(host).then(|| number(port)).flatten();
    }
    let option = |name: &str| words.iter().find_map(|w| w.strip_prefix(name));
    let listen = option("ListenAddress=")?;
    // `ListenAddress=host:port` names its port; else `Port=`, `-p`, 22.
    let (host, port) = match listen
        .rsplit_once(':')
        .filter(|(h, _)| !h.contains(':') || h.ends_with(']'))
    {
        Some((host, port)) => (host, number(port)?),
        None => {
            let port = option("Port=")
                .or_else(|| {
                    words
                        .iter()
                        .position(|w| *w == "-p")
                        .and_then(|at| words.get(at + 1).copied())
                })
                .map_or(Some(22), number)?;
            (listen, port)
        }
    };
    is_loopback(host).then_some(port)
}

fn is_loopback(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost") || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use krayne_core::domain::ServicesSpec;
    use serde_json::json;

    use super::*;

    fn pod(script: &str) -> Value {
        json!({"spec": {"containers": [{"lifecycle": {"postStart": {"exec": {"command": ["/bin/sh", "-c", script]}}}}]}})
    }

    #[test]
    fn kraynes_bootstrap_binds_its_three_daemons_to_the_loopback() {
        use krayne_core::manifest::PodSecurity;
        let all = ServicesSpec {
            notebook: true,
            code_server: true,
            ssh: true,
        };
        let script = krayne_core::manifest::bootstrap_script(&all, PodSecurity::Krayne);
        assert_eq!(loopback_ports(&pod(&script)), BTreeSet::from([22, 8443, 8888]));
        // Restricted pods start no sshd.
        let script = krayne_core::manifest::bootstrap_script(&all, PodSecurity::Restricted);
        assert_eq!(loopback_ports(&pod(&script)), BTreeSet::from([8443, 8888]));
    }

    #[test]
    fn daemons_on_every_address_are_not_on_the_loopback() {
        let script = "jupyter notebook --ip=0.0.0.0 --port=8888\n\
                      code-server --auth none --bind-addr 0.0.0.0:8443 &\n\
                      /usr/sbin/sshd -D -o ListenAddress=0.0.0.0";
        assert!(loopback_ports(&pod(script)).is_empty());
        let moved = "jupyter lab --ip=localhost --port=9999\n\
                     \"$B\" --bind-addr [::1]:9443\n\
                     sshd -o ListenAddress=127.0.0.1 -p 2222";
        assert_eq!(loopback_ports(&pod(moved)), BTreeSet::from([2222, 9443, 9999]));
        let spelled = "jupyter server --ServerApp.ip 127.0.0.1 --ServerApp.port=7777\n\
                       jupyter lab --port 7000\n\
                       sshd -D -o ListenAddress=127.0.0.1:2200";
        assert_eq!(
            loopback_ports(&pod(spelled)),
            BTreeSet::from([2200, 7000, 7777]),
            "Jupyter's default address is localhost"
        );
        assert!(loopback_ports(&json!({"spec": {}})).is_empty(), "no script");
    }
}
