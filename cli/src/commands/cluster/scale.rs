//! `krayne scale NAME`.

use krayne_client::Scale;

use crate::{context::Context, failure::Failure, output::note, parse};

/// Resize a worker group. Without autoscaling the group is pinned to
/// --replicas (min and max follow), as Krayne does.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  krayne scale demo --workers 3              # the cluster's only worker group
  krayne scale demo -g gpu -r 2 --max 4      # a cluster with several groups names one")]
#[command(group = clap::ArgGroup::new("size").required(true).multiple(true).args(["replicas", "min", "max"]))]
pub(crate) struct Args {
    /// Cluster name.
    name: String,
    /// Namespace [default: KRAYNE_NAMESPACE, the config file's, or the one you may use].
    #[arg(short, long)]
    namespace: Option<String>,
    /// Worker group [default: the cluster's only one; a cluster with
    /// several needs it named].
    #[arg(short = 'g', long = "group", visible_alias = "worker-group", value_name = "GROUP")]
    group: Option<String>,
    /// Desired workers (`--workers`, as `create` says it).
    #[arg(short, long, visible_alias = "workers", value_name = "N", allow_negative_numbers = true, value_parser = parse::count)]
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
    let group = match args.group {
        Some(group) => group,
        None => only_group(&client, &namespace, &args.name).await?,
    };
    let scale = Scale {
        group: group.clone(),
        replicas: args.replicas,
        min_replicas: args.min,
        max_replicas: args.max,
    };
    let cluster = client.scale(&namespace, &args.name, scale).await?;
    note(&format!("cluster {namespace}/{} group {group} scaled", args.name));
    super::print_cluster(ctx, &cluster)
}

/// The cluster's worker group when it has one; else the choices.
async fn only_group(client: &krayne_client::Client, namespace: &str, name: &str) -> Result<String, Failure> {
    let details = client.describe(namespace, name).await?;
    let names: Vec<&str> = details.worker_groups.iter().map(|g| g.name.as_str()).collect();
    match names.as_slice() {
        [one] => Ok((*one).to_owned()),
        [] => Err(Failure::Usage(format!("cluster {name} has no worker groups to scale"))),
        many => Err(Failure::Usage(format!(
            "cluster {name} has {} worker groups ({}): name one with -g GROUP",
            many.len(),
            many.join(", ")
        ))),
    }
}
