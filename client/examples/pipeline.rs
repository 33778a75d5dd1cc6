//! A pipeline step: create a Ray cluster, wait for it, use it, delete it.
//!
//! ```sh
//! cargo run -p krayne-server -- sandbox          # prints KRAYNE_TOKEN
//! KRAYNE_SERVER=http://127.0.0.1:8080 KRAYNE_TOKEN=… KRAYNE_NAMESPACE=ml-team \
//!     cargo run -p krayne-client --example pipeline
//! ```
#![forbid(unsafe_code)]
#![allow(clippy::print_stdout)]

use std::time::Duration;

use krayne_client::{Client, ClientError, ClusterSpecBuilder, WorkerGroupBuilder};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), ClientError> {
    let var = |name: &str, default: &str| std::env::var(name).unwrap_or_else(|_| default.to_owned());
    let server = var("KRAYNE_SERVER", "http://127.0.0.1:8080");
    let namespace = var("KRAYNE_NAMESPACE", "default");
    let name = format!("pipeline-{}", std::process::id());

    let client = Client::connect(server).await?.with_token(var("KRAYNE_TOKEN", ""));
    let spec = ClusterSpecBuilder::new(&name)
        .namespace(&namespace)
        .worker_group(WorkerGroupBuilder::new("worker").replicas(2).cpus("2").memory("4Gi"))
        .autoscaling(false)
        .build();
    client.create(spec).await?;
    println!("created {namespace}/{name}");

    // Delete the cluster whatever happens while using it.
    let outcome = async {
        let ready = client
            .wait_until_ready(&namespace, &name, Duration::from_secs(600))
            .await?;
        println!(
            "{} is {}: submit jobs to {}",
            ready.name,
            ready.status,
            ready.client_url.as_deref().unwrap_or("(no address yet)")
        );
        let details = client.describe(&namespace, &name).await?;
        println!("{} pods, Ray {}", details.pods.len(), details.ray_version);
        Ok::<_, ClientError>(())
    }
    .await;
    client.delete(&namespace, &name).await?;
    println!("deleted {namespace}/{name}");
    outcome
}
