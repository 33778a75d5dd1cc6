//! A replica's memory while hostile heads answer (issue 53): eight
//! clusters in four namespaces whose dashboards send 60 MiB of `[0,0,…]`
//! or never end, asked at once on every route that reads a head (jobs, a
//! job, its log, Ray's nodes and log files) by eight callers, round after
//! round, while the lifecycle reaper asks the same heads every second. The server's peak
//! resident size (`VmHWM`) must stay within twice its size once warmed up
//! on honest clusters; the refusals are counted.
//!
//! ```sh
//! cargo build --release -p krayne-server
//! KRAYNE_SERVER_BIN=target/release/krayne-server \
//!   cargo bench -p krayne-tests --bench hostile_heads [-- --rounds 20]
//! ```
//!
//! Prints a table and one JSON line; exits non-zero past the bound.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr,
    clippy::panic,
    missing_docs
)]

use std::time::{Duration, Instant};

use clap::Parser;
use comfy_table::{Table, presets::ASCII_MARKDOWN};
use krayne_tests::{Env, EnvOptions, TEAMS, load::rss_kib};
use serde_json::json;

#[derive(Parser)]
#[command(about = "A replica's peak memory while eight hostile heads answer at once")]
struct Args {
    /// Rounds of every route on every hostile head, all heads at once.
    #[arg(long, default_value_t = 10)]
    rounds: usize,
    /// How krayne reaches heads: `port-forward` (the default outside a
    /// cluster) or `direct` (the chart's).
    #[arg(long, default_value = "port-forward")]
    upstream: String,
    /// The hostile heads' behaviours, taken in turn.
    #[arg(long, value_delimiter = ',', default_value = "oversized,endless")]
    behaviours: Vec<String>,
    /// The bound: peak resident size over the warmed-up size.
    #[arg(long, default_value_t = 2.0)]
    bound: f64,
    /// Passed by `cargo bench`.
    #[arg(long, hide = true)]
    bench: bool,
}

const NAMESPACES: [&str; 4] = ["default", "ml-team", "shared-data", "other-team"];

fn routes(namespace: &str, name: &str) -> [String; 5] {
    let ns = format!("/v1/namespaces/{namespace}/clusters");
    [
        format!("{ns}/{name}/jobs"),
        format!("{ns}/{name}/jobs/raysubmit_x"),
        format!("{ns}/{name}/jobs/raysubmit_x/logs"),
        format!("{ns}/{name}/ray-logs"),
        format!("{ns}/{name}/ray-logs/file?file=raylet.out"),
    ]
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let env = Env::start_with(EnvOptions {
        teams: NAMESPACES.iter().fold(format!("{TEAMS}lifecycle:\n"), |teams, ns| {
            teams + &format!("  {ns}: {{ idle_after: 1h, warn_before: 59m58s }}\n")
        }),
        server_args: [
            "--log",
            "info",
            "--rate-limit-per-second",
            "0",
            "--lifecycle-policy-settle",
            "0s",
            "--lifecycle",
            "act",
            "--lifecycle-interval-seconds",
            "1",
            "--service-upstream",
            &args.upstream,
        ]
        .map(str::to_owned)
        .to_vec(),
        ..EnvOptions::default()
    })
    .await;
    let pid = env.server.pid();
    let alice = env.rest(&env.alice());
    let admin = env.rest(&env.admin());

    // Warmed up on honest clusters: every route, the reaper's passes.
    env.ready_cluster("honest").await;
    alice
        .post(
            "/v1/namespaces/ml-team/clusters/honest/jobs",
            &json!({"entrypoint": "echo hi"}),
        )
        .await
        .expect(201);
    for _ in 0..args.rounds {
        for path in routes("ml-team", "honest") {
            let _ = alice.get(&path).await;
        }
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (warm, warm_peak) = rss_kib(pid).unwrap();

    let heads: Vec<(&str, String)> = (0..8).map(|i| (NAMESPACES[i % 4], format!("hostile-{i}"))).collect();
    for (i, (namespace, name)) in heads.iter().enumerate() {
        let behaviour = &args.behaviours[i * args.behaviours.len() / heads.len()];
        env.hostile_cluster_in(namespace, name, behaviour).await;
    }
    let started = Instant::now();
    let mut statuses = std::collections::BTreeMap::<u16, usize>::new();
    for _ in 0..args.rounds {
        let asked = heads.iter().map(|(namespace, name)| {
            let rest = env.rest(&env.admin());
            async move {
                let mut seen = Vec::new();
                for path in routes(namespace, name) {
                    seen.push(rest.get(&path).await.status);
                }
                seen
            }
        });
        for seen in futures::future::join_all(asked).await {
            for status in seen {
                *statuses.entry(status).or_default() += 1;
            }
        }
    }
    let elapsed = started.elapsed();
    admin.get("/v1/whoami").await.expect(200);
    let (now, peak) = rss_kib(pid).unwrap();
    #[expect(clippy::cast_precision_loss, reason = "a ratio")]
    let ratio = peak as f64 / warm as f64;

    let mut table = Table::new();
    table.load_style(ASCII_MARKDOWN);
    table.set_header(["measure", "value"]);
    table.add_row(["warmed-up RSS (honest clusters)", &format!("{:.1} MiB", mib(warm))]);
    table.add_row(["peak RSS until then", &format!("{:.1} MiB", mib(warm_peak))]);
    table.add_row(["peak RSS (8 hostile heads at once)", &format!("{:.1} MiB", mib(peak))]);
    table.add_row(["RSS after", &format!("{:.1} MiB", mib(now))]);
    table.add_row(["peak / warmed-up", &format!("{ratio:.2} (bound {:.2})", args.bound)]);
    table.add_row(["requests", &statuses.values().sum::<usize>().to_string()]);
    table.add_row(["answers by status", &format!("{statuses:?}")]);
    table.add_row(["time", &format!("{:.1} s", elapsed.as_secs_f64())]);
    println!("{table}");
    println!(
        "{}",
        json!({"bench": "hostile_heads", "warm_kib": warm, "warm_peak_kib": warm_peak, "peak_kib": peak, "after_kib": now,
               "ratio": ratio, "bound": args.bound, "rounds": args.rounds,
               "statuses": statuses, "seconds": elapsed.as_secs_f64()})
    );
    assert!(
        statuses.keys().all(|s| [429, 502, 503].contains(s)),
        "every answer a refusal of the head's: {statuses:?}"
    );
    assert!(
        ratio <= args.bound,
        "peak {peak} KiB is {ratio:.2}× the warmed-up {warm} KiB"
    );
}

#[expect(clippy::cast_precision_loss, reason = "for display")]
fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}
