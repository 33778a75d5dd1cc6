//! Jobs with a cluster of their own: `krayne run`, `krayne rayjobs`, and
//! `krayne rayjob get|logs|delete`.

mod command;
pub(crate) mod list;
pub(crate) mod run;

pub(crate) use command::Command;

use comfy_table::Cell;
use futures::StreamExt as _;
use krayne_client::{json::to_json, proto::RayJob};

use crate::{
    context::Context,
    failure::Failure,
    output::{age, note, or_dash, out, time},
};

/// `krayne rayjob …`: one RayJob.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    verb: Verb,
}

#[derive(Debug, clap::Subcommand)]
enum Verb {
    /// Show one RayJob: its state, its cluster's and its job's.
    Get(RayJobArgs),
    /// Print a RayJob's driver log (`-f`: follow it until the job ends);
    /// kept after its cluster is gone.
    Logs(LogsArgs),
    /// Delete a RayJob: its job stops and its cluster goes.
    Delete(RayJobArgs),
}

/// A RayJob, as the verbs name it.
#[derive(Debug, clap::Args)]
pub(crate) struct RayJobArgs {
    /// RayJob name.
    name: String,
    /// Namespace [default: KRAYNE_NAMESPACE, the config file's, or the one you may use].
    #[arg(short, long)]
    namespace: Option<String>,
}

/// `rayjob logs`.
#[derive(Debug, clap::Args)]
pub(crate) struct LogsArgs {
    #[command(flatten)]
    rayjob: RayJobArgs,
    /// Follow the log until the job ends.
    #[arg(short, long)]
    follow: bool,
}

pub(crate) async fn run_verb(ctx: &Context, args: Args) -> Result<(), Failure> {
    let client = ctx.client()?;
    match args.verb {
        Verb::Get(a) => {
            let namespace = ctx.namespace(a.namespace.as_deref()).await?;
            print_rayjob(ctx, &client.rayjob(&namespace, &a.name).await?)
        }
        Verb::Logs(a) => {
            let namespace = ctx.namespace(a.rayjob.namespace.as_deref()).await?;
            if !a.follow {
                return out(&client.rayjob_logs(&namespace, &a.rayjob.name).await?);
            }
            let handle = client.run_handle(&namespace, &a.rayjob.name);
            let mut lines = std::pin::pin!(handle.logs().await?);
            loop {
                tokio::select! {
                    chunk = lines.next() => match chunk {
                        Some(text) => out(&text?)?,
                        None => return Ok(()),
                    },
                    _ = tokio::signal::ctrl_c() => {
                        return Err(Failure::Interrupted("stopped following; the job keeps running".into()));
                    }
                }
            }
        }
        Verb::Delete(a) => {
            let namespace = ctx.namespace(a.namespace.as_deref()).await?;
            client.delete_rayjob(&namespace, &a.name).await?;
            note(&format!(
                "rayjob {namespace}/{} deleted; its cluster goes with it",
                a.name
            ));
            Ok(())
        }
    }
}

/// `succeeded`, `running`, …
pub(crate) fn state(rayjob: &RayJob) -> String {
    rayjob
        .state()
        .as_str_name()
        .trim_start_matches("RUN_STATE_")
        .to_ascii_lowercase()
}

/// Where a waiting RayJob stands: `queued, #2 in line (gpus: needs 4, 0
/// of 8 free)`; its state otherwise. The reason is the server's text,
/// printed escaped.
pub(crate) fn line_place(rayjob: &RayJob) -> String {
    crate::commands::cluster::place_text(&state(rayjob), rayjob.queue_position, rayjob.queue_reason.as_deref())
}

/// RayJobs as a table, or as a JSON/YAML list.
pub(crate) fn print_rayjobs(ctx: &Context, rayjobs: &[RayJob]) -> Result<(), Failure> {
    if ctx.printer.structured() {
        let list = rayjobs.iter().map(to_json).collect::<Result<Vec<_>, _>>()?;
        return ctx.printer.data(&serde_json::Value::Array(list));
    }
    let rows = rayjobs.iter().map(row).collect();
    ctx.printer.table(&COLUMNS, rows)
}

/// The columns of a RayJob's row.
const COLUMNS: [&str; 6] = ["NAME", "STATE", "CLUSTER", "EXIT", "AGE", "ENTRYPOINT"];

/// A RayJob's row, in [`COLUMNS`].
fn row(j: &RayJob) -> Vec<Cell> {
    vec![
        Cell::new(&j.name),
        Cell::new(match j.queue_position {
            Some(place) => format!("{} #{place}", state(j)),
            None => state(j),
        }),
        Cell::new(or_dash((!j.cluster.is_empty()).then_some(j.cluster.as_str()))),
        Cell::new(j.exit_code.map_or_else(|| "-".to_owned(), |c| c.to_string())),
        Cell::new(age(j.created_at.as_ref())),
        Cell::new(&j.entrypoint),
    ]
}

/// One RayJob, field by field.
pub(crate) fn print_rayjob(ctx: &Context, j: &RayJob) -> Result<(), Failure> {
    if ctx.printer.structured() {
        return ctx.printer.data(&to_json(j)?);
    }
    let text = |s: &str| or_dash((!s.is_empty()).then_some(s));
    ctx.printer.fields(&[
        ("Name", j.name.clone()),
        ("Namespace", j.namespace.clone()),
        ("State", line_place(j)),
        ("Entrypoint", j.entrypoint.clone()),
        ("Job id", text(&j.job_id)),
        ("Cluster", text(&j.cluster)),
        ("Cluster status", text(&j.cluster_status)),
        (
            "Exit code",
            j.exit_code.map_or_else(|| "-".to_owned(), |c| c.to_string()),
        ),
        ("KubeRay", text(&j.deployment_status)),
        ("Reason", text(&j.reason)),
        ("Message", text(&j.message)),
        (
            "TTL",
            j.ttl_seconds_after_finished
                .map_or_else(|| "-".to_owned(), |s| format!("{s}s after the job ends")),
        ),
        ("Created", time(j.created_at.as_ref())),
        ("Ended", time(j.ended_at.as_ref())),
        ("Created by", text(&j.created_by)),
    ])
}
