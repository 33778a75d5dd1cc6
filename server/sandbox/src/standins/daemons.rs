//! Real daemons in place of stand-ins ([`RealDaemons`]): a head's own
//! `postStart` script, run as the head would run it, in namespaces of its
//! own:
//! - network: its loopback is the pod's, not the machine's;
//! - PID: every daemon ends with the pod;
//! - UTS: its host name is the pod's name, as a container's is;
//! - mount: every mount of the machine is read-only (but its devices and
//!   the pod's own `/proc`), and the pod's `/etc`,
//!   `/usr`, `/var`, `/home`, `/root` and `/opt` are overlays whose
//!   changes stay in the pod's own directory, with a fresh `/tmp` and
//!   `/run` — so the script's `sudo passwd -d`, `ssh-keygen -A` and sshd
//!   change the pod's accounts, host keys and `/run`, never this
//!   machine's.
//!
//! The pod's image is the machine's files, with [`RealDaemons::image`]'s
//! trees (Debian packages unpacked with `dpkg -x`, say) copied over them
//! and configured as their maintainer scripts would (sshd's configuration
//! and privilege-separation user), and the Ray images' user: `ray` (uid
//! 1000, group `users`) with passwordless `sudo`, who runs the script, as
//! in `rayproject/ray`. Its environment is the pod's, not the test
//! machine's, with `HOME=/home/ray` and `KRAYNE_RUN_DIR` (the script's
//! logs and pid files) in the pod's directory, where the test can read
//! them. A port the script binds to the pod's loopback is reached the way
//! the kubelet reaches it for `pods/portforward`, from inside the
//! namespace: a `socat` relay started there listens on a Unix socket in
//! the pod's directory (sockets are files, not addresses of a network
//! namespace).
//!
//! Needs root (`unshare`; the daemons run as root or `ray` inside these
//! namespaces, not in a user namespace of their own), util-linux's
//! `setpriv` (the namespace dies with the process that started it),
//! overlayfs, iproute2's `ip`, `useradd` and `socat`. When the namespace
//! cannot be made, or ends early, the sandbox logs why (from
//! `namespace.log` in the pod's directory).

use std::{collections::BTreeSet, path::PathBuf, process::Stdio};

use serde_json::Value;
use tokio::{process::Command, sync::oneshot};

/// Runs heads' `postStart` scripts for real (see the module's docs).
#[derive(Debug, Clone, Default)]
pub struct RealDaemons {
    /// Directories put first on the script's `PATH` (where `jupyter` is).
    /// Under `/etc`, `/usr`, `/var`, `/home`, `/root` or `/opt` the pod's
    /// user may enter them and their parents (made enterable in the pod's
    /// overlays only); never under `/tmp` or `/run`, which are the pod's
    /// own.
    pub path: Vec<PathBuf>,
    /// Trees copied over the pod's `/etc`, `/usr`, `/var` and `/opt`, in
    /// order: what the head's image has beyond this machine's files
    /// (`openssh-server` and `sudo`, unpacked with `dpkg -x`).
    pub image: Vec<PathBuf>,
}

/// One head's daemons: they live as long as this.
pub(super) struct Daemons {
    /// Dropped with this: the namespace's watcher then kills it, and
    /// removes the pod's directory once its processes are gone.
    _stop: oneshot::Sender<()>,
    /// The pod's directory: `fs/` (its overlays' changes), `run/` (the
    /// script's `KRAYNE_RUN_DIR`) and `sockets/` (the relays).
    dir: PathBuf,
}

/// Where the pod mounts its own: the pod's directory must be elsewhere, or
/// the pod would hide it (or lay an overlay over itself).
const THE_PODS_OWN: [&str; 7] = ["/run", "/etc", "/usr", "/var", "/home", "/root", "/opt"];

impl Daemons {
    /// Starts `pod`'s `postStart` script in namespaces of its own, with a
    /// relay into each of `loopback` ports; `None` (logged) when it cannot
    /// or must not run.
    pub(super) fn start(real: &RealDaemons, pod: &Value, loopback: &BTreeSet<u16>) -> Option<Self> {
        use std::os::unix::fs::PermissionsExt as _;

        let script = pod["spec"]["containers"][0]["lifecycle"]["postStart"]["exec"]["command"]
            .as_array()
            .and_then(|c| c.last())
            .and_then(Value::as_str)?;
        let pod_dir = tempfile::Builder::new()
            .prefix("krayne-sandbox-head-")
            .tempdir()
            .map_err(|e| tracing::warn!(error = %e, "no directory for a head's daemons"))
            .ok()?;
        let dir = pod_dir.path();
        if THE_PODS_OWN.iter().any(|own| dir.starts_with(own)) {
            tracing::warn!(dir = %dir.display(), "a head's daemons need a temporary directory outside /run, /etc, /usr, /var, /home, /root and /opt (TMPDIR)");
            return None;
        }
        // The pod's user enters it to reach its run directory.
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o711)).ok()?;
        let log = std::fs::File::create(dir.join("namespace.log")).ok()?;
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
                "--uts",
                "--fork",
                "--mount-proc",
            ])
            .args(["--kill-child", "--", "sh", "-c", WRAPPER, "sh"])
            .args(&real.image)
            .env_clear()
            .current_dir(dir);
        for var in pod["spec"]["containers"][0]["env"].as_array().into_iter().flatten() {
            if let (Some(name), Some(value)) = (var["name"].as_str(), var["value"].as_str()) {
                command.env(name, value);
            }
        }
        // Set last: the pod's own variables cannot move them.
        command
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .env("PATH", path)
            .env("KRAYNE_POD_DIR", dir)
            .env("KRAYNE_POD_NAME", pod["metadata"]["name"].as_str().unwrap_or("head"))
            .env("KRAYNE_POD_IP", pod["status"]["podIP"].as_str().unwrap_or("127.0.0.1"))
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
        let said = dir.join("namespace.log");
        let dir = dir.to_owned();
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
            // The pod's processes are gone (the PID namespace ends with its
            // first process): nothing writes into its directory any more.
            if let Err(e) = pod_dir.close() {
                tracing::warn!(error = %e, "a head's directory was not removed");
            }
        });
        Some(Self { _stop: stop, dir })
    }

    /// Where the relay into the pod's `port` listens.
    pub(super) fn socket(&self, port: u16) -> PathBuf {
        self.dir.join("sockets").join(format!("{port}.sock"))
    }
}

/// The pod's first process, as root in its namespaces: the pod's
/// filesystem (see the module's docs: every mount of the machine read-only
/// but its devices and the pod's own `/proc`, then the pod's own `/run`
/// with `$KRAYNE_POD_DIR` bound under it before `/tmp`, where it lives, is
/// replaced, and the overlays — their `chmod`s only inside them), the
/// image's layers (its arguments) and user, its host name and
/// `/etc/hosts` (as the kubelet writes them), its loopback up, a relay per
/// port, then the script as `ray`, as a container's `postStart` hook runs
/// it — with a container runtime's capabilities at most (Docker's default
/// set less `mknod`), so that not even `sudo` inside can mount, unmount or
/// remount (and so undo the machine's read-only view), make device nodes
/// or load modules; it stays (the namespace with it) while the daemons the script
/// started run.
const WRAPPER: &str = r#"set -e
mount --make-rprivate /
mount -o remount,bind,ro /
for m in $(awk '{print $5}' /proc/self/mountinfo | sort -ru); do
  case "$m" in /|/dev|/dev/pts|/proc|/proc/*) continue ;; esac
  mount -o remount,bind,ro "$m" 2>/dev/null || echo "krayne sandbox: $m stays writable" >&2
done
mount -t tmpfs -o mode=1777 pod-shm /dev/shm
mount -t tmpfs -o mode=0755 pod-run /run
mkdir /run/krayne-pod
mount --bind "$KRAYNE_POD_DIR" /run/krayne-pod
mount -o remount,bind,rw /run/krayne-pod
P=/run/krayne-pod
for d in etc usr var home root opt; do
  [ -d "/$d" ] || continue
  mkdir -p "$P/fs/$d" "$P/fs/.work/$d"
  mount -t overlay "pod-$d" -o "lowerdir=/$d,upperdir=$P/fs/$d,workdir=$P/fs/.work/$d" "/$d"
done
for layer in "$@"; do
  for d in etc usr var opt; do
    if [ -d "$layer/$d" ]; then cp -a "$layer/$d/." "/$d/"; fi
  done
done
mount -t tmpfs -o mode=1777 pod-tmp /tmp
hostname "$KRAYNE_POD_NAME"
printf '127.0.0.1\tlocalhost\n%s\t%s\n' "$KRAYNE_POD_IP" "$KRAYNE_POD_NAME" >/etc/hosts
taken="$(getent passwd 1000 | cut -d: -f1)"
if [ -n "$taken" ]; then userdel "$taken" 2>/dev/null || true; fi
if getent passwd ray >/dev/null; then userdel ray 2>/dev/null || true; fi
useradd --non-unique --uid 1000 --gid users --create-home --home-dir /home/ray --shell /bin/bash ray
if [ -d /etc/sudoers.d ]; then echo 'ray ALL=(ALL) NOPASSWD:ALL' >/etc/sudoers.d/ray; chmod 0440 /etc/sudoers.d/ray; fi
if [ -x /usr/sbin/sshd ]; then
  getent passwd sshd >/dev/null || useradd --system --home-dir /run/sshd --shell /usr/sbin/nologin sshd
  [ -f /etc/ssh/sshd_config ] || cp /usr/share/openssh/sshd_config /etc/ssh/sshd_config
fi
IFS=:
for d in $PATH; do
  case "$d" in /etc/*|/usr/*|/var/*|/home/*|/root/*|/opt/*) ;; *) continue ;; esac
  while [ "$d" != / ]; do chmod o+x "$d" 2>/dev/null || true; d="$(dirname "$d")"; done
done
unset IFS
mkdir -p "$P/run" "$P/sockets"
chown ray:users "$P/run"
ip link set lo up
for p in $KRAYNE_PORTS; do
  socat "UNIX-LISTEN:$P/sockets/$p.sock,fork,unlink-early" "TCP:127.0.0.1:$p" &
done
cd /home/ray
set +e
setpriv --reuid ray --regid users --init-groups \
  --bounding-set -all,+chown,+dac_override,+fowner,+fsetid,+kill,+setgid,+setuid,+setpcap,+net_bind_service,+net_raw,+sys_chroot,+audit_write,+setfcap \
  env -u KRAYNE_POST_START -u KRAYNE_PORTS -u KRAYNE_POD_DIR \
  HOME=/home/ray USER=ray LOGNAME=ray KRAYNE_RUN_DIR="$P/run" sh -c "$KRAYNE_POST_START" >"$P/run/post-start.log" 2>&1
wait"#;
