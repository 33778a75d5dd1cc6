//! `krayne resume NAME [--wait]`.

use std::time::Duration;

use crate::{context::Context, failure::Failure, output::note, parse};

/// Resume a suspended cluster: its pods start again, admitted through the
/// namespace's quota as a create's are.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Cluster name.
    name: String,
    /// Namespace [default: KRAYNE_NAMESPACE, the config file's, or the one you may use].
    #[arg(short, long)]
    namespace: Option<String>,
    /// Wait until it is ready again, showing its status as it changes.
    #[arg(long)]
    wait: bool,
    /// With --wait: give up after this long (300, 90s, 10m; at most 1h).
    #[arg(long, value_parser = parse::duration, default_value = "5m", value_name = "DURATION", requires = "wait")]
    timeout: Duration,
    /// When its pods do not fit the namespace's quota, wait in the
    /// namespace's line instead of failing (with --wait, through the line
    /// and until ready). `--queue=false` fails even where the namespace
    /// queues by default.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    queue: Option<bool>,
}

pub(crate) async fn run(ctx: &Context, args: Args) -> Result<(), Failure> {
    let client = ctx.client()?;
    let namespace = ctx.namespace(args.namespace.as_deref()).await?;
    let cluster = client.resume_with(&namespace, &args.name, args.queue).await?;
    if super::WAITING.contains(&cluster.status.as_str()) {
        note(&format!(
            "cluster {namespace}/{} waits in line for quota: {}",
            args.name,
            super::line_place(&cluster)
        ));
    } else {
        note(&format!(
            "cluster {namespace}/{} resumed: its pods are starting",
            args.name
        ));
    }
    let cluster = if args.wait {
        super::wait_ready(&client, &namespace, &args.name, args.timeout).await?
    } else {
        cluster
    };
    super::print_cluster(ctx, &cluster)
}
