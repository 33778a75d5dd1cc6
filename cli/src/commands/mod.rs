//! One module per command: `<noun>/<verb>.rs`.

pub(crate) mod audit;
pub(crate) mod cluster;
pub(crate) mod config;
pub(crate) mod identity;
pub(crate) mod job;
pub(crate) mod rayjob;
pub(crate) mod service;
pub(crate) mod usage;

use krayne_client::Code;

use crate::{
    cli::{Cli, Command},
    context::Context,
    failure::Failure,
};

/// Runs the command on a single-threaded runtime: a CLI makes one call at a
/// time, and starting one thread is cheaper than a pool.
pub(crate) fn run(cli: Cli) -> Result<(), Failure> {
    let Cli { global, command } = cli;
    // Krayne's commands and options that have no meaning here.
    match command {
        Command::Config(config::Command::Init(_)) => return Err(config::krayne_only::init()),
        Command::Config(config::Command::Sandbox(_)) => return Err(config::krayne_only::sandbox()),
        _ if global.kubeconfig.is_some() => return Err(config::krayne_only::kubeconfig()),
        _ => {}
    }
    match command {
        // These need neither the config file nor the network.
        Command::Config(config::Command::Completions(args)) => return config::completions::run(&args),
        Command::Config(config::Command::Version(args)) if args.client => {
            return config::version::client_only(global.output);
        }
        _ => {}
    }
    let ctx = Context::new(global)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::Other(format!("cannot start the async runtime: {e}")))?;
    let result = runtime.block_on(async {
        match command {
            Command::Cluster(verb) => verb.run(&ctx).await,
            Command::Service(verb) => verb.run(&ctx).await,
            Command::Job(verb) => verb.run(&ctx).await,
            Command::RayJob(verb) => verb.run(&ctx).await,
            Command::Tui(args) => crate::tui::run(&ctx, args).await,
            Command::Identity(verb) => verb.run(&ctx).await,
            Command::Usage(verb) => verb.run(&ctx).await,
            Command::Audit(verb) => verb.run(&ctx).await,
            Command::Config(verb) => verb.run(&ctx).await,
        }
    });
    match result {
        Err(Failure::Client(e)) if e.code() == Code::Unauthenticated && e.message().starts_with("invalid token") => {
            let sandbox = runtime.block_on(async {
                let version = ctx.client().ok()?.server_version().await.ok()?;
                Some(version.features.iter().any(|f| f == "sandbox"))
            });
            if sandbox == Some(true) {
                Err(Failure::StaleSandboxToken(e))
            } else {
                Err(Failure::Client(e))
            }
        }
        other => other,
    }
}
