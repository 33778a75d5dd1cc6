//! `krayne jobs delete NAME ID`.

use serde_json::json;

use crate::{context::Context, failure::Failure, output::note};

/// Delete a job that has ended, with its log (stop a running one first).
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    job: super::JobArgs,
}

pub(crate) async fn run(ctx: &Context, args: Args) -> Result<(), Failure> {
    let super::JobArgs { name, id, namespace } = args.job;
    let namespace = ctx.namespace(namespace.as_deref()).await?;
    ctx.client()?.delete_job(&namespace, &name, &id).await?;
    note(&format!("job '{id}' deleted"));
    if ctx.printer.structured() {
        return ctx.printer.data(&json!({"id": id, "deleted": true}));
    }
    Ok(())
}
