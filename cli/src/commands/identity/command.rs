//! The `identity` commands as one enum that dispatches itself: a new verb is
//! a variant here and its module beside this file.

use clap::Subcommand;

use crate::{context::Context, failure::Failure};

/// Who you are, where you may work, and your team's quota.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Show who the server thinks you are and what you may do.
    Whoami(super::whoami::Args),
    /// List the namespaces you may use, with your role in each.
    Namespaces(super::namespaces::Args),
    /// Show a namespace's team quota: limits, usage and what remains.
    Quota(super::quota::Args),
}

impl Command {
    /// Runs the verb.
    pub(crate) async fn run(self, ctx: &Context) -> Result<(), Failure> {
        match self {
            Self::Whoami(args) => super::whoami::run(ctx, args).await,
            Self::Namespaces(args) => super::namespaces::run(ctx, args).await,
            Self::Quota(args) => super::quota::run(ctx, args).await,
        }
    }
}
