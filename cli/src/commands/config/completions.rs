//! `krayne completions SHELL`.

use clap::CommandFactory as _;
use clap_complete::Shell;

use crate::{cli::Cli, failure::Failure, output::out};

/// Print a completion script for your shell.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  krayne completions bash > ~/.local/share/bash-completion/completions/krayne
  krayne completions zsh > \"${fpath[1]}/_krayne\"
  krayne completions fish > ~/.config/fish/completions/krayne.fish")]
pub(crate) struct Args {
    /// The shell.
    shell: Shell,
}

pub(crate) fn run(args: &Args) -> Result<(), Failure> {
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut Cli::command(), "krayne", &mut script);
    out(&String::from_utf8_lossy(&script))
}
