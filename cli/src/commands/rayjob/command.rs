//! The `rayjob` commands as one enum that dispatches itself: a new verb is
//! a variant here and its module beside this file.

use clap::Subcommand;

use crate::{context::Context, failure::Failure};

/// Jobs with a cluster of their own (KubeRay RayJobs).
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Run a command on a fresh cluster, follow its log, exit with its code.
    Run(super::run::Args),
    /// List a namespace's RayJobs.
    Rayjobs(super::list::Args),
    /// One RayJob: get, logs, delete.
    Rayjob(super::Args),
}

impl Command {
    /// Runs the verb.
    pub(crate) async fn run(self, ctx: &Context) -> Result<(), Failure> {
        match self {
            Self::Run(args) => super::run::run(ctx, args).await,
            Self::Rayjobs(args) => super::list::run(ctx, args).await,
            Self::Rayjob(args) => super::run_verb(ctx, args).await,
        }
    }
}
