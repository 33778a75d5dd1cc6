//! `krayne run -- ENTRYPOINT...`.

use std::{io::IsTerminal as _, path::PathBuf, time::Duration};

use futures::StreamExt as _;
use krayne_client::{ClusterConfig, RunHandle, RunJob, package::PackOptions, proto};
use serde_json::json;

use crate::{
    context::Context,
    failure::Failure,
    output::{note, out},
    parse,
};

/// How long a run's exit code may take to be known after its log ends.
const SETTLE: Duration = Duration::from_secs(120);

/// Run a command on a fresh cluster of its own and exit with its code.
///
/// A KubeRay RayJob: the cluster is shaped as `krayne create` shapes one
/// (`-f`, then the flags, then `--set`) and charged to the namespace's
/// quota; the working dir (default: the current directory) is packed as
/// Ray packs it and uploaded once the cluster's head serves; the job's log
/// is followed to stdout; the exit code is the job's (1 when it never ran
/// or was ended by a deadline). The cluster is deleted `--ttl` after the
/// job ends; the log stays (`krayne rayjob logs NAME`). Ctrl-C asks
/// whether to stop the job (at a terminal; elsewhere it keeps running),
/// and exits 130.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  krayne run -- python train.py --epochs 3
  krayne run --name nightly -f cluster.yaml --working-dir ./src --ttl 10m -- python main.py
  krayne run --workers 2 --gpus-per-worker 1 --env EPOCHS=3 -- python train.py
  krayne run --detach --name etl -- sh -c 'python etl.py && echo done'   # prints the name
  krayne run --gpus-per-worker 4 --queue -- python train.py   # waits in line for quota, then runs
  krayne rayjob logs nightly        # the log, also after the cluster is gone")]
pub(crate) struct Args {
    /// The RayJob's name, at most 47 characters [default: run-<6 random>].
    #[arg(long)]
    name: Option<String>,
    /// Namespace [default: the file's, KRAYNE_NAMESPACE, the config file's, or the one you may use].
    #[arg(short, long)]
    namespace: Option<String>,
    /// Krayne config file (YAML or JSON) shaping the cluster; its `name`
    /// is not used.
    #[arg(short = 'f', long = "file", value_name = "FILE")]
    file: Option<PathBuf>,
    /// Workers in the first worker group.
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = parse::count)]
    workers: Option<u32>,
    /// GPUs per worker in the first worker group.
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = parse::count)]
    gpus_per_worker: Option<u32>,
    /// Set any config field, e.g. head.cpus=4 (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE", value_parser = parse::assignment)]
    set: Vec<String>,
    /// The directory to run in, uploaded to the job's cluster.
    #[arg(long, value_name = "DIR", default_value = ".")]
    working_dir: PathBuf,
    /// An environment variable of the job (repeatable).
    #[arg(long = "env", value_name = "K=V", value_parser = crate::commands::job::submit::env_pair)]
    env_vars: Vec<(String, String)>,
    /// A Python package to install first (repeatable).
    #[arg(long, value_name = "PKG")]
    pip: Vec<String>,
    /// How long the cluster outlives the job (30s at least) [default: the
    /// team's, else 5m].
    #[arg(long, value_parser = parse::duration, value_name = "DURATION")]
    ttl: Option<Duration>,
    /// Longest the whole run may take, its cluster's start included.
    #[arg(long, value_parser = parse::duration, value_name = "DURATION")]
    deadline: Option<Duration>,
    /// Print the RayJob's name and return once it is created.
    #[arg(long)]
    detach: bool,
    /// When the job's cluster does not fit the namespace's quota, wait in
    /// the namespace's line (no cluster is made until it is admitted, in
    /// order as quota frees) instead of failing; its place is shown as it
    /// moves. `--queue=false` fails even where the namespace queues by
    /// default.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    queue: Option<bool>,
    /// The command to run, after `--`.
    #[arg(last = true, value_name = "ENTRYPOINT")]
    entrypoint: Vec<String>,
}

/// `run-` and six characters of a name KubeRay accepts.
fn generated_name() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let suffix: String = (0..6)
        .map(|_| char::from(ALPHABET[fastrand::usize(..ALPHABET.len())]))
        .collect();
    format!("run-{suffix}")
}

/// The cluster document: the file, then the flags, then `--set`, without
/// a name or namespace (the RayJob's).
fn cluster_yaml(args: &Args) -> Result<String, Failure> {
    let config = match &args.file {
        Some(path) => ClusterConfig::from_file(path)?,
        None => ClusterConfig::default(),
    };
    let group = "worker_groups[0]";
    let mut flags = Vec::new();
    if let Some(n) = args.workers {
        flags.push(format!("{group}.replicas={n}"));
    }
    if let Some(n) = args.gpus_per_worker {
        flags.push(format!("{group}.gpus={n}"));
    }
    let config = config.set_all(&flags)?.set_all(&args.set)?;
    let mut tree = config.tree().clone();
    if let Some(map) = tree.as_object_mut() {
        map.remove("name");
        map.remove("namespace");
    }
    Ok(tree.to_string())
}

pub(crate) async fn run(ctx: &Context, args: Args) -> Result<(), Failure> {
    if args.entrypoint.is_empty() {
        return Err(Failure::Usage(
            "Missing entrypoint. Pass the command to run after --".into(),
        ));
    }
    if !args.working_dir.is_dir() {
        return Err(Failure::Usage(format!(
            "Working directory not found: {}",
            args.working_dir.display()
        )));
    }
    let name = args.name.clone().unwrap_or_else(generated_name);
    let namespace = ctx.namespace(args.namespace.as_deref()).await?;
    let mut job = RunJob::new(&name, shell_words::join(&args.entrypoint))
        .cluster_yaml(cluster_yaml(&args)?)
        .working_dir(&args.working_dir)
        .pack_options(PackOptions::from_env());
    for (k, v) in &args.env_vars {
        job = job.env(k, v);
    }
    for requirement in &args.pip {
        job = job.pip(requirement);
    }
    if let Some(ttl) = args.ttl {
        job = job.ttl(ttl);
    }
    if let Some(deadline) = args.deadline {
        job = job.deadline(deadline);
    }
    if let Some(queue) = args.queue {
        job = job.queue(queue);
    }
    let client = ctx.client()?;
    let handle = client.run_job(&namespace, job).await?;
    note(&format!(
        "rayjob {namespace}/{name} created: KubeRay makes its cluster, then krayne submits the job"
    ));
    if args.detach {
        note(&format!(
            "follow it: krayne rayjob logs {name} -f -n {namespace}\n\
             its state: krayne rayjob get {name} -n {namespace}\n\
             stop it:   krayne rayjob delete {name} -n {namespace}"
        ));
        if ctx.printer.structured() {
            return ctx.printer.data(&json!({"namespace": namespace, "name": name}));
        }
        return out(&format!("{name}\n"));
    }
    let started = tokio::select! {
        started = handle.started(|rj| note(&progress(rj))) => started?,
        _ = tokio::signal::ctrl_c() => return interrupted(&handle, &namespace).await,
    };
    // A job that ran shows Ray's status of it, even one over before a
    // poll saw it running.
    if krayne_client::run_is_over(&started) && started.job_status.is_empty() {
        return Err(Failure::Other(format!(
            "rayjob {name} {} before its job ran: {}",
            super::state(&started),
            or_reason(&started)
        )));
    }
    // With -o json stdout holds the RayJob's final state only.
    let to_stderr = ctx.printer.structured();
    let mut lines = std::pin::pin!(handle.logs().await?);
    loop {
        tokio::select! {
            chunk = lines.next() => match chunk {
                Some(text) if to_stderr => {
                    use std::io::Write as _;
                    let _ = std::io::stderr().write_all(text?.as_bytes());
                }
                Some(text) => out(&text?)?,
                None => break,
            },
            _ = tokio::signal::ctrl_c() => return interrupted(&handle, &namespace).await,
        }
    }
    let outcome = handle.wait(SETTLE).await?;
    if ctx.printer.structured() {
        ctx.printer.data(&krayne_client::json::to_json(&outcome.rayjob)?)?;
    }
    let rayjob = &outcome.rayjob;
    let kept = rayjob
        .ttl_seconds_after_finished
        .map(|s| format!("; its cluster goes in {s}s, its log stays (krayne rayjob logs {name})"))
        .unwrap_or_default();
    match outcome.exit_code {
        Some(0) if outcome.succeeded() => {
            note(&format!("rayjob {name} succeeded{kept}"));
            Ok(())
        }
        Some(code) => {
            note(&format!("rayjob {name} failed with exit code {code}{kept}"));
            Err(Failure::Exited(
                u8::try_from(code).ok().filter(|c| *c != 0).unwrap_or(1),
            ))
        }
        None => Err(Failure::Other(format!(
            "rayjob {name} {}: {}{kept}",
            super::state(rayjob),
            or_reason(rayjob)
        ))),
    }
}

/// A line for each step of a run's start.
fn progress(rj: &proto::RayJob) -> String {
    match (rj.state(), rj.cluster.as_str(), rj.cluster_status.as_str()) {
        (proto::RunState::Queued, _, _) => format!("rayjob {}: {}", rj.name, super::line_place(rj)),
        (proto::RunState::Starting, "", _) => format!("rayjob {}: making its cluster", rj.name),
        (proto::RunState::Starting | proto::RunState::Submitting, cluster, status) if status != "ready" => {
            format!(
                "cluster {cluster}: {}",
                if status.is_empty() { "creating" } else { status }
            )
        }
        (proto::RunState::Submitting, cluster, _) => {
            format!("cluster {cluster} is ready; uploading the working dir and submitting the job")
        }
        (proto::RunState::Running, _, _) => format!("job {} runs; its log follows", rj.job_id),
        _ => format!("rayjob {}: {}", rj.name, super::state(rj)),
    }
}

/// KubeRay's or Ray's account of how a run ended.
fn or_reason(rj: &proto::RayJob) -> String {
    match (rj.reason.as_str(), rj.message.as_str()) {
        ("", "") => "no reason given".to_owned(),
        (reason, "") => reason.to_owned(),
        ("", message) => message.to_owned(),
        (reason, message) => format!("{reason}: {message}"),
    }
}

/// Ctrl-C: at a terminal, asks whether to stop the job; exits 130.
async fn interrupted(handle: &RunHandle, namespace: &str) -> Result<(), Failure> {
    let name = handle.name();
    let stop = std::io::stdin().is_terminal()
        && dialoguer::Confirm::new()
            .with_prompt(format!("Stop rayjob {name} (its cluster goes too)?"))
            .default(false)
            .interact_opt()
            .ok()
            .flatten()
            == Some(true);
    if stop {
        handle.stop().await?;
        return Err(Failure::Interrupted(format!("rayjob {name} stopped; its cluster goes")));
    }
    Err(Failure::Interrupted(format!(
        "stopped following; rayjob {name} keeps running (stop it with `krayne rayjob delete {name} -n {namespace}`)"
    )))
}
