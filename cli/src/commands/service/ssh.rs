//! `krayne ssh NAME`: SSH to a cluster's head through a tunnel.

use crate::{context::Context, failure::Failure};

/// SSH to the cluster's head through the server (runs `ssh` with
/// `krayne tunnel --stdio NAME ssh` as its ProxyCommand). The exit code is
/// ssh's: the remote command's, or 255 when ssh itself failed.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Cluster name.
    name: String,
    /// Namespace [default: KRAYNE_NAMESPACE, the config file's, or the one you may use].
    #[arg(short, long)]
    namespace: Option<String>,
    /// User on the head: krayne's bootstrap lets the head's own user in
    /// (`ray` in Ray's images) with no password.
    #[arg(short = 'l', long, default_value = "ray")]
    user: String,
    /// More arguments for ssh, after `--` (e.g. `-- -v`, or a command).
    #[arg(last = true)]
    ssh_args: Vec<String>,
}

pub(crate) async fn run(ctx: &Context, args: Args) -> Result<(), Failure> {
    let namespace = ctx.namespace(args.namespace.as_deref()).await?;
    // Both go into a shell command line (ssh runs the ProxyCommand with sh).
    for (what, value) in [("namespace", &namespace), ("cluster name", &args.name)] {
        if value.is_empty()
            || !value
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        {
            return Err(Failure::Usage(format!(
                "{value:?} is not a {what} (lower-case letters, digits and '-')"
            )));
        }
    }
    if args.user.starts_with('-')
        || !args
            .user
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c))
    {
        return Err(Failure::Usage(format!(
            "{:?} is not a user name (letters, digits, '_', '.' and '-', not first)",
            args.user
        )));
    }
    let me = std::env::current_exe().map_err(|e| Failure::Other(format!("cannot find the krayne binary: {e}")))?;
    let proxy = format!(
        "{} tunnel --stdio -n {namespace} {} ssh",
        shell_quote(&me.display().to_string()),
        args.name
    );
    let host = format!("{}@krayne-{}", args.user, args.name);
    let mut ssh = std::process::Command::new("ssh");
    ssh.arg("-o").arg(format!("ProxyCommand={proxy}"));
    // The head's host key changes with every head pod.
    ssh.args(["-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null"]);
    // Not "Permanently added … to the list of known hosts" on every login
    // (a list that is /dev/null); `-- -v` still shows everything.
    ssh.args(["-o", "LogLevel=ERROR"]);
    ssh.arg(host).args(&args.ssh_args);
    ssh.env("KRAYNE_SERVER", ctx.server()?);
    if let Some(token) = ctx.token() {
        ssh.env("KRAYNE_TOKEN", token);
    }
    // A sign-in is read (and renewed) from the same config directory.
    ssh.env("KRAYNE_CONFIG", &ctx.settings_path);
    // ssh owns the terminal until it ends; nothing else runs meanwhile.
    let status = ssh
        .status()
        .map_err(|e| Failure::Other(format!("cannot run ssh: {e}")))?;
    // As ssh itself: the remote command's status, or 255 for ssh's own
    // failures (which it has explained on stderr).
    match status.code() {
        Some(0) => Ok(()),
        Some(code) => Err(Failure::Exited(u8::try_from(code).unwrap_or(255))),
        None => Err(Failure::Exited(255)),
    }
}

/// `text` as one word for a POSIX shell.
fn shell_quote(text: &str) -> String {
    if text.chars().all(|c| c.is_ascii_alphanumeric() || "/._-".contains(c)) {
        text.to_owned()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}
