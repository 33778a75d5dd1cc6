//! The command line: global options and one subcommand.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::{commands, output::Format};

const EXIT_CODES: &str = "\
Exit codes:
  0  success
  1  other failure (e.g. a conflict, or a declined confirmation)
  2  usage error or invalid input
  3  cluster or namespace not found
  4  not authenticated, or not allowed
  5  server unavailable
  6  timed out
  7  already exists
  130  interrupted (Ctrl-C) while following a job; the job keeps running

Configuration: --server/--token/-n (or KRAYNE_SERVER/KRAYNE_TOKEN/KRAYNE_NAMESPACE)
win over the file `krayne login` writes ($XDG_CONFIG_HOME/krayne/config.yaml).
Without a namespace from either, commands use the one you may use (your only
one, or the first where you are an editor) and say which on stderr.";

/// What `--version` says: which tool this is, beside Krayne (both are
/// called `krayne`, and this one's number is the lower).
pub(crate) const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (krayne-cli, Rust; replaces Krayne 0.3.x)");

/// Create and manage Ray clusters on Kubernetes through a krayne server.
#[derive(Debug, Parser)]
#[command(name = "krayne", version = VERSION, after_help = EXIT_CODES, propagate_version = true)]
pub(crate) struct Cli {
    #[command(flatten)]
    pub(crate) global: Global,
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// Options every command accepts, anywhere on the line.
///
/// Their environment variables are read by [`Global::with_environment`],
/// not by clap: clap counts an option set through the environment as
/// given, and a usage line would show `--server <URL> --token <JWT>` as
/// if they were required.
#[derive(Debug, clap::Args)]
pub(crate) struct Global {
    /// Server URL, e.g. http://127.0.0.1:8080 [env: KRAYNE_SERVER].
    #[arg(long, global = true, help_heading = "Global options", value_name = "URL")]
    pub(crate) server: Option<String>,
    /// Bearer token (JWT) [env: KRAYNE_TOKEN].
    #[arg(long, global = true, help_heading = "Global options", value_name = "JWT")]
    pub(crate) token: Option<String>,
    /// A file holding the token, re-read when it changes, e.g. a projected
    /// ServiceAccount token [env: KRAYNE_TOKEN_FILE].
    #[arg(long, global = true, help_heading = "Global options", value_name = "FILE")]
    pub(crate) token_file: Option<PathBuf>,
    /// Config file [env: KRAYNE_CONFIG] [default: $XDG_CONFIG_HOME/krayne/config.yaml].
    #[arg(long, global = true, help_heading = "Global options", value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
    /// Output format.
    #[arg(short, long, global = true, help_heading = "Global options", value_enum, default_value_t = Format::Table)]
    pub(crate) output: Format,
    /// Show error details (gRPC code, request id).
    #[arg(long, global = true, help_heading = "Global options")]
    pub(crate) debug: bool,
    /// Krayne's option; refused with what replaces it (krayne talks to a
    /// krayne server, not to Kubernetes).
    #[arg(
        long,
        global = true,
        help_heading = "Global options",
        hide = true,
        value_name = "FILE"
    )]
    pub(crate) kubeconfig: Option<PathBuf>,
}

impl Global {
    /// The options, each from its environment variable where the command
    /// line has none (an empty variable counts as unset).
    pub(crate) fn with_environment(mut self) -> Self {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        self.server = self.server.or_else(|| var("KRAYNE_SERVER"));
        self.token = self.token.or_else(|| var("KRAYNE_TOKEN"));
        self.token_file = self.token_file.or_else(|| var("KRAYNE_TOKEN_FILE").map(PathBuf::from));
        self.config = self.config.or_else(|| var("KRAYNE_CONFIG").map(PathBuf::from));
        self
    }
}

/// Every command, grouped by noun: each noun's enum (in
/// `commands/<noun>/command.rs`) lists its verbs and dispatches them, and
/// is flattened here, so `krayne create` stays a verb of its own.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    #[command(flatten)]
    Cluster(commands::cluster::Command),
    #[command(flatten)]
    Service(commands::service::Command),
    #[command(flatten)]
    Job(commands::job::Command),
    #[command(flatten)]
    RayJob(commands::rayjob::Command),
    /// A live terminal UI over the server's clusters (`?` lists its keys).
    Tui(crate::tui::Args),
    #[command(flatten)]
    Identity(commands::identity::Command),
    #[command(flatten)]
    Usage(commands::usage::Command),
    #[command(flatten)]
    Audit(commands::audit::Command),
    #[command(flatten)]
    Config(commands::config::Command),
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory as _;

    use super::*;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn output_is_accepted_anywhere() {
        for line in [
            &["krayne", "-o", "json", "get"][..],
            &["krayne", "get", "-o", "json"],
            &["krayne", "get", "-A", "--output=json"],
        ] {
            let cli = Cli::try_parse_from(line).unwrap();
            assert_eq!(cli.global.output, Format::Json, "{line:?}");
        }
    }
}
