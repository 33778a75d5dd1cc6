//! `krayne-server`: the control plane's binary.
#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::Parser as _;

fn main() -> ExitCode {
    krayne_server::commands::run(krayne_server::config::Cli::parse())
}
