//! The head's SSH server: a real one (russh), answering what Krayne's
//! bootstrap configures on a real head — the user `ray` with no password
//! (`none` or an empty password), nobody else — so that `ssh` and
//! `krayne ssh NAME -- CMD` work against the sandbox end to end.
//!
//! A command (`exec`) runs with `/bin/sh -c`, a login without one runs
//! `/bin/sh -i`; both as the user running the sandbox (there is no `ray`
//! on this machine), in the head's own home directory, with the pod's
//! environment (`HOSTNAME`, `USER=ray`, `HOME`). Where the sandbox may
//! make a UTS namespace (as root), the command runs in one named after
//! the pod, so `hostname` answers as a container's does. No terminal is
//! allocated: a pty request is refused, and ssh goes on without one.
//! Reached only through `pods/portforward` (see `listen`), never at the
//! pod's IP: the API's authorization stands in front of it.

use std::{collections::HashMap, path::PathBuf, process::Stdio, sync::Arc};

use russh::{
    Channel, ChannelId, ChannelMsg, MethodKind, MethodSet,
    keys::{PrivateKey, ssh_key::private::Ed25519Keypair},
    server::{Auth, ChannelOpenHandle, Config, Handler, Msg, Session},
};
use tokio::{
    io::{AsyncRead, AsyncWrite, AsyncWriteExt as _},
    process::{Child, Command},
};

/// The only user a head lets in, as Krayne's bootstrap sets it up.
const USER: &str = "ray";

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
        let mut methods = MethodSet::empty();
        methods.push(MethodKind::None);
        methods.push(MethodKind::Password);
        let config = Config {
            server_id: russh::SshId::Standard("SSH-2.0-krayne_sandbox_head".into()),
            methods,
            keys: vec![PrivateKey::from(Ed25519Keypair::from_seed(&seed))],
            auth_rejection_time: std::time::Duration::from_millis(200),
            auth_rejection_time_initial: Some(std::time::Duration::ZERO),
            ..Config::default()
        };
        Some(Self {
            config: Arc::new(config),
            pod: pod.to_owned(),
            home,
        })
    }
}

/// Serves one SSH connection until the client leaves.
pub(super) async fn serve<S>(stream: S, head: Arc<SshHead>)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let connection = Connection {
        head: head.clone(),
        channels: HashMap::new(),
    };
    match russh::server::run_stream(head.config.clone(), stream, connection).await {
        Ok(running) => {
            if let Err(e) = running.await {
                tracing::debug!(error = %e, "a sandbox head's SSH connection ended");
            }
        }
        Err(e) => tracing::debug!(error = %e, "a sandbox head's SSH connection failed to start"),
    }
}

/// One client's connection: its session channels until a command or a
/// shell takes them.
struct Connection {
    head: Arc<SshHead>,
    channels: HashMap<ChannelId, Channel<Msg>>,
}

impl Connection {
    /// Runs `command` (a login shell when `None`) on `channel`.
    fn start(&mut self, id: ChannelId, command: Option<&str>, session: &mut Session) -> Result<(), russh::Error> {
        let Some(channel) = self.channels.remove(&id) else {
            return session.channel_failure(id);
        };
        match spawn(&self.head, command) {
            Ok(child) => {
                tokio::spawn(run(channel, child));
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
        _: &str,
        _: u32,
        _: u32,
        _: u32,
        _: u32,
        _: &[(russh::Pty, u32)],
        session: &mut Session,
    ) -> Result<(), Self::Error> {
        session.channel_failure(channel)
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
}

/// Starts `command` (or an interactive shell) as the head runs it.
fn spawn(head: &SshHead, command: Option<&str>) -> std::io::Result<Child> {
    let args: Vec<&str> = match command {
        Some(command) => vec!["-c", command],
        None => vec!["-i"],
    };
    // As root the command gets the pod's host name in a UTS namespace of
    // its own; otherwise only its environment names the pod.
    let mut cmd = if nix::unistd::geteuid().is_root() && unshare().is_some() {
        let mut cmd = Command::new("unshare");
        cmd.args([
            "--uts",
            "/bin/sh",
            "-c",
            "hostname \"$0\" && exec /bin/sh \"$@\"",
            &head.pod,
        ]);
        cmd
    } else {
        Command::new("/bin/sh")
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
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
}

/// `unshare`, when this machine has it.
fn unshare() -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join("unshare"))
        .find(|p| p.is_file())
}

/// Carries the channel to the process and back: its stdin from the
/// client's data (ended by the client's EOF), its stdout and stderr to
/// the client, then its exit status; the process is killed when the
/// client leaves first.
async fn run(mut channel: Channel<Msg>, mut child: Child) {
    let (Some(stdin), Some(mut stdout), Some(mut stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return;
    };
    let (mut out, mut err) = (channel.make_writer(), channel.make_writer_ext(Some(1)));
    let finished = async {
        let _ = tokio::join!(
            tokio::io::copy(&mut stdout, &mut out),
            tokio::io::copy(&mut stderr, &mut err)
        );
        child.wait().await
    };
    let input = async {
        let mut stdin = Some(stdin);
        while let Some(message) = channel.wait().await {
            match message {
                ChannelMsg::Data { data } => {
                    if let Some(pipe) = stdin.as_mut()
                        && pipe.write_all(&data).await.is_err()
                    {
                        stdin = None;
                    }
                }
                ChannelMsg::Eof => stdin = None,
                ChannelMsg::Close => return,
                _ => {}
            }
        }
    };
    let status = tokio::select! {
        status = finished => status,
        () = input => return,
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
