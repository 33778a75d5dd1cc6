//! `krayne jobs list NAME`.

use crate::{context::Context, failure::Failure};

/// List a cluster's Ray jobs.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Cluster name.
    pub(super) name: String,
    /// Namespace [default: KRAYNE_NAMESPACE, the config file's, or the one you may use].
    #[arg(short, long)]
    pub(super) namespace: Option<String>,
}

pub(crate) async fn run(ctx: &Context, args: Args) -> Result<(), Failure> {
    let namespace = ctx.namespace(args.namespace.as_deref()).await?;
    let jobs = ctx.client()?.jobs(&namespace, &args.name).await?;
    super::print_jobs(ctx, &jobs)
}
