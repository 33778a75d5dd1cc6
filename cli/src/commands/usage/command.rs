//! The `usage` commands as one enum that dispatches itself: a new verb is
//! a variant here and its module beside this file.

use clap::Subcommand;

use crate::{context::Context, failure::Failure};

/// Usage accounting.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Show GPU-, CPU- and memory-hours used, per cluster, person, team or day.
    Usage(super::report::Args),
}

impl Command {
    /// Runs the verb.
    pub(crate) async fn run(self, ctx: &Context) -> Result<(), Failure> {
        match self {
            Self::Usage(args) => super::report::run(ctx, args).await,
        }
    }
}
