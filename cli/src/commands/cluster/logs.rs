//! `krayne logs NAME`.

use std::time::Duration;

use futures::StreamExt as _;
use krayne_client::{json::to_json, proto::ClusterLogsRequest};

use crate::{
    context::Context,
    failure::Failure,
    output::{note, out},
    parse,
};

/// Print a cluster's pod log: why a cluster is not ready, or crashed.
///
/// A container's output, from the Kubernetes API through the server (no
/// kubeconfig): the head's by default, a worker's (`--worker`, of a
/// group), or a pod of the cluster by name; the Ray container unless
/// `-c` names another (the autoscaler sidecar, an init container). With
/// `--previous`, the crashed container's output: what a crash loop needs.
///
/// With `--ray`, Ray's own log files instead, from the head's dashboard
/// (raylet, GCS, workers, drivers): listed, one read (`--file`), or every
/// one fetched into a directory (`--download`), as `kubectl ray log` does.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  krayne logs demo                        # the head's Ray container
  krayne logs demo --previous --tail 50   # why the head crashed
  krayne logs demo --worker gpu -f        # a worker of group gpu, followed
  krayne logs demo -c autoscaler --since 10m
  krayne logs demo --ray                  # Ray's log files on the head node
  krayne logs demo --ray --file raylet.out --tail 100
  krayne logs demo --ray --download ./logs")]
pub(crate) struct Args {
    /// Cluster name.
    name: String,
    /// Namespace [default: KRAYNE_NAMESPACE, the config file's, or the one you may use].
    #[arg(short, long)]
    namespace: Option<String>,
    /// The head pod (the default).
    #[arg(long, conflicts_with_all = ["worker", "pod"])]
    head: bool,
    /// A worker pod, of GROUP when given.
    #[arg(long, value_name = "GROUP", num_args = 0..=1, default_missing_value = "", conflicts_with = "pod")]
    worker: Option<String>,
    /// A pod of the cluster, by name.
    #[arg(long, value_name = "POD")]
    pod: Option<String>,
    /// The container [default: the Ray container].
    #[arg(short, long, value_name = "CONTAINER")]
    container: Option<String>,
    /// Follow the log as it is written, until the container ends.
    #[arg(short, long)]
    follow: bool,
    /// The previous (crashed) container's log.
    #[arg(long)]
    previous: bool,
    /// Only the last N lines.
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = parse::count)]
    tail: Option<u32>,
    /// Only what was written this long back (90s, 10m, 1h).
    #[arg(long, value_parser = parse::duration, value_name = "DURATION")]
    since: Option<Duration>,
    /// Ray's own log files (from the head's dashboard), not a container's.
    #[arg(long, conflicts_with_all = ["head", "worker", "pod", "container", "previous", "since"])]
    ray: bool,
    /// With --ray: a node id or IP [default: the head node].
    #[arg(long, requires = "ray", value_name = "NODE")]
    node: Option<String>,
    /// With --ray: the file to read (as listed, e.g. raylet.out).
    #[arg(long, requires = "ray", value_name = "FILE")]
    file: Option<String>,
    /// With --ray: fetch every file of the node into DIR/<node IP>/.
    #[arg(long, requires = "ray", conflicts_with_all = ["file", "follow"], value_name = "DIR")]
    download: Option<std::path::PathBuf>,
}

pub(crate) async fn run(ctx: &Context, args: Args) -> Result<(), Failure> {
    let client = ctx.client()?;
    let namespace = ctx.namespace(args.namespace.as_deref()).await?;
    if args.ray {
        return super::ray_logs::run(
            ctx,
            &client,
            &namespace,
            &args.name,
            args.node,
            args.file,
            args.download,
            args.tail,
            args.follow,
        )
        .await;
    }
    let since_seconds = args
        .since
        .map(|d| u32::try_from(d.as_secs().max(1)).unwrap_or(u32::MAX));
    let request = ClusterLogsRequest {
        namespace,
        name: args.name.clone(),
        pod: args.pod.clone().unwrap_or_default(),
        node_type: if args.worker.is_some() {
            "worker".into()
        } else {
            String::new()
        },
        group: args.worker.clone().unwrap_or_default(),
        container: args.container.clone().unwrap_or_default(),
        tail_lines: args.tail,
        since_seconds,
        previous: args.previous,
    };
    if !args.follow {
        let log = client.cluster_logs(request).await?;
        if ctx.printer.structured() {
            return ctx.printer.data(&to_json(&log)?);
        }
        note(&format!("pod {}, container {}", log.pod, log.container));
        return out(&log.text);
    }
    let followed = client.tail_cluster_logs(request).await?;
    note(&format!(
        "pod {}, container {} (following; Ctrl-C stops)",
        followed.pod, followed.container
    ));
    let mut text = std::pin::pin!(followed.text);
    loop {
        tokio::select! {
            chunk = text.next() => match chunk {
                Some(chunk) => out(&chunk?)?,
                None => return Ok(()),
            },
            _ = tokio::signal::ctrl_c() => {
                return Err(Failure::Interrupted("stopped following".into()));
            }
        }
    }
}
