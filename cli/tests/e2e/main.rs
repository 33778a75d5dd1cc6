//! The SDK and the `krayne` CLI against the real server binary and the
//! sandbox.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod cli_commands;
mod cli_config;
mod cli_errors;
mod cli_files;
mod first_hour;
mod jobs;
mod krayne_habits;
mod logs;
mod quotas;
mod real_ssh;
mod runs;
mod shapes;
mod sites;
mod support;
mod tui;
mod tunnels;
mod usage;
mod watch;
