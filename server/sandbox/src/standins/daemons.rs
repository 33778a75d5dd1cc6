//! Real daemons in place of stand-ins ([`RealDaemons`]): a head's own
//! `postStart` script, run as the head would run it, in a network
//! namespace of its own — so its loopback is the pod's, not the machine's —
//! and a PID namespace that ends every daemon with the pod. A port the
//! script binds to that loopback is reached the way the kubelet reaches
//! it for `pods/portforward`, from inside the namespace: a `socat` relay
//! started there listens on a Unix socket in the pod's run directory
//! (sockets are files, not addresses of a network namespace).
//!
//! Needs root (`unshare --net --pid`), iproute2's `ip` and `socat`. A
//! script that would change this machine's accounts (Krayne's SSH setup
//! runs `passwd -d`) is never run.

use std::{collections::BTreeSet, path::PathBuf, process::Stdio};

use serde_json::Value;
use tokio::process::{Child, Command};

/// Runs heads' `postStart` scripts for real (see the module's docs).
#[derive(Debug, Clone, Default)]
pub struct RealDaemons {
    /// Directories put first on the script's `PATH` (where `jupyter` is).
    pub path: Vec<PathBuf>,
}

/// One head's daemons: they live as long as this.
pub(super) struct Daemons {
    _namespace: Child,
    run_dir: tempfile::TempDir,
}

impl Daemons {
    /// Starts `pod`'s `postStart` script in namespaces of its own, with a
    /// relay into each of `loopback` ports; `None` (logged) when it cannot
    /// or must not run.
    pub(super) fn start(real: &RealDaemons, pod: &Value, loopback: &BTreeSet<u16>) -> Option<Self> {
        let script = pod["spec"]["containers"][0]["lifecycle"]["postStart"]["exec"]["command"]
            .as_array()
            .and_then(|c| c.last())
            .and_then(Value::as_str)?;
        if script.contains("passwd") {
            tracing::warn!("a head's postStart script changes accounts; the sandbox does not run it on this machine");
            return None;
        }
        let run_dir = tempfile::Builder::new()
            .prefix("krayne-sandbox-head-")
            .tempdir()
            .map_err(|e| tracing::warn!(error = %e, "no run directory for a head's daemons"))
            .ok()?;
        let ports: Vec<String> = loopback.iter().map(ToString::to_string).collect();
        let path = std::env::join_paths(
            real.path
                .iter()
                .cloned()
                .chain(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())),
        )
        .ok()?;
        let mut command = Command::new("unshare");
        command
            .args(["--net", "--pid", "--fork", "--kill-child", "--", "sh", "-c", WRAPPER])
            .env("PATH", path)
            .env("KRAYNE_RUN_DIR", run_dir.path())
            .env("KRAYNE_SOCKETS", run_dir.path())
            .env("KRAYNE_PORTS", ports.join(" "))
            .env("KRAYNE_POST_START", script)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true);
        for var in pod["spec"]["containers"][0]["env"].as_array().into_iter().flatten() {
            if let (Some(name), Some(value)) = (var["name"].as_str(), var["value"].as_str()) {
                command.env(name, value);
            }
        }
        match command.spawn() {
            Ok(child) => Some(Self {
                _namespace: child,
                run_dir,
            }),
            Err(e) => {
                tracing::warn!(error = %e, "cannot start a head's daemons (unshare needs root)");
                None
            }
        }
    }

    /// Where the relay into the pod's `port` listens.
    pub(super) fn socket(&self, port: u16) -> PathBuf {
        self.run_dir.path().join(format!("{port}.sock"))
    }
}

/// The pod's first process: its loopback up, a relay per port, then the
/// script, as a container's `postStart` hook runs it; it stays (the
/// namespace with it) while the daemons the script started run.
const WRAPPER: &str = r#"ip link set lo up
for p in $KRAYNE_PORTS; do
  socat "UNIX-LISTEN:$KRAYNE_SOCKETS/$p.sock,fork,unlink-early" "TCP:127.0.0.1:$p" &
done
sh -c "$KRAYNE_POST_START" >"$KRAYNE_RUN_DIR/post-start.log" 2>&1
wait"#;
