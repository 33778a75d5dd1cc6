//! Cluster lifecycle commands and how clusters are shown.

mod command;
pub(crate) mod create;
pub(crate) mod delete;
pub(crate) mod describe;
pub(crate) mod get;
pub(crate) mod keep;
pub(crate) mod logs;
mod ray_logs;
pub(crate) mod resume;
pub(crate) mod scale;
pub(crate) mod suspend;
pub(crate) mod wait;

pub(crate) use command::Command;

use std::{io::IsTerminal as _, time::Duration};

use comfy_table::Cell;
use futures::TryStreamExt as _;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use krayne_client::{Client, json::to_json, proto::ClusterInfo};
use serde_json::Value;

use crate::{
    context::Context,
    failure::Failure,
    output::{age, note, or_dash},
};

/// Clusters as a table (one row each) or as a JSON/YAML list.
pub(crate) fn print_clusters(ctx: &Context, clusters: &[ClusterInfo]) -> Result<(), Failure> {
    let p = &ctx.printer;
    if p.structured() {
        let items = clusters.iter().map(to_json).collect::<Result<Vec<_>, _>>()?;
        return p.data(&Value::Array(items));
    }
    let sites = several_sites(clusters.iter());
    p.table(&header(p, sites), clusters.iter().map(|c| row(ctx, c, sites)).collect())
}

/// Whether a SITE column says where clusters live: when any is in a site
/// other than `local` (the server fronts several; docs/sites.md).
fn several_sites<'a>(mut clusters: impl Iterator<Item = &'a ClusterInfo>) -> bool {
    clusters.any(|c| !c.site.is_empty() && c.site != "local")
}

/// What a watch printed so far: its columns' widths, and each cluster's
/// last row (without its age), so that a change that changes nothing
/// shown is not printed again.
#[derive(Default)]
pub(crate) struct Watched {
    widths: Vec<u16>,
    last: std::collections::HashMap<(String, String), Vec<String>>,
    header_printed: bool,
    /// Whether rows carry a SITE column, decided with the first rows.
    sites: Option<bool>,
}

/// Changes a watch saw, each row led by its event, in the columns of the
/// rows before; the header with the first rows.
pub(crate) fn print_watched(ctx: &Context, events: &[(&str, ClusterInfo)], seen: &mut Watched) -> Result<(), Failure> {
    let p = &ctx.printer;
    let mut rows = Vec::new();
    let sites = *seen
        .sites
        .get_or_insert_with(|| several_sites(events.iter().map(|(_, c)| c)));
    for (kind, c) in events {
        let cells = row(ctx, c, sites);
        let key = (c.namespace.clone(), c.name.clone());
        let shown: Vec<String> = cells
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != AGE_COLUMN)
            .map(|(_, cell)| cell.content())
            .collect();
        if *kind == "DELETED" {
            seen.last.remove(&key);
        } else if seen.last.get(&key) == Some(&shown) && *kind == "MODIFIED" {
            continue;
        } else {
            seen.last.insert(key, shown);
        }
        let mut r = vec![Cell::new(kind)];
        r.extend(cells);
        rows.push(r);
    }
    if rows.is_empty() {
        return Ok(());
    }
    let mut with_event = vec!["EVENT"];
    with_event.extend(header(p, sites));
    if seen.widths.is_empty() {
        // Room from the start for the longest event and status, so that
        // later rows need not push the columns right.
        seen.widths = vec![0; with_event.len()];
        seen.widths[0] = 8;
        seen.widths[STATUS_COLUMN + 1] = 19;
    }
    let header = (!seen.header_printed).then_some(with_event.as_slice());
    seen.header_printed = true;
    p.rows_in(header, rows, &mut seen.widths)
}

/// Where STATUS and AGE are in [`header`].
const STATUS_COLUMN: usize = 2;
const AGE_COLUMN: usize = 4;

/// A watch event as `-o json` prints it: one object per line.
pub(crate) fn watch_event_json(event: &krayne_client::proto::WatchClustersResponse) -> Result<Value, Failure> {
    let cluster = event.cluster.as_ref().map(to_json).transpose()?;
    Ok(serde_json::json!({
        "type": krayne_client::event_type_name(event),
        "resource_version": event.resource_version,
        "cluster": cluster,
    }))
}

fn header(p: &crate::output::Printer, sites: bool) -> Vec<&'static str> {
    let mut header = vec!["NAME", "NAMESPACE", "STATUS", "WORKERS", "AGE"];
    if sites {
        header.push("SITE");
    }
    if p.wide() {
        header.extend(["AUTOSCALING", "HEAD-IP", "DASHBOARD", "CREATED-BY"]);
    }
    header
}

fn row(ctx: &Context, c: &ClusterInfo, sites: bool) -> Vec<Cell> {
    let p = &ctx.printer;
    {
        {
            let mut row = vec![
                Cell::new(&c.name),
                Cell::new(&c.namespace),
                match c.queue_position.filter(|_| WAITING.contains(&c.status.as_str())) {
                    Some(place) => p.status_as(&c.status, &format!("{} #{place}", c.status)),
                    None => p.status(&c.status),
                },
                Cell::new(format!("{}/{}", c.ready_workers, c.num_workers)),
                Cell::new(age(c.created_at.as_ref())),
            ];
            if sites {
                row.push(Cell::new(match &c.site_unavailable_since {
                    Some(_) => format!("{} (unavailable)", crate::output::printable(&c.site, false)),
                    None => crate::output::printable(&c.site, false).into_owned(),
                }));
            }
            if p.wide() {
                row.extend([
                    Cell::new(if c.autoscaling_enabled { "on" } else { "off" }),
                    Cell::new(or_dash(c.head_ip.as_deref())),
                    Cell::new(match (&c.dashboard_url, ctx.server()) {
                        (Some(_), Ok(server)) => {
                            crate::commands::service::access(&server, &c.namespace, &c.name, "dashboard", None)
                        }
                        _ => "-".to_owned(),
                    }),
                    Cell::new(or_dash(c.created_by.as_deref())),
                ]);
            }
            row
        }
    }
}

/// One cluster: a one-row table, or a JSON/YAML object.
pub(crate) fn print_cluster(ctx: &Context, cluster: &ClusterInfo) -> Result<(), Failure> {
    if ctx.printer.structured() {
        return ctx.printer.data(&to_json(cluster)?);
    }
    print_clusters(ctx, std::slice::from_ref(cluster))
}

/// Statuses that mean the head is not running: its workers' count says
/// nothing then (they wait for it).
pub(crate) const HEAD_DOWN: [&str; 4] = ["image-pull-error", "crash-loop", "unschedulable", "pods-failed"];

/// One step of a wait, as shown.
fn progress(namespace: &str, name: &str, info: &ClusterInfo) -> String {
    if WAITING.contains(&info.status.as_str()) {
        return format!("{namespace}/{name}: {}", line_place(info));
    }
    if HEAD_DOWN.contains(&info.status.as_str()) {
        format!("{namespace}/{name}: {} (the head is not running)", info.status)
    } else {
        format!(
            "{namespace}/{name}: {} ({}/{} workers ready)",
            info.status, info.ready_workers, info.num_workers
        )
    }
}

/// Statuses of a cluster waiting in line (krayne's or Kueue's): its place
/// and reason say more.
pub(crate) const WAITING: [&str; 3] = ["queued", "preempted", "evicted"];

/// Where a waiting cluster stands: `queued, #2 in line (gpus: needs 4, 0
/// of 8 free)`. The reason is the server's text, printed escaped.
pub(crate) fn line_place(info: &ClusterInfo) -> String {
    place_text(&info.status, info.queue_position, info.queue_reason.as_deref())
}

/// `status, #N in line (reason)`, the reason escaped (a cluster's or a
/// RayJob's).
pub(crate) fn place_text(status: &str, position: Option<u32>, reason: Option<&str>) -> String {
    let place = position.map(|p| format!(", #{p} in line")).unwrap_or_default();
    let why = reason
        .map(|r| format!(" ({})", crate::output::printable(r, false)))
        .unwrap_or_default();
    format!("{status}{place}{why}")
}

/// Waits for `ready` on the WaitCluster stream, showing the status and the
/// time spent: a spinner on a terminal, one line per change otherwise.
pub(crate) async fn wait_ready(
    client: &Client,
    namespace: &str,
    name: &str,
    timeout: Duration,
) -> Result<ClusterInfo, Failure> {
    let tty = std::io::stderr().is_terminal();
    let spinner = if tty {
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        let style =
            ProgressStyle::with_template("{spinner} [{elapsed}] {msg}").map_err(|e| Failure::Other(e.to_string()))?;
        bar.set_style(style);
        bar.set_message(format!("waiting for {namespace}/{name}"));
        bar.enable_steady_tick(Duration::from_millis(120));
        bar
    } else {
        ProgressBar::hidden()
    };
    let started = std::time::Instant::now();
    let result = async {
        let mut stream = std::pin::pin!(client.watch(namespace, name, timeout).await?);
        let mut last: Option<ClusterInfo> = None;
        while let Some(info) = stream.try_next().await? {
            let message = progress(namespace, name, &info);
            if tty {
                spinner.set_message(message);
            } else if last
                .as_ref()
                .is_none_or(|l| l.status != info.status || l.queue_position != info.queue_position)
            {
                note(&format!("[{:>4}s] {message}", started.elapsed().as_secs()));
            }
            last = Some(info);
        }
        Ok::<_, Failure>(last)
    }
    .await;
    spinner.finish_and_clear();
    let result = result.map_err(|failure| match failure {
        Failure::Client(e) if e.code() == krayne_client::Code::FailedPrecondition => Failure::Hinted(
            e,
            format!(
                "`krayne describe {name} -n {namespace}` shows its events, \
                 `krayne logs {name} -n {namespace}` the head's log"
            ),
        ),
        other => other,
    });
    match result? {
        Some(info) if info.status == "ready" => {
            note(&format!(
                "cluster {namespace}/{name} is ready after {}s",
                started.elapsed().as_secs()
            ));
            Ok(info)
        }
        _ => Err(Failure::Other(format!(
            "the wait for {namespace}/{name} ended before it was ready"
        ))),
    }
}
