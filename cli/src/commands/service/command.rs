//! The `service` commands as one enum that dispatches itself: a new verb is
//! a variant here and its module beside this file.

use clap::Subcommand;

use crate::{context::Context, failure::Failure};

/// A cluster's services: list them, tunnel to them, SSH, open them, Ray's credentials.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// List a cluster's services (dashboard, Ray client, notebook, code-server, SSH).
    Services(super::list::Args),
    /// Open local ports that reach a cluster's services through the server.
    Tunnel(super::tunnel::Args),
    /// Open them in the background and return (Krayne's tun-open; `-o json`
    /// lists `{service, remote_port, local_port, local_url}`, SSH's with
    /// its `command`).
    #[command(name = "tun-open")]
    TunOpen(super::tunnel::Args),
    /// Print a cluster's Ray token for Ray's own clients through a tunnel
    /// (`eval "$(krayne ray-credentials NAME)"`).
    #[command(name = "ray-credentials")]
    RayCredentials(super::credentials::Args),
    /// Close a cluster's background tunnels (`krayne tunnel --close NAME`).
    #[command(name = "tun-close")]
    TunClose(super::tunnel::CloseArgs),
    /// SSH to a cluster's head through the server.
    Ssh(super::ssh::Args),
    /// Open a cluster's dashboard (or notebook, code-server) in the browser.
    Open(super::open::Args),
}

impl Command {
    /// Runs the verb.
    pub(crate) async fn run(self, ctx: &Context) -> Result<(), Failure> {
        match self {
            Self::Services(args) => super::list::run(ctx, args).await,
            Self::Tunnel(args) => super::tunnel::run(ctx, args).await,
            Self::TunOpen(args) => super::tunnel::open_in_background(ctx, args).await,
            Self::RayCredentials(args) => super::credentials::run(ctx, args).await,
            Self::TunClose(args) => super::tunnel::close(ctx, args).await,
            Self::Ssh(args) => super::ssh::run(ctx, args).await,
            Self::Open(args) => super::open::run(ctx, args).await,
        }
    }
}
