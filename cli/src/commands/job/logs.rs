//! `krayne jobs logs NAME ID [-f]`.

use futures::StreamExt as _;

use crate::{context::Context, failure::Failure, output::out};

/// Print a job's log. With `-f` it ends as `submit` does: the job's
/// status on stderr, exit 0 when it succeeded, 1 otherwise (130 on
/// Ctrl-C, which stops following, not the job).
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
        let logs = client.job_logs(&namespace, &name, &id).await?;
        if ctx.printer.structured() {
            return ctx.printer.data(&serde_json::json!({"id": id, "logs": logs}));
        }
        return out(&logs);
    }
    // A followed log is text as it comes (with -o json too: it has no end
    // to wrap).
    if !follow(&client, &namespace, &name, &id, false).await? {
        return Err(Failure::Interrupted(format!(
            "stopped following; job '{id}' keeps running (stop it with `krayne jobs stop {name} {id} -n {namespace}`)"
        )));
    }
    // As `submit` ends: the job's status, and its exit.
    super::ended(&client, &namespace, &name, &id).await?.1
}

/// Prints a job's log until it ends (true) or Ctrl-C (false): to
/// stdout, or to stderr when stdout is kept for data (`submit -o json`).
pub(crate) async fn follow(
    client: &krayne_client::Client,
    namespace: &str,
    name: &str,
    id: &str,
    to_stderr: bool,
) -> Result<bool, Failure> {
    let mut lines = std::pin::pin!(client.tail_job_logs(namespace, name, id).await?);
    loop {
        tokio::select! {
            chunk = lines.next() => match chunk {
                Some(text) if to_stderr => {
                    use std::io::Write as _;
                    let _ = std::io::stderr().write_all(text?.as_bytes());
                }
                Some(text) => out(&text?)?,
                None => return Ok(true),
            },
            _ = tokio::signal::ctrl_c() => return Ok(false),
        }
    }
}
