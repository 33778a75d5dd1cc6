//! `krayne`: create and manage Ray clusters through a krayne server.
//!
//! Data goes to stdout, messages and progress to stderr; the exit code says
//! what kind of failure happened (see `krayne --help`).
#![forbid(unsafe_code)]

mod cli;
mod commands;
mod context;
#[cfg(test)]
mod docs_check;
mod failure;
mod output;
mod parse;
mod settings;
mod tui;

use clap::Parser as _;

fn main() -> std::process::ExitCode {
    // Parsing comes first and needs no runtime, so `--help` and usage
    // errors return at once.
    let cli = cli::Cli::parse();
    let debug = cli.global.debug;
    failure::report(commands::run(cli), debug)
}
