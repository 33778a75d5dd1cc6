//! The `cluster` commands as one enum that dispatches itself: a new verb is
//! a variant here and its module beside this file.

use clap::Subcommand;

use crate::{context::Context, failure::Failure};

/// A cluster's lifecycle: create, read, resize, suspend, keep, delete, wait, logs.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Create a cluster, from flags or a Krayne config file.
    Create(super::create::Args),
    /// List clusters, or show one.
    #[command(visible_alias = "list")]
    Get(super::get::Args),
    /// Show a cluster's shape, pods, conditions and recent events.
    Describe(super::describe::Args),
    /// Resize a worker group.
    Scale(super::scale::Args),
    /// Suspend a cluster: delete its pods, keep the cluster (and free its quota).
    Suspend(super::suspend::Args),
    /// Resume a suspended cluster (--wait until it is ready).
    Resume(super::resume::Args),
    /// Keep a cluster from its lifecycle policy for a while (--for 4h, --until TIME).
    Keep(super::keep::Args),
    /// Delete a cluster (asks first unless --yes).
    Delete(super::delete::Args),
    /// Wait until a cluster is ready.
    Wait(super::wait::Args),
    /// Print a cluster's pod log (the head's Ray container by default).
    Logs(super::logs::Args),
}

impl Command {
    /// Runs the verb.
    pub(crate) async fn run(self, ctx: &Context) -> Result<(), Failure> {
        match self {
            Self::Create(args) => super::create::run(ctx, args).await,
            Self::Get(args) => super::get::run(ctx, args).await,
            Self::Describe(args) => super::describe::run(ctx, args).await,
            Self::Scale(args) => super::scale::run(ctx, args).await,
            Self::Suspend(args) => super::suspend::run(ctx, args).await,
            Self::Resume(args) => super::resume::run(ctx, args).await,
            Self::Keep(args) => super::keep::run(ctx, args).await,
            Self::Delete(args) => super::delete::run(ctx, args).await,
            Self::Wait(args) => super::wait::run(ctx, args).await,
            Self::Logs(args) => super::logs::run(ctx, args).await,
        }
    }
}
