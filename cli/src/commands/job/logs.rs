//! `krayne jobs logs NAME ID [-f]`.

use futures::StreamExt as _;

use crate::{
    context::Context,
    failure::Failure,
    output::{note, out},
};

/// Print a job's log.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    job: super::JobArgs,
    /// Follow the log as it grows until the job ends.
    #[arg(short, long)]
    follow: bool,
}

pub(crate) async fn run(ctx: &Context, args: Args) -> Result<(), Failure> {
    let super::JobArgs { name, id, namespace } = args.job;
    let namespace = ctx.namespace(namespace.as_deref()).await?;
    let client = ctx.client()?;
    if !args.follow {
        return out(&client.job_logs(&namespace, &name, &id).await?);
    }
    let followed = follow(&client, &namespace, &name, &id).await?;
    if !followed {
        note(&format!(
            "stopped following; job '{id}' keeps running (stop it with `krayne jobs stop {name} {id} -n {namespace}`)"
        ));
    }
    Ok(())
}

/// Prints a job's log to stdout until it ends (true) or Ctrl-C (false).
pub(crate) async fn follow(
    client: &krayne_client::Client,
    namespace: &str,
    name: &str,
    id: &str,
) -> Result<bool, Failure> {
    let mut lines = std::pin::pin!(client.tail_job_logs(namespace, name, id).await?);
    loop {
        tokio::select! {
            chunk = lines.next() => match chunk {
                Some(text) => out(&text?)?,
                None => return Ok(true),
            },
            _ = tokio::signal::ctrl_c() => return Ok(false),
        }
    }
}
