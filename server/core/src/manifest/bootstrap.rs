//! The head's postStart script that starts the optional services.
//!
//! Same effect as Krayne's: Jupyter on 8888, code-server on 8443 and sshd on
//! 22. Written for krayne: every service binds the pod's loopback only (none
//! has authentication of its own, so it is reached through a port-forward,
//! which Kubernetes RBAC guards, and krayne's authorization in front of
//! it); Jupyter serves under `$KRAYNE_NOTEBOOK_BASE_URL` (default `/`), so
//! it works behind a path prefix such as krayne's proxy, answers whatever
//! `Host` krayne's users address it by (`allow_remote_access`: its own
//! check refuses non-local names, but the loopback binding is what keeps
//! others out), and leaves cross-site request checks to krayne's proxy
//! (`disable_check_xsrf`: with no token of its own Jupyter would refuse
//! every POST without its `_xsrf` cookie, a bearer-token client's
//! included; krayne admits a browser session's unsafe requests and
//! WebSockets only from the service's own origin); each runs in the
//! background, so the hook returns at once; a pid file makes a second run
//! a no-op while the service lives. Logs go to `$KRAYNE_RUN_DIR` (default
//! `/tmp/krayne`).
//!
//! Under the restricted Pod Security Standard ([`PodSecurity::Restricted`])
//! the script installs nothing and needs no network: it starts what the
//! image has, as the image's user, and says in the service's log what it
//! lacks; sshd, which needs root, is not started.

use super::PodSecurity;
use crate::domain::ServicesSpec;

const PRELUDE: &str = r#"D="${KRAYNE_RUN_DIR:-/tmp/krayne}"; mkdir -p "$D"
SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
running() { [ -f "$D/$1.pid" ] && kill -0 "$(cat "$D/$1.pid")" 2>/dev/null; }"#;

const PRELUDE_RESTRICTED: &str = r#"D="${KRAYNE_RUN_DIR:-/tmp/krayne}"; mkdir -p "$D"
running() { [ -f "$D/$1.pid" ] && kill -0 "$(cat "$D/$1.pid")" 2>/dev/null; }"#;

const NOTEBOOK: &str = r#"running notebook || (
  command -v jupyter >/dev/null 2>&1 || pip install -q notebook
  B="${KRAYNE_NOTEBOOK_BASE_URL:-/}"
  jupyter notebook --ip=127.0.0.1 --port=8888 --no-browser --allow-root --ServerApp.token='' --NotebookApp.token='' --ServerApp.base_url="$B" --NotebookApp.base_url="$B" --ServerApp.allow_remote_access=True --ServerApp.disable_check_xsrf=True &
  echo $! > "$D/notebook.pid"; wait
) >>"$D/notebook.log" 2>&1 &"#;

const CODE_SERVER: &str = r#"running code-server || (
  V=4.96.4; case "$(uname -m)" in aarch64|arm64) A=arm64;; *) A=amd64;; esac
  B="$D/code-server-$V-linux-$A/bin/code-server"
  command -v code-server >/dev/null 2>&1 && B=code-server
  if [ "$B" != code-server ] && [ ! -x "$B" ]; then
    U="https://github.com/coder/code-server/releases/download/v$V/code-server-$V-linux-$A.tar.gz"
    { curl -fsSL "$U" || wget -qO- "$U"; } | tar -xz -C "$D"
  fi
  "$B" --auth none --bind-addr 127.0.0.1:8443 &
  echo $! > "$D/code-server.pid"; wait
) >>"$D/code-server.log" 2>&1 &"#;

const NOTEBOOK_RESTRICTED: &str = r#"running notebook || (
  command -v jupyter >/dev/null 2>&1 || { echo "jupyter is not in the image, and restricted pod security installs nothing"; exit 0; }
  B="${KRAYNE_NOTEBOOK_BASE_URL:-/}"
  jupyter notebook --ip=127.0.0.1 --port=8888 --no-browser --ServerApp.token='' --NotebookApp.token='' --ServerApp.base_url="$B" --NotebookApp.base_url="$B" --ServerApp.allow_remote_access=True --ServerApp.disable_check_xsrf=True &
  echo $! > "$D/notebook.pid"; wait
) >>"$D/notebook.log" 2>&1 &"#;

const CODE_SERVER_RESTRICTED: &str = r#"running code-server || (
  command -v code-server >/dev/null 2>&1 || { echo "code-server is not in the image, and restricted pod security installs nothing"; exit 0; }
  code-server --auth none --bind-addr 127.0.0.1:8443 &
  echo $! > "$D/code-server.pid"; wait
) >>"$D/code-server.log" 2>&1 &"#;

const SSH_RESTRICTED: &str =
    r#"echo "sshd needs root, which restricted pod security forbids: SSH is off" >>"$D/sshd.log""#;

const SSH: &str = r#"running sshd || (
  S="$(command -v sshd || echo /usr/sbin/sshd)"
  [ -x "$S" ] || { $SUDO apt-get update -q && $SUDO apt-get install -y -q --no-install-recommends openssh-server; }
  $SUDO mkdir -p /run/sshd; $SUDO ssh-keygen -A; $SUDO passwd -d "$(id -un)"
  $SUDO "$S" -D -o ListenAddress=127.0.0.1 -o PermitRootLogin=no -o PasswordAuthentication=yes -o PermitEmptyPasswords=yes -o UsePAM=no &
  echo $! > "$D/sshd.pid"; wait
) >>"$D/sshd.log" 2>&1 &"#;

/// The script for the enabled services (notebook, code-server, ssh order).
pub fn bootstrap_script(services: &ServicesSpec, security: PodSecurity) -> String {
    let (prelude, notebook, code_server, ssh) = match security {
        PodSecurity::Krayne => (PRELUDE, NOTEBOOK, CODE_SERVER, SSH),
        PodSecurity::Restricted => (
            PRELUDE_RESTRICTED,
            NOTEBOOK_RESTRICTED,
            CODE_SERVER_RESTRICTED,
            SSH_RESTRICTED,
        ),
    };
    let mut parts = vec![prelude];
    for (on, part) in [
        (services.notebook, notebook),
        (services.code_server, code_server),
        (services.ssh, ssh),
    ] {
        if on {
            parts.push(part);
        }
    }
    parts.join("\n")
}

#[cfg(test)]
mod tests {
    use std::{fs, os::unix::fs::PermissionsExt, path::Path, process::Command};

    use super::*;

    const ALL: ServicesSpec = ServicesSpec {
        notebook: true,
        code_server: true,
        ssh: true,
    };

    #[test]
    fn is_valid_sh() {
        let out = Command::new("sh")
            .args(["-n", "-c", &bootstrap_script(&ALL, PodSecurity::Krayne)])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let out = Command::new("sh")
            .args(["-n", "-c", &bootstrap_script(&ALL, PodSecurity::Restricted)])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }

    #[test]
    fn names_only_enabled_services() {
        let s = bootstrap_script(
            &ServicesSpec {
                notebook: false,
                code_server: true,
                ssh: false,
            },
            PodSecurity::Krayne,
        );
        assert!(s.contains("code-server") && !s.contains("jupyter") && !s.contains("sshd"));
        assert!(!s.contains("0.0.0.0"), "services must bind loopback only");
    }

    fn stub(dir: &Path, name: &str) {
        let path = dir.join(name);
        // Each stub records that it ran, then lives like a daemon would.
        let body = "#!/bin/sh\necho \"$0 $*\" >> \"$KRAYNE_RUN_DIR/calls\"\nexec sleep 30\n";
        fs::write(&path, body).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
    }

    /// Runs the real script twice against stub daemons: it must return while
    /// they still run, and the second run must start nothing new.
    #[test]
    fn returns_at_once_and_is_idempotent() {
        let tmp = std::env::temp_dir().join(format!("krayne-bootstrap-{}", std::process::id()));
        let bin = tmp.join("bin");
        let run = tmp.join("run");
        fs::create_dir_all(&bin).unwrap();
        for name in ["jupyter", "code-server", "sshd", "ssh-keygen", "passwd", "sudo"] {
            stub(&bin, name);
        }
        // Stubs that must return: setup commands, not daemons.
        for name in ["ssh-keygen", "passwd", "sudo"] {
            fs::write(bin.join(name), "#!/bin/sh\nexit 0\n").unwrap();
        }
        let path = format!("{}:/usr/bin:/bin", bin.display());
        let script = bootstrap_script(&ALL, PodSecurity::Krayne);
        let run_once = || {
            let status = Command::new("sh")
                .args(["-c", &script])
                .env("PATH", &path)
                .env("KRAYNE_RUN_DIR", &run)
                .status()
                .unwrap();
            assert!(status.success());
        };
        let pid_files = ["notebook.pid", "code-server.pid", "sshd.pid"];
        let wait_for = |cond: &dyn Fn() -> bool| {
            for _ in 0..100 {
                if cond() {
                    return;
                }
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            panic!(
                "condition not reached; calls: {:?}",
                fs::read_to_string(run.join("calls"))
            );
        };
        run_once();
        wait_for(&|| pid_files.iter().all(|p| run.join(p).exists()));
        let calls = || fs::read_to_string(run.join("calls")).unwrap_or_default();
        wait_for(&|| calls().lines().count() == 3);
        run_once();
        std::thread::sleep(std::time::Duration::from_millis(300));
        let lines = calls();
        assert_eq!(lines.lines().count(), 3, "second run started more: {lines}");
        // The script's ports are the table's.
        let code_server = format!("--bind-addr 127.0.0.1:{}", crate::manifest::head_ports::CODE_SERVER);
        let notebook = format!("--ip=127.0.0.1 --port={}", crate::manifest::head_ports::NOTEBOOK);
        assert!(lines.contains(&code_server), "{lines}");
        assert!(lines.contains(&notebook), "{lines}");
        assert!(lines.contains("ListenAddress=127.0.0.1"), "{lines}");
        for p in pid_files {
            let pid = fs::read_to_string(run.join(p)).unwrap();
            let _ = Command::new("kill").arg(pid.trim()).status();
        }
        let _ = fs::remove_dir_all(&tmp);
    }

    /// Restricted: nothing installed, nothing downloaded, nothing as root;
    /// what the image has starts, what it lacks is logged.
    #[test]
    fn restricted_installs_nothing_and_starts_what_the_image_has() {
        let script = bootstrap_script(&ALL, PodSecurity::Restricted);
        for forbidden in [
            "sudo",
            "apt-get",
            "pip",
            "curl",
            "wget",
            "https://",
            "--allow-root",
            "passwd",
        ] {
            assert!(!script.contains(forbidden), "{forbidden} in {script}");
        }
        let tmp = std::env::temp_dir().join(format!("krayne-restricted-{}", std::process::id()));
        let (bin, run) = (tmp.join("bin"), tmp.join("run"));
        fs::create_dir_all(&bin).unwrap();
        stub(&bin, "jupyter");
        // `command -v` must not find the machine's own: a PATH of stubs
        // and the shell's basics only.
        let basics = tmp.join("basics");
        fs::create_dir_all(&basics).unwrap();
        for tool in ["mkdir", "cat", "sleep"] {
            let found = ["/usr/bin", "/bin"]
                .iter()
                .map(|d| Path::new(d).join(tool))
                .find(|p| p.exists());
            std::os::unix::fs::symlink(found.unwrap(), basics.join(tool)).unwrap();
        }
        let path = format!("{}:{}", bin.display(), basics.display());
        let status = Command::new("/bin/sh")
            .args(["-c", &script])
            .env("PATH", &path)
            .env("KRAYNE_RUN_DIR", &run)
            .status()
            .unwrap();
        assert!(status.success());
        for _ in 0..100 {
            if run.join("notebook.pid").exists() && run.join("code-server.log").exists() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
        let log = |name: &str| fs::read_to_string(run.join(name)).unwrap_or_default();
        assert!(log("calls").contains("--ip=127.0.0.1 --port=8888"), "{}", log("calls"));
        assert!(
            log("code-server.log").contains("code-server is not in the image"),
            "{}",
            log("code-server.log")
        );
        assert!(log("sshd.log").contains("SSH is off"), "{}", log("sshd.log"));
        assert!(!run.join("code-server.pid").exists() && !run.join("sshd.pid").exists());
        let pid = log("notebook.pid");
        let _ = Command::new("kill").arg(pid.trim()).status();
        let _ = fs::remove_dir_all(&tmp);
    }
}
