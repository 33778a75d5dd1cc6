//! The `audit` commands as one enum that dispatches itself: a new verb is
//! a variant here and its module beside this file.

use clap::Subcommand;

use crate::{context::Context, failure::Failure};

/// The audit log.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Query the audit log.
    Audit(super::list::Args),
}

impl Command {
    /// Runs the verb.
    pub(crate) async fn run(self, ctx: &Context) -> Result<(), Failure> {
        match self {
            Self::Audit(args) => super::list::run(ctx, args).await,
        }
    }
}
