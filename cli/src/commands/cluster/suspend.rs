//! `krayne suspend NAME`.

use crate::{context::Context, failure::Failure, output::note};

/// Suspend a cluster: its pods are deleted, the cluster is kept (its
/// config, its name) and holds no CPUs, memory or GPUs of the quota.
/// `krayne resume NAME` brings it back.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Cluster name.
    name: String,
    /// Namespace [default: KRAYNE_NAMESPACE, the config file's, or the one you may use].
    #[arg(short, long)]
    namespace: Option<String>,
}

pub(crate) async fn run(ctx: &Context, args: Args) -> Result<(), Failure> {
    let client = ctx.client()?;
    let namespace = ctx.namespace(args.namespace.as_deref()).await?;
    warn_of_jobs(&client, &namespace, &args.name).await;
    let cluster = client.suspend(&namespace, &args.name).await?;
    note(&format!(
        "cluster {namespace}/{} suspended: its pods are going; `krayne resume {}` brings them back",
        args.name, args.name
    ));
    super::print_cluster(ctx, &cluster)
}

/// Ray keeps its jobs in the head: suspending (deleting the pods) loses
/// their history and logs, and stops running ones. Said first, when the
/// cluster has any; a head that does not answer quickly is not waited for.
async fn warn_of_jobs(client: &krayne_client::Client, namespace: &str, name: &str) {
    let listed = tokio::time::timeout(std::time::Duration::from_secs(5), client.jobs(namespace, name)).await;
    let Ok(Ok(jobs)) = listed else { return };
    if jobs.is_empty() {
        return;
    }
    let running = jobs.iter().filter(|j| !krayne_client::is_terminal(j)).count();
    let running = match running {
        0 => String::new(),
        n => format!(", {n} still running, which stop"),
    };
    note(&format!(
        "Warning: cluster {name} has {} Ray job{}{running}: suspending deletes its head, and Ray's job history \
         and logs go with it (`krayne jobs logs {name} ID > FILE` keeps a log first)",
        jobs.len(),
        if jobs.len() == 1 { "" } else { "s" }
    ));
}
