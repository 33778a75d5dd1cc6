//! `krayne wait NAME`.

use std::time::Duration;

use crate::{context::Context, failure::Failure, parse};

/// Wait until a cluster is ready, showing its status as it changes.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Cluster name.
    name: String,
    /// Namespace [default: KRAYNE_NAMESPACE, the config file's, or the one you may use].
    #[arg(short, long)]
    namespace: Option<String>,
    /// Give up after this long (300, 90s, 10m; at most 1h).
    #[arg(long, value_parser = parse::duration, default_value = "5m", value_name = "DURATION")]
    timeout: Duration,
}

pub(crate) async fn run(ctx: &Context, args: Args) -> Result<(), Failure> {
    let client = ctx.client()?;
    let namespace = ctx.namespace(args.namespace.as_deref()).await?;
    let cluster = super::wait_ready(&client, &namespace, &args.name, args.timeout).await?;
    super::print_cluster(ctx, &cluster)
}
