//! Issue 62: a site that does not answer must slow nothing else down. Two
//! sandboxes as two sites behind one server (`eu-1` heavier, `us-2`
//! through its own kubeconfig), `--clusters` clusters made in each through
//! the API (as krayne renders them; the sandbox's KubeRay gives each a
//! ready head pod); then, with both sites up and again with `us-2`'s API
//! server stopped (once `/readyz` says so): the list of the namespace
//! (both sites' clusters, `us-2`'s from its cache's last state), the first
//! page of 50, a get and a describe of an `eu-1` cluster, and `whoami`, in
//! requests per second and p50/p99 latency from `--clients` concurrent
//! clients. The goal: every figure with one site down within 1.2× of both
//! up.
//!
//! ```sh
//! cargo build --release -p krayne-server
//! cargo bench -p krayne-tests --bench sites [-- --clusters 100]
//! ```
//!
//! Prints a table and one JSON line.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr,
    clippy::panic,
    missing_docs
)]

use std::{sync::Arc, time::Duration};

use clap::Parser;
use comfy_table::{Table, presets::ASCII_MARKDOWN};
use futures::FutureExt as _;
use krayne_tests::load::{Measured, Op, closed_loop};
use serde_json::json;

#[derive(Parser)]
struct Args {
    /// Clusters made in each site.
    #[arg(long, default_value_t = 100)]
    clusters: usize,
    /// Concurrent clients.
    #[arg(long, default_value_t = 8)]
    clients: usize,
    /// Seconds measured per route.
    #[arg(long, default_value_t = 4.0)]
    seconds: f64,
    /// Anything cargo passes (`--bench`).
    #[arg(hide = true, trailing_var_arg = true, allow_hyphen_values = true)]
    _rest: Vec<String>,
}

const NS: &str = "/v1/namespaces/ml-team/clusters";

/// The routes measured, by name.
const ROUTES: &[(&str, &str)] = &[
    (
        "list of the namespace",
        "/v1/namespaces/ml-team/clusters?page_size=1000",
    ),
    ("first page of 50", "/v1/clusters?page_size=50"),
    ("get (eu-1)", "/v1/namespaces/ml-team/clusters/eu-0"),
    ("describe (eu-1)", "/v1/namespaces/ml-team/clusters/eu-0/details"),
    ("whoami", "/v1/whoami"),
];

async fn measure(base: &str, token: &str, args: &Args) -> Vec<Measured> {
    let http = reqwest::Client::new();
    let mut all = Vec::new();
    for (_, path) in ROUTES {
        let url = format!("{base}{path}");
        let (http, token) = (http.clone(), token.to_owned());
        let op: Op = Arc::new(move |_| {
            let request = http.get(&url).bearer_auth(&token).send();
            async move { Some(request.await.is_ok_and(|r| r.status().is_success())) }.boxed()
        });
        let measured = closed_loop(
            args.clients,
            Duration::from_secs(1),
            Duration::from_secs_f64(args.seconds),
            op,
        )
        .await;
        assert_eq!(measured.errors, 0, "{path} failed");
        all.push(measured);
    }
    all
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    // Room for every head on each site's simulated nodes.
    let (env, mut second, _dir) = krayne_tests::sites::two_sites_tuned(None, None, &["--log", "info"], |s| {
        s.operator.nodes = krayne_server::sandbox::NodeCapacity::uniform(64, 1024, "8192Gi", 0);
    })
    .await;
    let alice = env.rest(&env.alice());
    eprintln!("making {} clusters in each site…", args.clusters);
    for i in 0..args.clusters {
        for (prefix, site) in [("eu", "eu-1"), ("us", "us-2")] {
            alice
                .post(NS, &json!({"name": format!("{prefix}-{i}"), "site": site}))
                .await
                .expect(201);
        }
    }
    // Every head ready: the cache holds each cluster's pods.
    let started = std::time::Instant::now();
    loop {
        let listed = alice.get(&format!("{NS}?page_size=1000")).await.expect(200).body;
        let ready = listed["clusters"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["status"] == "ready")
            .count();
        if ready == 2 * args.clusters {
            break;
        }
        if started.elapsed() > Duration::from_secs(300) {
            let mut seen = std::collections::BTreeMap::new();
            for c in listed["clusters"].as_array().unwrap() {
                *seen.entry(format!("{} {}", c["site"], c["status"])).or_insert(0) += 1;
            }
            panic!("{ready} ready: {seen:?}");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let (base, token) = (env.url(), env.alice());
    eprintln!("both sites up…");
    let up = measure(&base, &token, &args).await;
    second.stop_api().await;
    let started = std::time::Instant::now();
    while env.ops().get("/readyz").await.body["sites"]["us-2"]["status"] != "unavailable" {
        assert!(started.elapsed() < Duration::from_secs(30), "us-2 never shown down");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let listed = alice.get(&format!("{NS}?page_size=1000")).await.expect(200).body;
    assert_eq!(listed["clusters"].as_array().unwrap().len(), 2 * args.clusters);
    eprintln!("us-2 down…");
    let down = measure(&base, &token, &args).await;

    let mut table = Table::new();
    table.load_style(ASCII_MARKDOWN);
    table.set_header([
        "route",
        "req/s both up",
        "req/s us-2 down",
        "p50 up / down (ms)",
        "p99 up / down (ms)",
        "down ÷ up (p50)",
    ]);
    let mut out = serde_json::Map::new();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    for (((name, _), u), d) in ROUTES.iter().zip(&up).zip(&down) {
        let ratio = ms(d.percentile(0.5)) / ms(u.percentile(0.5)).max(f64::EPSILON);
        table.add_row([
            (*name).to_owned(),
            format!("{:.0}", u.per_second()),
            format!("{:.0}", d.per_second()),
            format!("{:.1} / {:.1}", ms(u.percentile(0.5)), ms(d.percentile(0.5))),
            format!("{:.1} / {:.1}", ms(u.percentile(0.99)), ms(d.percentile(0.99))),
            format!("{ratio:.2}×"),
        ]);
        out.insert(
            (*name).to_owned(),
            json!({"per_second": [u.per_second(), d.per_second()], "p50_ms": [ms(u.percentile(0.5)), ms(d.percentile(0.5))], "ratio": ratio}),
        );
    }
    println!("{table}");
    println!("{}", serde_json::Value::Object(out));
}
