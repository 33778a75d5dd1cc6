//! CLI cold start: how long `krayne --help`, `krayne version` and
//! `krayne get` take as fresh processes, the last against a real server with
//! 20 clusters. The goal is tens of milliseconds.
//!
//! ```sh
//! cargo build --release -p krayne-server
//! cargo bench -p krayne-cli --bench cold_start
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

mod support;

use std::{
    process::{Command, Stdio},
    time::{Duration, Instant},
};

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

#[tokio::main]
async fn main() {
    let env = support::twenty_clusters().await;
    let (url, token) = (env.url(), env.alice());
    support::header("command");
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
        json.push(support::row(&format!("krayne {}", args.join(" ")), &mut times));
    }
    println!("{}", serde_json::json!({ "bench": "cli_cold_start", "results": json }));
}
