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
    /// Namespace [default: KRAYNE_NAMESPACE, the config file's, or the one you may use].
    #[arg(short, long, conflicts_with = "all_namespaces")]
    namespace: Option<String>,
    /// Every namespace you may see.
    #[arg(short = 'A', long)]
    all_namespaces: bool,
    /// After listing, print each change as it happens (an EVENT column
    /// says which: ADDED, MODIFIED, DELETED), until interrupted. With
    /// `-o json`, one event per line.
    #[arg(short, long, conflicts_with = "name")]
    watch: bool,
}

pub(crate) async fn run(ctx: &Context, args: Args) -> Result<(), Failure> {
    let client = ctx.client()?;
    // Every namespace needs no namespace of one's own.
    let namespace = match args.all_namespaces {
        true => None,
        false => Some(ctx.namespace(args.namespace.as_deref()).await?),
    };
    if let (Some(name), Some(namespace)) = (&args.name, &namespace) {
        let cluster = client.get(namespace, name).await?;
        return super::print_cluster(ctx, &cluster);
    }
    let scope = namespace.as_deref();
    if args.watch {
        return watch(ctx, &client, scope).await;
    }
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

/// The clusters now, then each change, kubectl style.
async fn watch(ctx: &Context, client: &krayne_client::Client, scope: Option<&str>) -> Result<(), Failure> {
    use futures::StreamExt as _;
    let from = krayne_client::WatchFrom {
        send_initial_events: true,
        ..Default::default()
    };
    let mut events = std::pin::pin!(client.watch_clusters(scope, from).await?);
    let mut initial = Vec::new();
    let mut listed = false;
    let mut seen = super::Watched::default();
    while let Some(event) = events.next().await {
        let event = event?;
        let kind = krayne_client::event_type_name(&event);
        if ctx.printer.structured() {
            if kind != "BOOKMARK" {
                let line = super::watch_event_json(&event)?.to_string();
                crate::output::out(&(line + "\n"))?;
            }
            continue;
        }
        match (kind, event.cluster) {
            ("BOOKMARK", _) if !listed => {
                listed = true;
                if initial.is_empty() {
                    match scope {
                        Some(ns) => note(&format!("No clusters in namespace {ns} yet; watching for changes.")),
                        None => note("No clusters in any namespace you may see yet; watching for changes."),
                    }
                } else {
                    super::print_watched(ctx, &initial, &mut seen)?;
                }
                initial.clear();
            }
            (_, Some(cluster)) if !listed => initial.push((kind, cluster)),
            (_, Some(cluster)) => super::print_watched(ctx, &[(kind, cluster)], &mut seen)?,
            (_, None) => {}
        }
    }
    Ok(())
}
