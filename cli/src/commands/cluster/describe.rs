//! `krayne describe NAME`.

use comfy_table::Cell;
use krayne_client::{json::to_json, proto::ClusterDetails};

use crate::{
    commands::service::access,
    context::Context,
    failure::Failure,
    output::{age, age_at, lifecycle_countdown, or_dash, out, time},
};

/// Show a cluster's summary, shape, pods, conditions and recent events.
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
    let details = client.describe(&namespace, &args.name).await?;
    if ctx.printer.structured() {
        return ctx.printer.data(&to_json(&details)?);
    }
    print(ctx, &details)?;
    let status = details.info.as_ref().map(|i| i.status.as_str()).unwrap_or_default();
    if !matches!(status, "ready" | "suspended" | "suspending") {
        head_lines(&client, &namespace, &args.name).await?;
    }
    Ok(())
}

/// How many of the head's last lines a cluster that is not ready shows.
const HEAD_LINES: u32 = 20;

/// The head's last lines, for a cluster that is not ready: the crashed
/// container's when there is one (a crash loop), else the running one's;
/// or where to look when there is no log yet.
async fn head_lines(client: &krayne_client::Client, namespace: &str, name: &str) -> Result<(), Failure> {
    let read = client.head_last_lines(namespace, name, HEAD_LINES).await;
    let (log, which) = match read {
        Ok((log, true)) => (Ok(log), "--previous"),
        Ok((log, false)) => (Ok(log), ""),
        Err(e) => (Err(e), ""),
    };
    match log {
        Ok(log) if !log.text.trim().is_empty() => {
            let how = format!("krayne logs {name} -n {namespace} {which}");
            out(&format!(
                "\nHead's last lines ({} of {}; all of them: {}):\n",
                if which.is_empty() {
                    "container"
                } else {
                    "crashed container"
                },
                log.pod,
                how.trim_end()
            ))?;
            out(&indent(&log.text))
        }
        Ok(_) => out("\nHead's log: empty so far.\n"),
        Err(e) => out(&format!(
            "\nHead's log: none to show ({}); see the pods and events above.\n",
            e.message()
        )),
    }
}

/// Each line two spaces in.
fn indent(text: &str) -> String {
    text.lines().map(|l| format!("  {l}\n")).collect()
}

fn print(ctx: &Context, d: &ClusterDetails) -> Result<(), Failure> {
    let p = &ctx.printer;
    let info = d.info.clone().unwrap_or_default();
    let head = d.head.clone().unwrap_or_default();
    let mut fields = vec![
        ("Name", info.name.clone()),
        ("Namespace", info.namespace.clone()),
        ("Status", info.status.clone()),
        ("Workers", format!("{}/{} ready", info.ready_workers, info.num_workers)),
        (
            "Autoscaling",
            if info.autoscaling_enabled { "on" } else { "off" }.to_owned(),
        ),
        (
            "Created",
            format!(
                "{} ({} ago)",
                time(info.created_at.as_ref()),
                age(info.created_at.as_ref())
            ),
        ),
        ("Created by", or_dash(info.created_by.as_deref())),
        ("Ray version", d.ray_version.clone()),
        (
            "Head",
            format!(
                "{} CPU, {} memory, {} GPU, image {}{}",
                head.cpus,
                head.memory,
                head.gpus,
                head.image,
                if head.runs_tasks { ", runs tasks" } else { "" }
            ),
        ),
        ("Services", d.services.join(", ")),
    ];
    // The lifecycle policy: what will happen to it, when, why; since when
    // it is idle; until when it is kept.
    let now = jiff::Timestamp::now();
    let mut lifecycle = Vec::new();
    if let Some(plan) = &info.lifecycle {
        let mut line = lifecycle_countdown(&info, now).map_or_else(|| plan.clone(), |c| format!("{c}: {plan}"));
        if info.lifecycle_warned_at.is_some() {
            line.push_str(&format!(" (warned {})", time(info.lifecycle_warned_at.as_ref())));
        }
        lifecycle.push(("Lifecycle", line));
    }
    if let Some(since) = &info.idle_since {
        lifecycle.push((
            "Idle since",
            format!("{} ({})", time(Some(since)), age_at(Some(since), now)),
        ));
    }
    if let Some(until) = &info.kept_until {
        lifecycle.push(("Kept until", time(Some(until))));
    }
    for (i, field) in lifecycle.into_iter().enumerate() {
        fields.insert(3 + i, field);
    }
    // Through the server: the pod IPs below reach nothing from outside
    // the cluster.
    let server = ctx.server()?;
    let mut in_cluster = Vec::new();
    for (label, service, url) in [
        ("Dashboard", "dashboard", &info.dashboard_url),
        ("Ray client", "client", &info.client_url),
        ("Notebook", "notebook", &info.notebook_url),
        ("Code server", "code-server", &info.code_server_url),
        ("SSH", "ssh", &info.ssh_url),
    ] {
        if d.services.iter().any(|s| s == service) {
            let given = d.proxy_urls.get(service).map(String::as_str);
            fields.push((label, access(&server, &info.namespace, &info.name, service, given)));
        }
        if let Some(url) = url {
            in_cluster.push(url.clone());
        }
    }
    if !in_cluster.is_empty() {
        fields.push(("In-cluster", in_cluster.join(", ")));
    }
    p.fields(&fields)?;

    out("\nWorker groups:\n")?;
    let rows = d
        .worker_groups
        .iter()
        .map(|g| {
            vec![
                Cell::new(&g.name),
                Cell::new(g.replicas),
                Cell::new(g.min_replicas),
                Cell::new(g.max_replicas),
                Cell::new(&g.cpus),
                Cell::new(&g.memory),
                Cell::new(g.gpus),
                Cell::new(&g.image),
            ]
        })
        .collect();
    p.table(
        &["NAME", "REPLICAS", "MIN", "MAX", "CPUS", "MEMORY", "GPUS", "IMAGE"],
        rows,
    )?;

    out("\nPods:\n")?;
    let rows = d
        .pods
        .iter()
        .map(|pod| {
            vec![
                Cell::new(&pod.name),
                Cell::new(if pod.group.is_empty() {
                    &pod.node_type
                } else {
                    &pod.group
                }),
                Cell::new(&pod.phase),
                Cell::new(if pod.ready { "yes" } else { "no" }),
                Cell::new(pod.restarts),
                Cell::new(or_dash(pod.reason.as_deref())),
                Cell::new(or_dash(pod.pod_ip.as_deref())),
                Cell::new(or_dash(pod.node_name.as_deref())),
            ]
        })
        .collect();
    p.table(
        &["NAME", "GROUP", "PHASE", "READY", "RESTARTS", "REASON", "IP", "NODE"],
        rows,
    )?;

    if !d.conditions.is_empty() {
        out("\nConditions:\n")?;
        let rows = d
            .conditions
            .iter()
            .map(|c| {
                vec![
                    Cell::new(&c.r#type),
                    Cell::new(&c.status),
                    Cell::new(or_dash(c.reason.as_deref())),
                    Cell::new(or_dash(c.message.as_deref())),
                ]
            })
            .collect();
        p.table(&["TYPE", "STATUS", "REASON", "MESSAGE"], rows)?;
    }

    out("\nEvents:\n")?;
    if d.events.is_empty() {
        return out("  <none>\n");
    }
    let rows = d
        .events
        .iter()
        .map(|e| {
            vec![
                Cell::new(age(e.last_seen.as_ref())),
                Cell::new(&e.r#type),
                Cell::new(&e.reason),
                Cell::new(format!("{}/{}", e.object_kind, e.object_name)),
                Cell::new(&e.message),
            ]
        })
        .collect();
    p.table(&["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"], rows)
}
