//! `krayne rayjobs`.

use crate::{context::Context, failure::Failure};

/// List a namespace's RayJobs.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Namespace [default: KRAYNE_NAMESPACE, the config file's, or the one you may use].
    #[arg(short, long)]
    pub(crate) namespace: Option<String>,
}

pub(crate) async fn run(ctx: &Context, args: Args) -> Result<(), Failure> {
    let namespace = ctx.namespace(args.namespace.as_deref()).await?;
    let rayjobs = ctx.client()?.rayjobs(&namespace).await?;
    super::print_rayjobs(ctx, &rayjobs)
}
