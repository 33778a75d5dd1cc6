//! `krayne get [NAME]`.

use futures::TryStreamExt as _;

use crate::{context::Context, failure::Failure, output::note};

/// List clusters in a namespace (or in every namespace you may see), or
/// show one.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Show only this cluster.
    #[arg(conflicts_with = "all_namespaces")]
    name: Option<String>,
    /// Namespace [default: the config file's, or `default`].
    #[arg(short, long, conflicts_with = "all_namespaces")]
    namespace: Option<String>,
    /// Every namespace you may see.
    #[arg(short = 'A', long)]
    all_namespaces: bool,
}

pub(crate) async fn run(ctx: &Context, args: Args) -> Result<(), Failure> {
    let client = ctx.client()?;
    let namespace = ctx.namespace(args.namespace.as_deref());
    if let Some(name) = &args.name {
        let cluster = client.get(&namespace, name).await?;
        return super::print_cluster(ctx, &cluster);
    }
    let scope = (!args.all_namespaces).then_some(namespace.as_str());
    let clusters: Vec<_> = client.list(scope).try_collect().await?;
    if clusters.is_empty() && !ctx.printer.structured() {
        match scope {
            Some(ns) => note(&format!("No clusters in namespace {ns}.")),
            None => note("No clusters in any namespace you may see."),
        }
        return Ok(());
    }
    super::print_clusters(ctx, &clusters)
}
