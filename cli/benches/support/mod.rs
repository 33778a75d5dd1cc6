//! What the CLI benchmarks share: a server with 20 clusters, and
//! percentiles of a run's times.

use std::time::Duration;

use krayne_client::{Client, ClusterSpecBuilder};
use krayne_tests::Env;

/// A server (release, with the sandbox) with 20 clusters in `ml-team`.
pub(crate) async fn twenty_clusters() -> Env {
    let env = Env::start().await;
    let client = Client::connect(env.url()).await.unwrap().with_token(env.alice());
    for i in 0..20 {
        client
            .create(
                ClusterSpecBuilder::new(format!("bench-{i:02}"))
                    .namespace("ml-team")
                    .build(),
            )
            .await
            .unwrap();
    }
    env
}

/// Prints the header of a table of [`row`]s.
pub(crate) fn header(what: &str) {
    println!(
        "{what:<32} {:>8} {:>8} {:>8} {:>8}",
        "min ms", "p50 ms", "p95 ms", "max ms"
    );
}

/// Prints min, p50, p95 and max of `times` and returns them as JSON.
pub(crate) fn row(name: &str, times: &mut [Duration]) -> serde_json::Value {
    times.sort();
    let at = |q: f64| times[((times.len() - 1) as f64 * q).round() as usize].as_secs_f64() * 1000.0;
    println!(
        "{name:<32} {:>8.1} {:>8.1} {:>8.1} {:>8.1}",
        at(0.0),
        at(0.5),
        at(0.95),
        at(1.0)
    );
    serde_json::json!({
        "name": name, "runs": times.len(), "min_ms": at(0.0), "p50_ms": at(0.5), "p95_ms": at(0.95), "max_ms": at(1.0),
    })
}
