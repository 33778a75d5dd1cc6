//! `krayne submit NAME -- ENTRYPOINT...`.

use std::{io::IsTerminal as _, path::PathBuf};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use krayne_client::{SubmitJob, package::PackOptions};

use crate::{
    context::Context,
    failure::Failure,
    output::{note, out},
};

/// A working dir this large gets a progress bar for its upload.
const SHOW_PROGRESS_FROM: u64 = 1024 * 1024;

/// Run a command on a cluster as a Ray job and follow its log.
///
/// The working dir (default: the current directory) is packed as Ray packs
/// it — leaving out .git, .venv, venv, __pycache__ and what .gitignore and
/// .rayignore name — and uploaded unless the cluster has it already. The
/// log is followed to stdout until the job ends; the exit code is 0 when it
/// succeeded, 1 otherwise. Ctrl-C stops following, not the job, and exits
/// 130 as an interrupted command does.
///
/// Each word after `--` stays one word of the job's command: `-- python
/// train.py --epochs 3` is four words, and `-- 'echo hi; exit 3'` is one
/// word (a program of that name). For a shell line, run a shell:
/// `-- sh -c 'echo hi; exit 3'`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  krayne submit train -- python train.py --epochs 3\n  \
                        krayne submit -c train --working-dir ./src --env EPOCHS=3 --pip numpy -- python main.py\n  \
                        krayne submit train --no-wait --submission-id nightly-42 -- python etl.py\n  \
                        krayne submit train -- sh -c 'echo hi; exit 3'   # a shell line: one word for sh -c")]
pub(crate) struct Args {
    /// Cluster name.
    #[arg(required_unless_present = "cluster", conflicts_with = "cluster")]
    name: Option<String>,
    /// Cluster name (Krayne's form).
    #[arg(short, long, value_name = "NAME")]
    cluster: Option<String>,
    /// Namespace [default: KRAYNE_NAMESPACE, the config file's, or the one you may use].
    #[arg(short, long)]
    namespace: Option<String>,
    /// The directory to run in, uploaded to the cluster.
    #[arg(long, value_name = "DIR", default_value = ".")]
    working_dir: PathBuf,
    /// Print the job's id and return instead of following its log.
    #[arg(long)]
    no_wait: bool,
    /// An environment variable of the job (repeatable).
    #[arg(long = "env", value_name = "K=V", value_parser = env_pair)]
    env_vars: Vec<(String, String)>,
    /// A Python package to install first (repeatable).
    #[arg(long, value_name = "PKG")]
    pip: Vec<String>,
    /// An id of your choosing; submitting it again follows the first job.
    #[arg(long, value_name = "ID")]
    submission_id: Option<String>,
    /// The command to run, after `--`.
    #[arg(last = true, value_name = "ENTRYPOINT")]
    entrypoint: Vec<String>,
}

pub(crate) fn env_pair(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_owned(), v.to_owned())),
        _ => Err(format!("{text:?} is not K=V")),
    }
}

pub(crate) async fn run(ctx: &Context, args: Args) -> Result<(), Failure> {
    if args.entrypoint.is_empty() {
        return Err(Failure::Usage(
            "Missing entrypoint. Pass the command to run on the cluster after --".into(),
        ));
    }
    if !args.working_dir.is_dir() {
        return Err(Failure::Usage(format!(
            "Working directory not found: {}",
            args.working_dir.display()
        )));
    }
    let name = args.name.or(args.cluster).unwrap_or_default();
    let namespace = ctx.namespace(args.namespace.as_deref()).await?;
    let client = ctx.client()?;
    let cluster = client.get(&namespace, &name).await?;
    if cluster.status != "ready" {
        // Krayne's words first; then what to do about it.
        let next = match cluster.status.as_str() {
            "suspended" | "suspending" => {
                format!(" It is suspended: `krayne resume {name} -n {namespace} --wait` first.")
            }
            "creating" | "running" | "containers-creating" | "pods-pending" => {
                format!(" It is starting (Ray is not up yet): `krayne wait {name} -n {namespace}`, then submit again.")
            }
            _ => format!(" `krayne describe {name} -n {namespace}` says why."),
        };
        return Err(Failure::Other(format!(
            "Cluster '{name}' is not ready (status: {}).{next}",
            cluster.status
        )));
    }
    let bar = upload_bar();
    let progress = {
        let bar = bar.clone();
        move |sent: u64, total: u64| {
            if total >= SHOW_PROGRESS_FROM {
                bar.set_length(total);
                bar.set_position(sent);
            }
        }
    };
    let packed = krayne_client::pack_working_dir(&args.working_dir, &PackOptions::from_env()).await?;
    for skipped in &packed.skipped {
        note(&format!("Warning: left out {skipped}"));
    }
    note(&format!(
        "packing {}: {} files, {} (.gitignore and .rayignore honoured)",
        args.working_dir.display(),
        packed.files,
        indicatif::HumanBytes(packed.bytes)
    ));
    let (package, uploaded) = client.upload_packed(&namespace, &name, packed, progress).await?;
    bar.finish_and_clear();
    note(&if uploaded {
        format!("uploaded {} as {package}", args.working_dir.display())
    } else {
        format!("{} is on the cluster already ({package})", args.working_dir.display())
    });
    let mut job = SubmitJob::new(shell_words::join(&args.entrypoint));
    if let Some(id) = args.submission_id {
        job = job.submission_id(id);
    }
    for (k, v) in args.env_vars {
        job = job.env(k, v);
    }
    for requirement in args.pip {
        job = job.pip(requirement);
    }
    let submitted = client
        .submit_prepared(&namespace, &name, job, Some(package), uploaded)
        .await?;
    let id = submitted.job.id.clone();
    if submitted.created {
        note(&format!("job '{id}' submitted to {namespace}/{name}"));
    } else {
        note(&format!("job '{id}' exists already; it is the one shown"));
    }
    if args.no_wait {
        note(&format!(
            "follow it:  krayne jobs logs {name} {id} -f -n {namespace}\n\
             its status: krayne jobs get {name} {id} -n {namespace}\n\
             stop it:    krayne jobs stop {name} {id} -n {namespace}"
        ));
        if ctx.printer.structured() {
            return super::print_job(ctx, &submitted.job);
        }
        return out(&format!("{id}\n"));
    }
    // With -o json stdout holds the job's final state only; the log goes
    // to stderr.
    let to_stderr = ctx.printer.structured();
    if !super::logs::follow(&client, &namespace, &name, &id, to_stderr).await? {
        return Err(Failure::Interrupted(format!(
            "stopped following; job '{id}' keeps running (stop it with `krayne jobs stop {name} {id} -n {namespace}`)"
        )));
    }
    let (ended, outcome) = super::ended(&client, &namespace, &name, &id).await?;
    if ctx.printer.structured() {
        super::print_job(ctx, &ended)?;
    }
    outcome
}

/// A bar on stderr for a large upload; hidden when stderr is not a
/// terminal.
fn upload_bar() -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    if let Ok(style) = ProgressStyle::with_template("uploading {bar:30} {bytes}/{total_bytes} {bytes_per_sec}") {
        bar.set_style(style);
    }
    bar
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_summary_does_not_promise_logs_it_leaves_out() {
        let ray =
            "Job entrypoint command failed with exit code 3, last available logs (truncated to 20,000 chars):\nhi\n";
        assert_eq!(
            super::super::summary(ray),
            "Job entrypoint command failed with exit code 3 (its log is above)"
        );
        assert_eq!(super::super::summary("Job was stopped"), "Job was stopped");
    }

    #[test]
    fn env_pairs_need_a_name() {
        assert_eq!(env_pair("A=1=2").unwrap(), ("A".to_owned(), "1=2".to_owned()));
        assert!(env_pair("=1").is_err());
        assert!(env_pair("A").is_err());
    }
}
