//! Issue 59: a request's cost must not grow with the platform's namespace
//! count beyond what it returns. A caller whose grants reach one namespace
//! (`bench-00`, 10 clusters) against a platform of `--namespaces` others
//! (default 1 000 and 2 000, each run on a fresh server): `whoami`, the
//! first page (100) of `GET /v1/clusters`, the list of their namespace and
//! describe, in requests per second, and a global admin's `whoami` (its
//! size and rate). The table gives each figure at every platform size and
//! the ratio of the largest to the smallest (the goal: within 1.1×).
//!
//! ```sh
//! cargo build --release -p krayne-server
//! cargo bench -p krayne-tests --bench namespaces [-- --namespaces 1000,2000]
//! ```
//!
//! Uses `TEST_DATABASE_URL` for the audit log (else a throwaway Postgres).
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
use krayne_tests::load::{BenchEnv, Op, closed_loop};

#[derive(Parser)]
struct Args {
    /// Platform sizes: namespaces besides the caller's, one run each.
    #[arg(long, value_delimiter = ',', default_values_t = [1000, 2000])]
    namespaces: Vec<usize>,
    /// Concurrent clients.
    #[arg(long, default_value_t = 16)]
    clients: usize,
    /// Seconds measured per route.
    #[arg(long, default_value_t = 4.0)]
    seconds: f64,
    /// Anything cargo passes (`--bench`).
    #[arg(hide = true, trailing_var_arg = true, allow_hyphen_values = true)]
    _rest: Vec<String>,
}

/// The routes measured, by name: path and whether the admin asks.
const ROUTES: &[(&str, &str, bool)] = &[
    ("whoami", "/v1/whoami", false),
    ("first page of 100", "/v1/clusters?page_size=100", false),
    ("list of their namespace", "/v1/namespaces/bench-00/clusters", false),
    ("describe", "/v1/namespaces/bench-00/clusters/c-0/details", false),
    ("admin whoami", "/v1/whoami", true),
];

/// Requests per second of each route, and the admin whoami's size.
async fn run(others: usize, args: &Args) -> (Vec<f64>, usize) {
    let bench = BenchEnv::start(1, |sandbox| {
        sandbox.namespaces.extend((0..others).map(|i| format!("team-{i:05}")));
    })
    .await;
    for i in 0..10 {
        bench.ready_cluster(&format!("c-{i}")).await;
    }
    let admin = bench.env.admin();
    let base = bench.env.url();
    let admin_whoami = bench
        .http
        .get(format!("{base}/v1/whoami"))
        .bearer_auth(&admin)
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap()
        .len();
    let mut rates = Vec::new();
    for (_, path, as_admin) in ROUTES {
        let token = if *as_admin { admin.clone() } else { bench.token.clone() };
        let (http, url) = (bench.http.clone(), format!("{base}{path}"));
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
        rates.push(measured.per_second());
    }
    (rates, admin_whoami)
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let mut runs = Vec::new();
    for &others in &args.namespaces {
        eprintln!("{others} other namespaces…");
        runs.push((others, run(others, &args).await));
    }
    let mut table = Table::new();
    table.load_style(ASCII_MARKDOWN);
    let mut header = vec!["req/s".to_owned()];
    header.extend(runs.iter().map(|(n, _)| format!("{n} namespaces")));
    header.push("largest ÷ smallest".to_owned());
    table.set_header(header);
    let mut json = serde_json::Map::new();
    for (i, (name, _, _)) in ROUTES.iter().enumerate() {
        let rates: Vec<f64> = runs.iter().map(|(_, (r, _))| r[i]).collect();
        let ratio = rates.last().unwrap_or(&0.0) / rates.first().unwrap_or(&1.0).max(f64::EPSILON);
        let mut row = vec![(*name).to_owned()];
        row.extend(rates.iter().map(|r| format!("{r:.0}")));
        row.push(format!("{ratio:.2}×"));
        table.add_row(row);
        json.insert(
            (*name).to_owned(),
            serde_json::json!({"per_second": rates, "ratio": ratio}),
        );
    }
    let mut row = vec!["admin whoami bytes".to_owned()];
    row.extend(runs.iter().map(|(_, (_, bytes))| bytes.to_string()));
    row.push(String::new());
    table.add_row(row);
    json.insert(
        "admin_whoami_bytes".into(),
        runs.iter().map(|(_, (_, b))| *b).collect::<Vec<_>>().into(),
    );
    println!("{table}");
    println!("{}", serde_json::Value::Object(json));
}
