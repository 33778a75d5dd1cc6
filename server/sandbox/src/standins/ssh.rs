//! The head's SSH server: a real one (russh), answering what Krayne's
//! bootstrap configures on a real head — the user `ray` with no password
//! (`none` or an empty password), nobody else — so that `ssh` and
//! `krayne ssh NAME -- CMD` work against the sandbox end to end.
//!
//! A command (`exec`) runs with `/bin/sh -c`, a login without one runs
//! `/bin/sh -i`, in a process group of its own (killed whole when the
//! client leaves or the pod stops serving), in the head's own home
//! directory, with the pod's environment (`HOSTNAME`, `USER=ray`,
//! `HOME`). There is no `ray` on this machine: a sandbox run by a user
//! runs them as that user; a sandbox run as root runs them as `nobody`
//! (never as root), in a UTS namespace named after the pod where one can
//! be made (`unshare`, `setpriv`), so `hostname` answers as a
//! container's does. A session that asks for a terminal gets one (a
//! pseudo-terminal, `ssh_pty`), as from sshd; no subsystem (sftp) is
//! served. Reached
//! only through `pods/portforward` (see `listen`), never at the pod's
//! IP: the API's authorization stands in front of it.

use super::ssh_pty;
use std::{
    collections::HashMap,
    path::PathBuf,
    process::Stdio,
    sync::{Arc, OnceLock},
    time::Duration,
};

use russh::{
    Channel, ChannelId, ChannelMsg, MethodKind, MethodSet,
    keys::{PrivateKey, ssh_key::private::Ed25519Keypair},
    server::{Auth, ChannelOpenHandle, Config, Handler, Msg, Session},
};
use tokio::{
    io::{AsyncRead, AsyncWrite, AsyncWriteExt as _},
    process::{Child, Command},
    sync::{mpsc, watch},
};

/// The only user a head lets in, as Krayne's bootstrap sets it up.
const USER: &str = "ray";
/// Whom a sandbox run as root runs commands as: `nobody`.
pub(super) const NOBODY: u32 = 65_534;

/// One head's SSH server settings: its host key (new with every head
/// pod, as a real pod's is) and where its commands run.
pub(super) struct SshHead {
    config: Arc<Config>,
    /// The pod's name (`HOSTNAME`).
    pod: String,
    /// The head's home directory; removed with the head.
    home: tempfile::TempDir,
}

impl SshHead {
    /// Settings for head pod `pod`; `None` (logged) when no host key or
    /// home directory could be made.
    pub(super) fn new(pod: &str) -> Option<Self> {
        let mut seed = [0u8; 32];
        if let Err(e) = getrandom::fill(&mut seed) {
            tracing::warn!(error = %e, "the head's SSH server has no host key: no randomness");
            return None;
        }
        let home = match tempfile::Builder::new().prefix("krayne-sandbox-home-").tempdir() {
            Ok(home) => home,
            Err(e) => {
                tracing::warn!(error = %e, "the head's SSH server has no home directory");
                return None;
            }
        };
        if nix::unistd::geteuid().is_root()
            && let Err(e) = std::os::unix::fs::chown(home.path(), Some(NOBODY), Some(NOBODY))
        {
            tracing::warn!(error = %e, "the head's home directory is not nobody's");
        }
        let mut methods = MethodSet::empty();
        methods.push(MethodKind::None);
        methods.push(MethodKind::Password);
        let config = Config {
            server_id: russh::SshId::Standard("SSH-2.0-krayne_sandbox_head".into()),
            methods,
            keys: vec![PrivateKey::from(Ed25519Keypair::from_seed(&seed))],
            auth_rejection_time: Duration::from_millis(200),
            auth_rejection_time_initial: Some(Duration::ZERO),
            // An idle shell stays, as with sshd; a client gone silent is
            // found by keepalives.
            inactivity_timeout: None,
            keepalive_interval: Some(Duration::from_secs(30)),
            ..Config::default()
        };
        Some(Self {
            config: Arc::new(config),
            pod: pod.to_owned(),
            home,
        })
    }
}

/// Serves one SSH connection until the client leaves or the pod stops
/// serving (`stopped` changes or is dropped): then the connection and
/// its commands end.
pub(super) async fn serve<S>(stream: S, head: Arc<SshHead>, mut stopped: watch::Receiver<()>)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let connection = Connection {
        head: head.clone(),
        channels: HashMap::new(),
        terminals: HashMap::new(),
        windows: HashMap::new(),
        stopped: stopped.clone(),
    };
    let running = match russh::server::run_stream(head.config.clone(), stream, connection).await {
        Ok(running) => running,
        Err(e) => {
            tracing::debug!(error = %e, "a sandbox head's SSH connection failed to start");
            return;
        }
    };
    let handle = running.handle();
    tokio::select! {
        ended = running => {
            if let Err(e) = ended {
                tracing::debug!(error = %e, "a sandbox head's SSH connection ended");
            }
        }
        _ = stopped.changed() => {
            let _ = handle
                .disconnect(russh::Disconnect::ByApplication, "the head pod stopped".into(), String::new())
                .await;
        }
    }
}

/// One client's connection: its session channels until a command or a
/// shell takes them.
struct Connection {
    head: Arc<SshHead>,
    channels: HashMap<ChannelId, Channel<Msg>>,
    /// Terminals asked for, until the channel's command starts.
    terminals: HashMap<ChannelId, ssh_pty::TerminalRequest>,
    /// The terminals of running commands, for window changes.
    windows: HashMap<ChannelId, ssh_pty::Window>,
    /// The pod's: its commands end when it stops serving.
    stopped: watch::Receiver<()>,
}

impl Connection {
    /// Runs `command` (a login shell when `None`) on `channel`.
    fn start(&mut self, id: ChannelId, command: Option<&str>, session: &mut Session) -> Result<(), russh::Error> {
        let Some(channel) = self.channels.remove(&id) else {
            return session.channel_failure(id);
        };
        if let Some(terminal) = self.terminals.remove(&id) {
            let home = self.head.home.path().to_owned();
            let started = ssh_pty::start(
                channel,
                &terminal,
                &argv(&self.head, command),
                &environment(&self.head),
                &home,
                self.stopped.clone(),
            );
            return match started {
                Ok(window) => {
                    self.windows.insert(id, window);
                    session.channel_success(id)
                }
                Err(e) => {
                    tracing::warn!(error = %e, "a sandbox head could not start a terminal over SSH");
                    session.channel_failure(id)
                }
            };
        }
        match spawn(&self.head, command) {
            Ok(child) => {
                tokio::spawn(run(channel, child, self.stopped.clone()));
                session.channel_success(id)
            }
            Err(e) => {
                tracing::warn!(error = %e, "a sandbox head could not start a command over SSH");
                session.channel_failure(id)
            }
        }
    }
}

impl Handler for Connection {
    type Error = russh::Error;

    async fn auth_none(&mut self, user: &str) -> Result<Auth, Self::Error> {
        Ok(if user == USER { Auth::Accept } else { Auth::reject() })
    }

    async fn auth_password(&mut self, user: &str, password: &str) -> Result<Auth, Self::Error> {
        Ok(if user == USER && password.is_empty() {
            Auth::Accept
        } else {
            Auth::reject()
        })
    }

    async fn channel_open_session(
        &mut self,
        channel: Channel<Msg>,
        reply: ChannelOpenHandle,
        _: &mut Session,
    ) -> Result<(), Self::Error> {
        self.channels.insert(channel.id(), channel);
        reply.accept().await;
        Ok(())
    }

    async fn pty_request(
        &mut self,
        channel: ChannelId,
        term: &str,
        cols: u32,
        rows: u32,
        _: u32,
        _: u32,
        _: &[(russh::Pty, u32)],
        session: &mut Session,
    ) -> Result<(), Self::Error> {
        // Run as root without the means to drop to nobody on a terminal:
        // no terminal (ssh goes on without one).
        if nix::unistd::geteuid().is_root() && !can_name_the_host() {
            return session.channel_failure(channel);
        }
        let term = if term.is_empty() || term.len() > 64 || !term.chars().all(|c| c.is_ascii_graphic()) {
            "xterm".to_owned()
        } else {
            term.to_owned()
        };
        let clamp = |n: u32| u16::try_from(n.clamp(1, 1000)).unwrap_or(80);
        self.terminals.insert(
            channel,
            ssh_pty::TerminalRequest {
                term,
                cols: clamp(cols),
                rows: clamp(rows),
            },
        );
        session.channel_success(channel)
    }

    async fn window_change_request(
        &mut self,
        channel: ChannelId,
        cols: u32,
        rows: u32,
        _: u32,
        _: u32,
        _: &mut Session,
    ) -> Result<(), Self::Error> {
        if let Some(window) = self.windows.get(&channel) {
            let clamp = |n: u32| u16::try_from(n.clamp(1, 1000)).unwrap_or(80);
            ssh_pty::resize(window, clamp(cols), clamp(rows));
        }
        Ok(())
    }

    async fn exec_request(
        &mut self,
        channel: ChannelId,
        data: &[u8],
        session: &mut Session,
    ) -> Result<(), Self::Error> {
        let command = String::from_utf8_lossy(data).into_owned();
        self.start(channel, Some(&command), session)
    }

    async fn shell_request(&mut self, channel: ChannelId, session: &mut Session) -> Result<(), Self::Error> {
        self.start(channel, None, session)
    }

    async fn subsystem_request(
        &mut self,
        channel: ChannelId,
        _: &str,
        session: &mut Session,
    ) -> Result<(), Self::Error> {
        self.channels.remove(&channel);
        session.channel_failure(channel)
    }

    async fn channel_close(&mut self, channel: ChannelId, _: &mut Session) -> Result<(), Self::Error> {
        self.channels.remove(&channel);
        self.terminals.remove(&channel);
        self.windows.remove(&channel);
        Ok(())
    }
}

/// The program and arguments that run `command` (or an interactive
/// shell) as the head runs it on a terminal: as root, in the pod's UTS
/// namespace and as nobody.
fn argv(head: &SshHead, command: Option<&str>) -> Vec<String> {
    let mut argv: Vec<String> = if nix::unistd::geteuid().is_root() {
        [
            "unshare",
            "--uts",
            "/bin/sh",
            "-c",
            "hostname \"$0\" && exec setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all /bin/sh \"$@\"",
            &head.pod,
        ]
        .map(str::to_owned)
        .to_vec()
    } else {
        vec!["/bin/sh".to_owned()]
    };
    match command {
        Some(command) => argv.extend(["-c".to_owned(), command.to_owned()]),
        None => argv.push("-i".to_owned()),
    }
    argv
}

/// The pod's environment, as its commands see it.
fn environment(head: &SshHead) -> Vec<(&'static str, String)> {
    let home = head.home.path().display().to_string();
    vec![
        (
            "PATH",
            std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".to_owned()),
        ),
        ("HOME", home),
        ("USER", USER.to_owned()),
        ("LOGNAME", USER.to_owned()),
        ("SHELL", "/bin/sh".to_owned()),
        ("HOSTNAME", head.pod.clone()),
    ]
}

/// Starts `command` (or an interactive shell) as the head runs it.
fn spawn(head: &SshHead, command: Option<&str>) -> std::io::Result<Child> {
    let args: Vec<&str> = match command {
        Some(command) => vec!["-c", command],
        None => vec!["-i"],
    };
    let root = nix::unistd::geteuid().is_root();
    let mut cmd = if root && can_name_the_host() {
        // The pod's host name in a namespace of its own, then nobody's
        // privileges for the command.
        let mut cmd = Command::new("unshare");
        cmd.args([
            "--uts",
            "/bin/sh",
            "-c",
            "hostname \"$0\" && exec setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all /bin/sh \"$@\"",
            &head.pod,
        ]);
        cmd
    } else {
        let mut cmd = Command::new("/bin/sh");
        if root {
            cmd.uid(NOBODY).gid(NOBODY);
        }
        cmd
    };
    let home: PathBuf = head.home.path().to_owned();
    cmd.args(args)
        .env_clear()
        .env(
            "PATH",
            std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into()),
        )
        .env("HOME", &home)
        .env("USER", USER)
        .env("LOGNAME", USER)
        .env("SHELL", "/bin/sh")
        .env("HOSTNAME", &head.pod)
        .current_dir(&home)
        .process_group(0)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
}

/// Whether a command can get a UTS namespace of its own and drop to
/// nobody (root alone is not enough: a container may lack the
/// capability, or the tools); asked once.
fn can_name_the_host() -> bool {
    static CAN: OnceLock<bool> = OnceLock::new();
    *CAN.get_or_init(|| {
        std::process::Command::new("unshare")
            .args([
                "--uts",
                "setpriv",
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "true",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}

/// Carries the channel to the process and back: its stdin from the
/// client's data (ended by the client's EOF; written by a task of its
/// own, so that a command not reading its stdin never stalls the
/// session), its stdout and stderr to the client, then its exit status.
/// When the client leaves or the pod stops serving first, the command's
/// whole process group is killed.
async fn run(mut channel: Channel<Msg>, mut child: Child, mut stopped: watch::Receiver<()>) {
    let (Some(mut stdin), Some(mut stdout), Some(mut stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return;
    };
    let group = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .map(nix::unistd::Pid::from_raw);
    let (to_stdin, mut for_stdin) = mpsc::unbounded_channel::<Vec<u8>>();
    let writer = tokio::spawn(async move {
        while let Some(data) = for_stdin.recv().await {
            if stdin.write_all(&data).await.is_err() {
                return;
            }
        }
    });
    let (mut out, mut err) = (channel.make_writer(), channel.make_writer_ext(Some(1)));
    let finished = async {
        let _ = tokio::join!(
            tokio::io::copy(&mut stdout, &mut out),
            tokio::io::copy(&mut stderr, &mut err)
        );
        child.wait().await
    };
    let input = async {
        let mut to_stdin = Some(to_stdin);
        while let Some(message) = channel.wait().await {
            match message {
                ChannelMsg::Data { data } => {
                    if let Some(queue) = &to_stdin
                        && queue.send(data.to_vec()).is_err()
                    {
                        to_stdin = None;
                    }
                }
                // Dropping the queue ends the writer, which closes stdin.
                ChannelMsg::Eof => to_stdin = None,
                ChannelMsg::Close => return,
                _ => {}
            }
        }
    };
    let status = tokio::select! {
        status = finished => Some(status),
        () = input => None,
        _ = stopped.changed() => None,
    };
    writer.abort();
    let Some(status) = status else {
        if let Some(group) = group {
            let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
        }
        return;
    };
    // A signal's death is reported as a shell reports it.
    let code = status.ok().and_then(|s| {
        use std::os::unix::process::ExitStatusExt as _;
        s.code().or_else(|| s.signal().map(|n| 128 + n))
    });
    let _ = channel
        .exit_status(code.and_then(|c| u32::try_from(c).ok()).unwrap_or(255))
        .await;
    let _ = channel.eof().await;
    let _ = channel.close().await;
}
