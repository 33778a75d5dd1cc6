//! What the sandbox needs to run a real head's daemons here (issue 38;
//! `.ci/run` makes it all): namespaces (root), `setpriv`, `ip`, `socat`,
//! a pinned Jupyter, and the head image's extra packages. Outside CI a
//! test without them is skipped, and says so; in CI it fails.

use std::path::PathBuf;

/// Whether this machine can give a head namespaces of its own (`unshare`
/// works here: root; `setpriv`, `ip`, `socat`, `useradd` present).
pub fn namespaces() -> bool {
    let tools = ["setpriv", "unshare", "ip", "socat", "useradd"]
        .iter()
        .all(|t| crate::which(t).is_some() || PathBuf::from("/usr/sbin").join(t).is_file());
    tools
        && std::process::Command::new("unshare")
            .args(["--mount", "--net", "--pid", "--uts", "--fork", "true"])
            .status()
            .is_ok_and(|s| s.success())
}

/// Where a pinned Jupyter is (`$KRAYNE_JUPYTER_BIN`, else the venv
/// `.ci/run` makes), when namespaces work too.
pub fn jupyter() -> Option<PathBuf> {
    let bin = std::env::var_os("KRAYNE_JUPYTER_BIN")
        .map(PathBuf::from)
        .or_else(|| cache().map(|c| c.join("krayne/jupyter-venv/bin")));
    found(bin.filter(|b| b.join("jupyter").is_file()), "the pinned Jupyter venv")
}

/// Debian's `openssh-server` and `sudo`, unpacked with `dpkg -x` into
/// one tree (`$KRAYNE_HEAD_IMAGE`, else where `.ci/run` unpacks them),
/// for the sandbox to copy over a head's files as its image's own, when
/// namespaces work too.
pub fn head_image() -> Option<PathBuf> {
    let tree = std::env::var_os("KRAYNE_HEAD_IMAGE")
        .map(PathBuf::from)
        .or_else(|| cache().map(|c| c.join("krayne/head-image")));
    let complete = |t: &PathBuf| t.join("usr/sbin/sshd").is_file() && t.join("usr/bin/sudo").is_file();
    found(tree.filter(complete), "openssh-server and sudo unpacked")
}

fn cache() -> Option<PathBuf> {
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
}

#[expect(clippy::print_stderr, reason = "a skipped test says so")]
fn found(what: Option<PathBuf>, named: &str) -> Option<PathBuf> {
    let found = what.filter(|_| namespaces());
    if found.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI needs working namespaces (root), setpriv, ip, socat, useradd and {named} (.ci/run makes them)"
        );
        eprintln!("SKIPPED: no {named}, or no namespaces here");
    }
    found
}

pub use krayne_server::sandbox::RealDaemons;
