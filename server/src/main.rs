//! `krayne-server`: the control plane's binary.
#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// krayne: a multi-tenant control plane for Ray clusters on Kubernetes.
#[derive(Parser)]
#[command(version, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Start the server with a simulated Kubernetes, an embedded audit store
    /// and development tokens: the zero-setup way to try krayne.
    Sandbox,
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Sandbox => {
            #[allow(clippy::print_stderr)]
            {
                eprintln!(
                    "krayne-server sandbox: not yet available. The cluster model and API \
                     contract exist; the server and the simulated Kubernetes land next \
                     (see README.md, \"Status\")."
                );
            }
            ExitCode::FAILURE
        }
    }
}
