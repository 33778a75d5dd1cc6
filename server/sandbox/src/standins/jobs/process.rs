//! Running a job: set up its working dir, run its entrypoint as
//! `sh -c` in a process group of its own with its env vars (and none of
//! the sandbox's), its output in its log, and end it as Ray's job
//! supervisor does. A sandbox run as root runs a job as `nobody`, as its
//! SSH sessions: a tenant's entrypoint is the tenant's code, never the
//! machine's root.

use std::{process::Stdio, sync::Arc, time::Duration};

use nix::{
    sys::signal::{Signal, killpg},
    unistd::Pid,
};
use serde_json::Value;
use tokio::{io::AsyncWriteExt as _, process::Command};

use super::{
    super::ssh::NOBODY,
    Jobs,
    record::{Driver, Outcome},
};

/// Before a job runs (Ray schedules its supervisor actor first).
const PENDING_FOR: Duration = Duration::from_millis(100);
/// Between SIGTERM and SIGKILL on stop (Ray's `RAY_JOB_STOP_WAIT_TIME_S`).
const STOP_WAIT: Duration = Duration::from_secs(3);
/// Lines of the log a failed job's message ends with.
const LAST_LINES: usize = 10;
/// Characters those lines are cut to.
const LAST_CHARS: usize = 20_000;

/// Kills the job's process group when dropped: its processes never
/// outlive the job, the stop, the pod or the sandbox (one that leaves the
/// group, with `setsid`, escapes, as it would escape Ray's).
struct Group(Option<Pid>);

impl Drop for Group {
    fn drop(&mut self) {
        if let Some(pid) = self.0 {
            let _ = killpg(pid, Signal::SIGKILL);
        }
    }
}

/// Runs job number `seq` of `jobs` to its end.
pub(super) async fn supervise(jobs: Arc<Jobs>, seq: u64) {
    let Some((id, stop, entrypoint, runtime_env, dir, log)) = jobs.with_seq(seq, |j| {
        (
            j.submission_id.clone(),
            j.stop.clone(),
            j.entrypoint.clone(),
            j.runtime_env.clone(),
            j.dir.clone(),
            j.log.clone(),
        )
    }) else {
        return;
    };
    let end = |outcome| jobs.with_seq(seq, |j| j.end(outcome, super::now_ms()));
    let mut stopped = jobs.stopped.clone();
    // A stop or the pod's end before the entrypoint runs means it never
    // runs, as in Ray.
    let setup = async {
        tokio::time::sleep(PENDING_FOR).await;
        jobs.working_dir(&runtime_env, &dir)
            .await
            .map_err(Outcome::RuntimeEnvFailed)?;
        open_log(&log, &id, &entrypoint, &runtime_env)
            .await
            .map_err(|e| Outcome::StartFailed(format!("cannot write its log: {e}")))
    };
    let file = tokio::select! {
        ready = setup => match ready {
            Ok(file) => file,
            Err(outcome) => {
                end(outcome);
                return;
            }
        },
        () = stop.notified() => {
            end(Outcome::Stopped);
            return;
        }
        _ = stopped.changed() => return,
    };
    let unprivileged = nix::unistd::geteuid().is_root();
    let path = if unprivileged {
        match hand_to_nobody(&dir) {
            Ok(path) => path,
            Err(e) => {
                end(Outcome::StartFailed(format!(
                    "cannot hand its working dir to nobody: {e}"
                )));
                return;
            }
        }
    } else {
        std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into())
    };
    let mut child = match command(&entrypoint, &runtime_env, &dir, file, unprivileged, &path).spawn() {
        Ok(c) => c,
        Err(e) => {
            end(Outcome::StartFailed(e.to_string()));
            return;
        }
    };
    let mut group = Group(child.id().and_then(|p| i32::try_from(p).ok()).map(Pid::from_raw));
    jobs.with_seq(seq, |j| {
        j.running(Driver {
            agent_http_address: format!("http://{}:52365", jobs.node_ip),
            node_id: jobs.node_id.clone(),
        });
    });
    let outcome = tokio::select! {
        status = child.wait() => {
            // At once: the group's id is free for reuse once it is empty.
            drop(std::mem::replace(&mut group, Group(None)));
            exited(status, &log).await
        }
        () = stop.notified() => {
            if let Some(pid) = group.0 {
                let _ = killpg(pid, Signal::SIGTERM);
            }
            if tokio::time::timeout(STOP_WAIT, child.wait()).await.is_err() {
                drop(group);
                let _ = child.wait().await;
            }
            Outcome::Stopped
        }
        _ = stopped.changed() => return,
    };
    end(outcome);
}

/// The log with Ray's first lines, which the entrypoint's output follows.
async fn open_log(
    path: &std::path::Path,
    id: &str,
    entrypoint: &str,
    runtime_env: &Value,
) -> std::io::Result<std::fs::File> {
    let mut file = tokio::fs::File::create(path).await?;
    let ts = jiff::Timestamp::now().strftime("%Y-%m-%d %H:%M:%S,%3f");
    let mut head = format!("{ts}\tINFO job_manager.py:581 -- Runtime env is setting up.\n");
    for key in runtime_env.as_object().into_iter().flat_map(|o| o.keys()) {
        if !["working_dir", "env_vars"].contains(&key.as_str()) {
            head.push_str(&format!(
                "{ts}\tWARNING krayne sandbox -- runtime_env {key:?} is not set up by the sandbox's stand-in; ignored.\n"
            ));
        }
    }
    head.push_str(&format!("Running entrypoint for job {id}: {entrypoint}\n"));
    file.write_all(head.as_bytes()).await?;
    file.flush().await?;
    Ok(file.into_std().await)
}

/// `dir` and everything in it made nobody's, and the folders above it
/// passable (not listable) by nobody; the `PATH` a job of nobody's runs
/// with: the sandbox's folders nobody can reach, after one of the head's
/// own holding `python` (the machine's `python3`), as a Ray image has.
fn hand_to_nobody(dir: &std::path::Path) -> std::io::Result<std::ffi::OsString> {
    use std::os::unix::fs::PermissionsExt as _;
    fn walk(path: &std::path::Path) -> std::io::Result<()> {
        let meta = std::fs::symlink_metadata(path)?;
        std::os::unix::fs::lchown(path, Some(NOBODY), Some(NOBODY))?;
        if meta.is_dir() {
            for entry in std::fs::read_dir(path)? {
                walk(&entry?.path())?;
            }
        }
        Ok(())
    }
    let parent = dir
        .parent()
        .ok_or_else(|| std::io::Error::other("a job's folder has a parent"))?;
    let mode = std::fs::metadata(parent)?.permissions().mode();
    std::fs::set_permissions(parent, std::fs::Permissions::from_mode(mode | 0o711))?;
    walk(dir)?;
    let reachable: Vec<std::path::PathBuf> = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .filter(|d| others_reach(d))
        .collect();
    let bin = parent.join("bin");
    if !bin.exists() {
        std::fs::create_dir(&bin)?;
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755))?;
        let has = |name: &str| reachable.iter().any(|d| d.join(name).is_file());
        let python3 = reachable.iter().map(|d| d.join("python3")).find(|p| p.is_file());
        if !has("python")
            && let Some(python3) = python3
        {
            std::os::unix::fs::symlink(python3, bin.join("python"))?;
        }
    }
    std::env::join_paths(std::iter::once(bin).chain(reachable)).map_err(std::io::Error::other)
}

/// Whether users other than the owner can search `dir` and every folder
/// above it.
fn others_reach(dir: &std::path::Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    dir.is_absolute()
        && dir
            .ancestors()
            .all(|d| std::fs::metadata(d).is_ok_and(|m| m.permissions().mode() & 0o001 != 0))
}

/// The entrypoint as `sh -c`; as `nobody` (no groups, no capabilities:
/// the kernel drops them with root's uid) when `unprivileged`.
fn command(
    entrypoint: &str,
    runtime_env: &Value,
    dir: &std::path::Path,
    log: std::fs::File,
    unprivileged: bool,
    path: &std::ffi::OsStr,
) -> Command {
    let mut command = Command::new("sh");
    command
        .arg("-c")
        .arg(entrypoint)
        .current_dir(dir)
        .env_clear()
        .env("PATH", path)
        .env("HOME", dir)
        .stdin(Stdio::null())
        .process_group(0)
        .kill_on_drop(true);
    if unprivileged {
        command.uid(NOBODY).gid(NOBODY);
    }
    if let Ok(err) = log.try_clone() {
        command.stderr(err);
    }
    command.stdout(log);
    for (k, v) in runtime_env["env_vars"].as_object().into_iter().flatten() {
        if let Some(v) = v.as_str() {
            command.env(k, v);
        }
    }
    command
}

async fn exited(status: std::io::Result<std::process::ExitStatus>, log: &std::path::Path) -> Outcome {
    use std::os::unix::process::ExitStatusExt as _;
    let code = match status {
        Ok(s) => s.code().or_else(|| s.signal().map(|n| -n)).unwrap_or(-1),
        Err(_) => -1,
    };
    Outcome::Exited {
        code,
        last_lines: last_lines(&String::from_utf8_lossy(&log_end(log).await)),
    }
}

/// The log's last 128 KiB (more than the message's 20,000 characters).
async fn log_end(log: &std::path::Path) -> Vec<u8> {
    use tokio::io::{AsyncReadExt as _, AsyncSeekExt as _};
    const END: u64 = 128 * 1024;
    let mut out = Vec::new();
    if let Ok(mut file) = tokio::fs::File::open(log).await {
        let len = file.metadata().await.map(|m| m.len()).unwrap_or(0);
        if file
            .seek(std::io::SeekFrom::Start(len.saturating_sub(END)))
            .await
            .is_ok()
        {
            let _ = file.read_to_end(&mut out).await;
        }
    }
    out
}

/// The last [`LAST_LINES`] lines, cut to their last [`LAST_CHARS`] characters.
fn last_lines(log: &str) -> String {
    let lines: Vec<&str> = log.lines().collect();
    let tail = lines[lines.len().saturating_sub(LAST_LINES)..].join("\n");
    let count = tail.chars().count();
    let tail: String = tail.chars().skip(count.saturating_sub(LAST_CHARS)).collect();
    if tail.is_empty() { tail } else { tail + "\n" }
}

#[cfg(test)]
mod tests {
    use super::last_lines;

    #[test]
    fn a_failure_shows_the_last_ten_lines() {
        let log: String = (1..=12).map(|i| format!("line{i}\n")).collect();
        let tail = last_lines(&log);
        assert!(tail.starts_with("line3\n") && tail.ends_with("line12\n"), "{tail}");
        assert_eq!(last_lines(""), "");
        assert_eq!(last_lines(&"x".repeat(30_000)).len(), 20_001);
    }
}
