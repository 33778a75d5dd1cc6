//! Tunnels kept in a background process (`krayne tunnel --detach`): one
//! state file per cluster under `$XDG_STATE_HOME/krayne/tunnels/` (mode
//! 0600) naming the process and its ports, read by `--list` and `--close`.

use std::{
    io::Write as _,
    os::unix::fs::OpenOptionsExt as _,
    path::{Path, PathBuf},
    time::Duration,
};

use nix::{
    sys::signal::{Signal, kill},
    unistd::Pid,
};
use serde::{Deserialize, Serialize};

use crate::failure::Failure;

/// What a background tunnel process writes once its ports are bound.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct State {
    /// The process.
    pub(crate) pid: u32,
    /// The cluster's namespace.
    pub(crate) namespace: String,
    /// The cluster.
    pub(crate) cluster: String,
    /// Its ports.
    pub(crate) services: Vec<OpenTunnel>,
}

/// One open tunnel, with Krayne's field names (`krayne tun-open -o json`
/// prints a list of these, as Krayne's does).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) struct OpenTunnel {
    /// The service.
    pub(crate) service: String,
    /// Its port in the head pod.
    pub(crate) remote_port: u32,
    /// The local port.
    pub(crate) local_port: u16,
    /// Its URL (Krayne's form: `http://…`, `ray://…`, `ssh://…`).
    pub(crate) local_url: String,
    /// The command that uses it, for SSH (`ssh -p PORT ray@127.0.0.1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) command: Option<String>,
}

/// `$XDG_STATE_HOME/krayne/tunnels` (by default `~/.local/state/…`).
pub(crate) fn dir() -> Result<PathBuf, Failure> {
    use etcetera::BaseStrategy as _;
    let base = etcetera::choose_base_strategy()
        .map_err(|e| Failure::Other(format!("cannot find the state directory: {e}")))?;
    let state = base.state_dir().unwrap_or_else(|| base.data_dir());
    Ok(state.join("krayne").join("tunnels"))
}

/// The state file of `cluster` in `namespace`.
pub(crate) fn file(namespace: &str, cluster: &str) -> Result<PathBuf, Failure> {
    Ok(dir()?.join(format!("{namespace}--{cluster}.json")))
}

/// Writes `state` to `path`, readable by its owner only, atomically.
pub(crate) fn write(path: &Path, state: &State) -> Result<(), Failure> {
    let fail = |e: std::io::Error| Failure::Other(format!("cannot write {}: {e}", path.display()));
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(fail)?;
    }
    let text = serde_json::to_string_pretty(state).map_err(|e| Failure::Other(e.to_string()))?;
    let temporary = path.with_extension("tmp");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&temporary)
        .map_err(fail)?;
    f.write_all(text.as_bytes()).map_err(fail)?;
    std::fs::rename(&temporary, path).map_err(fail)
}

/// The state in `path`, if it names a live process.
pub(crate) fn read_live(path: &Path) -> Option<State> {
    let state: State = serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()?;
    let pid = i32::try_from(state.pid).ok()?;
    // Signal 0: only whether the process exists (and is ours).
    kill(Pid::from_raw(pid), None).is_ok().then_some(state)
}

/// Every live background tunnel; state files of dead ones are removed.
pub(crate) fn list() -> Result<Vec<State>, Failure> {
    let Ok(entries) = std::fs::read_dir(dir()?) else {
        return Ok(Vec::new());
    };
    let mut live = Vec::new();
    for path in entries.flatten().map(|e| e.path()) {
        if path.extension().is_some_and(|e| e == "json") {
            match read_live(&path) {
                Some(state) => live.push(state),
                None => {
                    let _ = std::fs::remove_file(&path);
                }
            }
        }
    }
    live.sort_by(|a, b| (&a.namespace, &a.cluster).cmp(&(&b.namespace, &b.cluster)));
    Ok(live)
}

/// Stops the background tunnel of `cluster`; `false` when none was open.
pub(crate) async fn close(namespace: &str, cluster: &str) -> Result<bool, Failure> {
    let path = file(namespace, cluster)?;
    let Some(state) = read_live(&path) else {
        let _ = std::fs::remove_file(&path);
        return Ok(false);
    };
    let pid = Pid::from_raw(i32::try_from(state.pid).unwrap_or_default());
    let _ = kill(pid, Signal::SIGTERM);
    for _ in 0..50 {
        if kill(pid, None).is_err() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let _ = std::fs::remove_file(&path);
    Ok(true)
}
