//! CLI cold start: how long `krayne --help`, `krayne version` and
//! `krayne get` take as fresh processes, the last against a real server with
//! 20 clusters. The goal is tens of milliseconds.
//!
//! ```sh
//! cargo build --release -p krayne-server
//! cargo bench -p krayne-client --bench cold_start
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::{
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use krayne_client::{Client, ClusterSpecBuilder};
use krayne_tests::Env;

const RUNS: usize = 50;

fn measure(args: &[&str], server: &str, token: &str) -> Vec<Duration> {
    (0..RUNS)
        .map(|_| {
            let started = Instant::now();
            let status = Command::new(env!("CARGO_BIN_EXE_krayne"))
                .args(args)
                .env("KRAYNE_SERVER", server)
                .env("KRAYNE_TOKEN", token)
                .env("XDG_CONFIG_HOME", std::env::temp_dir())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .unwrap();
            let elapsed = started.elapsed();
            assert!(status.success(), "krayne {args:?} failed");
            elapsed
        })
        .collect()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[tokio::main]
async fn main() {
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
    let (url, token) = (env.url(), env.alice());
    println!(
        "{:<28} {:>8} {:>8} {:>8} {:>8}",
        "command", "min ms", "p50 ms", "p95 ms", "max ms"
    );
    let mut json = Vec::new();
    for args in [
        &["--help"][..],
        &["version", "--client"],
        &["version"],
        &["get", "-n", "ml-team"],
        &["get", "-A", "-o", "json"],
    ] {
        let (url, token) = (url.clone(), token.clone());
        let args_owned: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        let mut times = tokio::task::spawn_blocking(move || {
            let refs: Vec<&str> = args_owned.iter().map(String::as_str).collect();
            measure(&refs, &url, &token)
        })
        .await
        .unwrap();
        times.sort();
        let at = |q: f64| ms(times[((times.len() - 1) as f64 * q).round() as usize]);
        let name = format!("krayne {}", args.join(" "));
        println!(
            "{name:<28} {:>8.1} {:>8.1} {:>8.1} {:>8.1}",
            at(0.0),
            at(0.5),
            at(0.95),
            at(1.0)
        );
        json.push(serde_json::json!({
            "command": name, "runs": RUNS, "min_ms": at(0.0), "p50_ms": at(0.5), "p95_ms": at(0.95), "max_ms": at(1.0),
        }));
    }
    println!("{}", serde_json::json!({ "bench": "cli_cold_start", "results": json }));
}
