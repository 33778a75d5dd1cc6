//! `krayne jobs stop NAME ID`.

use crate::{context::Context, failure::Failure, output::note};

/// Stop a running job (Ray sends SIGTERM, then SIGKILL).
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    job: super::JobArgs,
}

pub(crate) async fn run(ctx: &Context, args: Args) -> Result<(), Failure> {
    let super::JobArgs { name, id, namespace } = args.job;
    let namespace = ctx.namespace(namespace.as_deref()).await?;
    let stopped = ctx.client()?.stop_job(&namespace, &name, &id).await?;
    if stopped.stopped {
        note(&format!("job '{id}' is stopping"));
    } else {
        note(&format!("job '{id}' had already ended"));
    }
    match &stopped.job {
        Some(job) if ctx.printer.structured() => super::print_job(ctx, job),
        _ => Ok(()),
    }
}
