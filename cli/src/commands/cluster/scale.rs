//! `krayne scale NAME`.

use krayne_client::Scale;

use crate::{context::Context, failure::Failure, output::note, parse};

/// Resize a worker group. Without autoscaling the group is pinned to
/// --replicas (min and max follow), as Krayne does.
#[derive(Debug, clap::Args)]
#[command(group = clap::ArgGroup::new("size").required(true).multiple(true).args(["replicas", "min", "max"]))]
pub(crate) struct Args {
    /// Cluster name.
    name: String,
    /// Namespace [default: KRAYNE_NAMESPACE, the config file's, or the one you may use].
    #[arg(short, long)]
    namespace: Option<String>,
    /// Worker group.
    #[arg(
        short = 'g',
        long = "group",
        visible_alias = "worker-group",
        default_value = "worker",
        value_name = "GROUP"
    )]
    group: String,
    /// Desired workers.
    #[arg(short, long, value_name = "N", allow_negative_numbers = true, value_parser = parse::count)]
    replicas: Option<u32>,
    /// Autoscaler lower bound.
    #[arg(long, visible_alias = "min-replicas", value_name = "N", allow_negative_numbers = true, value_parser = parse::count)]
    min: Option<u32>,
    /// Autoscaler upper bound.
    #[arg(long, visible_alias = "max-replicas", value_name = "N", allow_negative_numbers = true, value_parser = parse::count)]
    max: Option<u32>,
}

pub(crate) async fn run(ctx: &Context, args: Args) -> Result<(), Failure> {
    let client = ctx.client()?;
    let namespace = ctx.namespace(args.namespace.as_deref()).await?;
    let scale = Scale {
        group: args.group.clone(),
        replicas: args.replicas,
        min_replicas: args.min,
        max_replicas: args.max,
    };
    let cluster = client.scale(&namespace, &args.name, scale).await?;
    note(&format!(
        "cluster {namespace}/{} group {} scaled",
        args.name, args.group
    ));
    super::print_cluster(ctx, &cluster)
}
