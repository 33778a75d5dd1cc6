//! One module per command: `<noun>/<verb>.rs`.

pub(crate) mod audit;
pub(crate) mod cluster;
pub(crate) mod config;
pub(crate) mod identity;
pub(crate) mod job;
pub(crate) mod service;

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
        Command::Init(_) => return Err(config::krayne_only::init()),
        Command::Sandbox(_) => return Err(config::krayne_only::sandbox()),
        _ if global.kubeconfig.is_some() => return Err(config::krayne_only::kubeconfig()),
        _ => {}
    }
    match command {
        // These need neither the config file nor the network.
        Command::Completions(args) => return config::completions::run(&args),
        Command::Version(args) if args.client => return config::version::client_only(global.output),
        _ => {}
    }
    let ctx = Context::new(global)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::Other(format!("cannot start the async runtime: {e}")))?;
    let result = runtime.block_on(async {
        match command {
            Command::Create(args) => cluster::create::run(&ctx, args).await,
            Command::Get(args) => cluster::get::run(&ctx, args).await,
            Command::Describe(args) => cluster::describe::run(&ctx, args).await,
            Command::Scale(args) => cluster::scale::run(&ctx, args).await,
            Command::Suspend(args) => cluster::suspend::run(&ctx, args).await,
            Command::Keep(args) => cluster::keep::run(&ctx, args).await,
            Command::Resume(args) => cluster::resume::run(&ctx, args).await,
            Command::Delete(args) => cluster::delete::run(&ctx, args).await,
            Command::Wait(args) => cluster::wait::run(&ctx, args).await,
            Command::Logs(args) => cluster::logs::run(&ctx, args).await,
            Command::Whoami(args) => identity::whoami::run(&ctx, args).await,
            Command::Namespaces(args) => identity::namespaces::run(&ctx, args).await,
            Command::Quota(args) => identity::quota::run(&ctx, args).await,
            Command::Audit(args) => audit::list::run(&ctx, args).await,
            Command::Login(args) => config::login::run(&ctx, args).await,
            Command::Logout(args) => config::logout::run(&ctx, args).await,
            Command::Version(args) => config::version::run(&ctx, args).await,
            Command::Services(args) => service::list::run(&ctx, args).await,
            Command::Tunnel(args) => service::tunnel::run(&ctx, args).await,
            Command::RayCredentials(args) => service::credentials::run(&ctx, args).await,
            Command::Open(args) => service::open::run(&ctx, args).await,
            Command::TunClose(args) => service::tunnel::close(&ctx, args).await,
            Command::TunOpen(args) => service::tunnel::open_in_background(&ctx, args).await,
            Command::Ssh(args) => service::ssh::run(&ctx, args).await,
            Command::Submit(args) => job::submit::run(&ctx, args).await,
            Command::Jobs(args) => job::run(&ctx, args).await,
            Command::Tui(args) => crate::tui::run(&ctx, args).await,
            Command::Completions(_) | Command::Init(_) | Command::Sandbox(_) => Ok(()),
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
