//! `krayne jobs get NAME ID`.

use crate::{context::Context, failure::Failure};

/// Show one job.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    job: super::JobArgs,
}

pub(crate) async fn run(ctx: &Context, args: Args) -> Result<(), Failure> {
    let super::JobArgs { name, id, namespace } = args.job;
    let namespace = ctx.namespace(namespace.as_deref()).await?;
    let job = ctx.client()?.job(&namespace, &name, &id).await?;
    super::print_job(ctx, &job)
}
