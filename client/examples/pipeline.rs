//! A pipeline step: create a Ray cluster, wait for it, run a job from a
//! working dir on it, follow the job's log, read how it ended, and delete
//! the cluster whatever happened in between. Then the same job as a run
//! with a cluster of its own (`Client::run_job`, a KubeRay RayJob): made,
//! followed and torn down for the pipeline, nothing left running.
//!
//! ```sh
//! cargo run -p krayne-server -- sandbox          # prints the export line to paste
//! export KRAYNE_SERVER=http://127.0.0.1:8080 KRAYNE_TOKEN=…   # as it printed
//! cargo run -p krayne-client --example pipeline  # in the first namespace you may edit
//! ```
#![forbid(unsafe_code)]
#![allow(clippy::print_stdout)]

use std::{path::Path, time::Duration};

use futures::TryStreamExt as _;
use krayne_client::{
    Client, ClientError, ClusterSpecBuilder, Code, RunJob, SubmitJob, WorkerGroupBuilder,
    proto::{JobStatus, Role},
};

/// The job's code, as a pipeline would have it in its repository.
const TRAIN: &str = "import os\n\
for epoch in range(int(os.environ['EPOCHS'])):\n    print(f'epoch {epoch}: loss {1 / (epoch + 1):.2f}')\n\
print('trained')\n";

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), ClientError> {
    let var = |name: &str, default: &str| std::env::var(name).unwrap_or_else(|_| default.to_owned());
    let server = var("KRAYNE_SERVER", "http://127.0.0.1:8080");
    let name = format!("pipeline-{}", std::process::id());
    let workdir = std::env::temp_dir().join(&name);
    let local = |e: std::io::Error| ClientError::new(Code::Internal, format!("{}: {e}", workdir.display()));
    std::fs::create_dir_all(&workdir).map_err(local)?;
    std::fs::write(workdir.join("train.py"), TRAIN).map_err(local)?;

    let client = Client::connect(server).await?.with_token(var("KRAYNE_TOKEN", ""));
    let namespace = match std::env::var("KRAYNE_NAMESPACE") {
        Ok(namespace) => namespace,
        Err(_) => editable_namespace(&client).await?,
    };
    let spec = ClusterSpecBuilder::new(&name)
        .namespace(&namespace)
        .worker_group(WorkerGroupBuilder::new("worker").replicas(2).cpus("2").memory("4Gi"))
        .autoscaling(false)
        .build();
    client.create(spec).await?;
    println!("created {namespace}/{name}");

    let outcome = run_a_job(&client, &namespace, &name, &workdir).await;
    client.delete(&namespace, &name).await?;
    println!("deleted {namespace}/{name}");
    let run = run_on_its_own_cluster(&client, &namespace, &format!("{name}-run"), &workdir).await;
    let _ = std::fs::remove_dir_all(&workdir);
    outcome.and(run)
}

/// The same job on a cluster of its own: KubeRay makes the cluster, krayne
/// submits the job once the working dir is on its head, and the cluster
/// goes a minute after the job ends.
async fn run_on_its_own_cluster(
    client: &Client,
    namespace: &str,
    name: &str,
    workdir: &Path,
) -> Result<(), ClientError> {
    let job = RunJob::new(name, "python train.py")
        .cluster_yaml("worker_groups: [{name: worker, replicas: 2, cpus: 2, memory: 4Gi}]")
        .working_dir(workdir)
        .env("EPOCHS", "3")
        .ttl(Duration::from_secs(60));
    let run = client.run_job(namespace, job).await?;
    run.started(|rayjob| println!("{name}: {:?} {}", rayjob.state(), rayjob.cluster_status))
        .await?;
    let mut log = run.logs().await?;
    while let Some(chunk) = log.try_next().await? {
        print!("{chunk}");
    }
    let outcome = run.wait(Duration::from_secs(120)).await?;
    println!(
        "{name} ended {:?}, exit code {:?}",
        outcome.rayjob.state(),
        outcome.exit_code
    );
    if outcome.succeeded() {
        Ok(())
    } else {
        Err(ClientError::new(
            Code::Aborted,
            format!("run {name} ended {:?}", outcome.rayjob.state()),
        ))
    }
}

/// The first namespace where the caller is an editor (as the CLI picks
/// one): `ml-team` for the sandbox's token.
async fn editable_namespace(client: &Client) -> Result<String, ClientError> {
    let me = client.whoami().await?;
    me.namespaces
        .iter()
        .find(|n| matches!(n.role(), Role::Editor | Role::Admin))
        .map(|n| n.namespace.clone())
        .ok_or_else(|| {
            ClientError::new(
                Code::PermissionDenied,
                "you are an editor of no namespace: set KRAYNE_NAMESPACE",
            )
        })
}

async fn run_a_job(client: &Client, namespace: &str, name: &str, workdir: &Path) -> Result<(), ClientError> {
    let ready = client
        .wait_until_ready(namespace, name, Duration::from_secs(600))
        .await?;
    // The dashboard through krayne: `ready.dashboard_url` is the head pod's
    // address, which only pods in the cluster reach.
    println!(
        "{} is {}; its dashboard: {}",
        ready.name,
        ready.status,
        client.proxy_url(namespace, name, "dashboard")
    );

    let job = SubmitJob::new("python train.py")
        .working_dir(workdir)
        .env("EPOCHS", "3");
    let submitted = client.submit_job(namespace, name, job).await?;
    let id = submitted.job.submission_id;
    println!("submitted {id}");
    let mut log = client.tail_job_logs(namespace, name, &id).await?;
    while let Some(chunk) = log.try_next().await? {
        print!("{chunk}");
    }
    let job = client.wait_job(namespace, name, &id, Duration::from_secs(60)).await?;
    println!("{id} {:?}", job.status());
    if job.status() == JobStatus::Succeeded {
        Ok(())
    } else {
        Err(ClientError::new(
            Code::Aborted,
            format!("job {id} ended {:?}: {}", job.status(), job.message),
        ))
    }
}
