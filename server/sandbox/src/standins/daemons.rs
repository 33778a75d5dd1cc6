//! Real daemons in place of stand-ins ([`RealDaemons`]): a head's own
//! `postStart` script, run as the head would run it, in a network
//! namespace of its own — so its loopback is the pod's, not the machine's —
//! a PID namespace that ends every daemon with the pod, and a mount
//! namespace in which the machine's whole filesystem is read-only but for
//! the pod's run directory (so a script cannot change this machine's
//! accounts or its sshd: Krayne's SSH setup runs `passwd -d`, which fails
//! there). Its environment is the pod's, not the test machine's, with
//! `HOME`, Jupyter's and IPython's directories and `TMPDIR` in the run
//! directory. A port the script binds to that loopback is reached the way
//! the kubelet reaches it for `pods/portforward`, from inside the
//! namespace: a `socat` relay started there listens on a Unix socket in
//! the run directory (sockets are files, not addresses of a network
//! namespace).
//!
//! Needs root (`unshare`), util-linux's `setpriv` (the namespace dies with
//! the process that started it), iproute2's `ip` and `socat`. When the
//! namespace cannot be made, or ends early, the sandbox logs why (from
//! `namespace.log` in the run directory).

use std::{collections::BTreeSet, path::PathBuf, process::Stdio};

use serde_json::Value;
use tokio::{process::Command, sync::oneshot};

/// Runs heads' `postStart` scripts for real (see the module's docs).
#[derive(Debug, Clone, Default)]
pub struct RealDaemons {
    /// Directories put first on the script's `PATH` (where `jupyter` is).
    pub path: Vec<PathBuf>,
}

/// One head's daemons: they live as long as this.
pub(super) struct Daemons {
    /// Dropped with this: the namespace's watcher then kills it.
    _stop: oneshot::Sender<()>,
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
        let run_dir = tempfile::Builder::new()
            .prefix("krayne-sandbox-head-")
            .tempdir()
            .map_err(|e| tracing::warn!(error = %e, "no run directory for a head's daemons"))
            .ok()?;
        let run = run_dir.path();
        let log = std::fs::File::create(run.join("namespace.log")).ok()?;
        let ports: Vec<String> = loopback.iter().map(ToString::to_string).collect();
        let path = std::env::join_paths(
            real.path
                .iter()
                .cloned()
                .chain(["/usr/local/bin", "/usr/bin", "/bin", "/usr/sbin", "/sbin"].map(PathBuf::from)),
        )
        .ok()?;
        let mut command = Command::new("setpriv");
        command
            .args([
                "--pdeathsig",
                "KILL",
                "--",
                "unshare",
                "--mount",
                "--net",
                "--pid",
                "--fork",
            ])
            .args(["--kill-child", "--", "sh", "-c", WRAPPER])
            .env_clear()
            .current_dir(run);
        for var in pod["spec"]["containers"][0]["env"].as_array().into_iter().flatten() {
            if let (Some(name), Some(value)) = (var["name"].as_str(), var["value"].as_str()) {
                command.env(name, value);
            }
        }
        // Set last: the pod's own variables cannot move them.
        command
            .env("HOME", run)
            .env("TMPDIR", run)
            .env("JUPYTER_CONFIG_DIR", run.join(".jupyter"))
            .env("JUPYTER_RUNTIME_DIR", run.join(".jupyter/runtime"))
            .env("IPYTHONDIR", run.join(".ipython"))
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .env("PATH", path)
            .env("KRAYNE_RUN_DIR", run)
            .env("KRAYNE_PORTS", ports.join(" "))
            .env("KRAYNE_POST_START", script)
            .stdin(Stdio::null())
            .stdout(log.try_clone().ok()?)
            .stderr(log)
            .kill_on_drop(true);
        let mut child = match command.spawn() {
            Ok(child) => child,
            Err(e) => {
                tracing::warn!(error = %e, "cannot start a head's daemons (setpriv and unshare needed)");
                return None;
            }
        };
        let (stop, stopped) = oneshot::channel::<()>();
        let said = run.join("namespace.log");
        tokio::spawn(async move {
            tokio::select! {
                ended = child.wait() => {
                    let why = std::fs::read_to_string(&said).unwrap_or_default();
                    tracing::warn!(status = ?ended, log = %why.trim(), "a head's daemons ended before the pod (unshare needs root)");
                }
                _ = stopped => {
                    let _ = child.kill().await;
                }
            }
        });
        Some(Self { _stop: stop, run_dir })
    }

    /// Where the relay into the pod's `port` listens.
    pub(super) fn socket(&self, port: u16) -> PathBuf {
        self.run_dir.path().join(format!("{port}.sock"))
    }
}

/// The pod's first process: the machine's files read-only but for the run
/// directory, its loopback up, a relay per port, then the script, as a
/// container's `postStart` hook runs it; it stays (the namespace with it)
/// while the daemons the script started run.
const WRAPPER: &str = r#"mount --bind "$KRAYNE_RUN_DIR" "$KRAYNE_RUN_DIR" && mount -o remount,bind,ro / || exit 1
mkdir -p "$JUPYTER_RUNTIME_DIR" "$IPYTHONDIR"
ip link set lo up || exit 1
for p in $KRAYNE_PORTS; do
  socat "UNIX-LISTEN:$KRAYNE_RUN_DIR/$p.sock,fork,unlink-early" "TCP:127.0.0.1:$p" &
done
sh -c "$KRAYNE_POST_START" >"$KRAYNE_RUN_DIR/post-start.log" 2>&1
wait"#;
