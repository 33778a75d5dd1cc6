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
    let cluster = client.suspend(&namespace, &args.name).await?;
    note(&format!(
        "cluster {namespace}/{} suspended: its pods are going; `krayne resume {}` brings them back",
        args.name, args.name
    ));
    super::print_cluster(ctx, &cluster)
}
