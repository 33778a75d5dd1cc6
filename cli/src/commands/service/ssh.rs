//! `krayne ssh NAME`: SSH to a cluster's head through a tunnel.

use crate::{context::Context, failure::Failure};

/// SSH to the cluster's head through the server (runs `ssh` with
/// `krayne tunnel --stdio NAME ssh` as its ProxyCommand).
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Cluster name.
    name: String,
    /// Namespace [default: the config file's, or `default`].
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

pub(crate) fn run(ctx: &Context, args: Args) -> Result<(), Failure> {
    let namespace = ctx.namespace(args.namespace.as_deref());
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
    ssh.arg(host).args(&args.ssh_args);
    ssh.env("KRAYNE_SERVER", ctx.server()?);
    if let Some(token) = ctx.token() {
        ssh.env("KRAYNE_TOKEN", token);
    }
    let status = ssh
        .status()
        .map_err(|e| Failure::Other(format!("cannot run ssh: {e}")))?;
    if status.success() {
        Ok(())
    } else {
        Err(Failure::Other(format!("ssh ended with {status}")))
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
