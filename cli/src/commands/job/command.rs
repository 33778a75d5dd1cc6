//! The `job` commands as one enum that dispatches itself: a new verb is
//! a variant here and its module beside this file.

use clap::Subcommand;

use crate::{context::Context, failure::Failure};

/// Ray jobs on a cluster: submit one, list and manage them.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Run a command on a cluster as a Ray job and follow its log.
    Submit(super::submit::Args),
    /// A cluster's Ray jobs: list, get, logs, stop, delete.
    Jobs(super::Args),
}

impl Command {
    /// Runs the verb.
    pub(crate) async fn run(self, ctx: &Context) -> Result<(), Failure> {
        match self {
            Self::Submit(args) => super::submit::run(ctx, args).await,
            Self::Jobs(args) => super::run(ctx, args).await,
        }
    }
}
