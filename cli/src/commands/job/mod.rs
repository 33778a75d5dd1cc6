//! Ray jobs on a cluster: `krayne submit`, and `krayne jobs list|get|logs|stop|delete`.

mod command;
pub(crate) mod delete;
pub(crate) mod get;
pub(crate) mod list;
pub(crate) mod logs;
pub(crate) mod stop;
pub(crate) mod submit;

pub(crate) use command::Command;

use comfy_table::Cell;
use krayne_client::{json::to_json, proto::Job};

use crate::{
    context::Context,
    failure::Failure,
    output::{age, or_dash, time},
};

/// `krayne jobs …`: a cluster's Ray jobs. `krayne jobs NAME` lists them.
#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub(crate) struct Args {
    #[command(subcommand)]
    verb: Option<Verb>,
    /// Cluster name: `krayne jobs NAME` lists its jobs (`jobs list NAME`).
    name: Option<String>,
    /// Namespace [default: KRAYNE_NAMESPACE, the config file's, or the one you may use].
    #[arg(short, long)]
    namespace: Option<String>,
}

#[derive(Debug, clap::Subcommand)]
enum Verb {
    /// List a cluster's jobs.
    #[command(visible_alias = "ls")]
    List(list::Args),
    /// Show one job.
    Get(get::Args),
    /// Print a job's log (`-f`: follow it until the job ends).
    Logs(logs::Args),
    /// Stop a running job.
    Stop(stop::Args),
    /// Delete a job that has ended, with its log.
    Delete(delete::Args),
}

pub(crate) async fn run(ctx: &Context, args: Args) -> Result<(), Failure> {
    let verb = match (args.verb, args.name) {
        (Some(verb), _) => verb,
        (None, Some(name)) => Verb::List(list::Args {
            name,
            namespace: args.namespace,
        }),
        (None, None) => {
            return Err(Failure::Usage(
                "give a cluster: `krayne jobs NAME` lists its jobs; or a verb: list, get, logs, stop, delete".into(),
            ));
        }
    };
    match verb {
        Verb::List(a) => list::run(ctx, a).await,
        Verb::Get(a) => get::run(ctx, a).await,
        Verb::Logs(a) => logs::run(ctx, a).await,
        Verb::Stop(a) => stop::run(ctx, a).await,
        Verb::Delete(a) => delete::run(ctx, a).await,
    }
}

/// `SUCCEEDED`, `FAILED`, …
pub(crate) fn status(job: &Job) -> &'static str {
    job.status().as_str_name().trim_start_matches("JOB_STATUS_")
}

/// How a followed job ended, once its log has: its final state (Ray
/// settles it shortly after the log ends), `Ok` when it succeeded, else
/// the failure `submit` and `jobs logs -f` exit 1 with.
pub(crate) async fn ended(
    client: &krayne_client::Client,
    namespace: &str,
    name: &str,
    id: &str,
) -> Result<(Job, Result<(), Failure>), Failure> {
    let job = client
        .wait_job(namespace, name, id, std::time::Duration::from_secs(30))
        .await?;
    let outcome = match job.status() {
        krayne_client::proto::JobStatus::Succeeded => {
            crate::output::note(&format!("job '{id}' succeeded"));
            Ok(())
        }
        _ => Err(Failure::Other(format!(
            "job '{id}' {}: {}",
            status(&job),
            summary(&job.message)
        ))),
    };
    Ok((job, outcome))
}

/// Ray's failure message without the log it repeats (the log was just
/// followed above): its first line, up to "last available logs".
pub(crate) fn summary(message: &str) -> String {
    let first = message.lines().next().unwrap_or_default();
    let cut = first.find(", last available logs").map_or(first, |at| &first[..at]);
    let cut = cut.trim_end_matches([':', ' ']);
    if cut.len() < first.len() {
        format!("{cut} (its log is above)")
    } else {
        cut.to_owned()
    }
}

/// Jobs as a table, or as a JSON/YAML list.
pub(crate) fn print_jobs(ctx: &Context, jobs: &[Job]) -> Result<(), Failure> {
    if ctx.printer.structured() {
        let list = jobs.iter().map(to_json).collect::<Result<Vec<_>, _>>()?;
        return ctx.printer.data(&serde_json::Value::Array(list));
    }
    let rows = jobs
        .iter()
        .map(|j| {
            vec![
                Cell::new(&j.id),
                ctx.printer.job_status(status(j)),
                Cell::new(age(j.start_time.as_ref())),
                Cell::new(j.driver_exit_code.map_or_else(|| "-".to_owned(), |c| c.to_string())),
                Cell::new(&j.entrypoint),
            ]
        })
        .collect();
    ctx.printer.table(&["ID", "STATUS", "AGE", "EXIT", "ENTRYPOINT"], rows)
}

/// One job, field by field.
pub(crate) fn print_job(ctx: &Context, job: &Job) -> Result<(), Failure> {
    if ctx.printer.structured() {
        return ctx.printer.data(&to_json(job)?);
    }
    let metadata: Vec<String> = job.metadata.iter().map(|(k, v)| format!("{k}={v}")).collect();
    ctx.printer.fields(&[
        ("ID", job.id.clone()),
        ("Status", status(job).to_owned()),
        ("Entrypoint", job.entrypoint.clone()),
        (
            "Message",
            or_dash((!job.message.is_empty()).then_some(job.message.as_str())),
        ),
        (
            "Error type",
            or_dash((!job.error_type.is_empty()).then_some(job.error_type.as_str())),
        ),
        (
            "Exit code",
            job.driver_exit_code.map_or_else(|| "-".to_owned(), |c| c.to_string()),
        ),
        ("Started", time(job.start_time.as_ref())),
        ("Ended", time(job.end_time.as_ref())),
        (
            "Metadata",
            or_dash((!metadata.is_empty()).then(|| metadata.join(", ")).as_deref()),
        ),
    ])
}

/// A job of a cluster, as the verbs name it.
#[derive(Debug, clap::Args)]
pub(crate) struct JobArgs {
    /// Cluster name.
    pub(crate) name: String,
    /// The job's id (its submission id).
    pub(crate) id: String,
    /// Namespace [default: KRAYNE_NAMESPACE, the config file's, or the one you may use].
    #[arg(short, long)]
    pub(crate) namespace: Option<String>,
}
