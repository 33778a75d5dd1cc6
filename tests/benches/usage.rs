//! Usage reports at platform scale on a real Postgres: a month of
//! intervals for 10 000 clusters in 1 000 namespaces — each cluster a
//! head (2 CPUs, 8 GiB) and 9 GPU workers (8 CPUs, 32 GiB, one
//! `nvidia.com/gpu`), every pod restarted once mid-month, every cluster
//! suspended for a day — written through the store's ledger; then the
//! time of a month's report for one namespace (by cluster and day) and
//! for every namespace (by team), and the storage per interval.
//!
//! `cargo bench -p krayne-tests --bench usage [-- --clusters 10000]`
//! (uses `TEST_DATABASE_URL`, else a throwaway cluster). Prints a table
//! and one JSON line.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::panic,
    missing_docs
)]

use std::time::{Duration, Instant};

use jiff::Timestamp;
use krayne_server::{
    domain::{PodCharge, UsageBy, UsageInterval, UsageKind, UsageLedger as _, usage_report},
    store::{DatabaseOptions, SqlUsageLedger, Store},
};
use krayne_tests::load::percentile;
use serde_json::json;

const NAMESPACES: usize = 1000;

fn charge(cpus: u64, gib: u64, gpus: u64) -> PodCharge {
    PodCharge {
        cpu_millis: cpus * 1000,
        memory_bytes: gib << 30,
        gpus,
        gpu_resource: (gpus > 0).then(|| "nvidia.com/gpu".into()),
    }
}

/// A month of one cluster's intervals.
fn cluster_intervals(i: usize, month: Timestamp) -> Vec<UsageInterval> {
    let namespace = format!("team-{:04}", i % NAMESPACES);
    let cluster = format!("train-{i:05}");
    let at = |hours: i64| month + Duration::from_secs(u64::try_from(hours * 3600).unwrap());
    let base =
        |key: String, kind: UsageKind, group: Option<&str>, charge: PodCharge, from: i64, to: i64| UsageInterval {
            key,
            kind,
            namespace: namespace.clone(),
            cluster: cluster.clone(),
            worker_group: group.map(str::to_owned),
            creator: Some(format!("user-{}@example.com", i % 3000)),
            teams: vec![format!("team-{:04}", i % NAMESPACES)],
            charge,
            started_at: at(from),
            ended_at: Some(at(to)),
            estimated: false,
        };
    let mut out = vec![
        base(
            format!("cluster/{i}"),
            UsageKind::Cluster,
            None,
            PodCharge::default(),
            0,
            720,
        ),
        base(
            format!("suspended/{i}/1"),
            UsageKind::Suspended,
            None,
            PodCharge::default(),
            300,
            324,
        ),
    ];
    for pod in 0..10 {
        let (group, c) = if pod == 0 {
            ("headgroup", charge(2, 8, 0))
        } else {
            ("gpu", charge(8, 32, 1))
        };
        out.push(base(
            format!("pod/{i}-{pod}-a"),
            UsageKind::Pod,
            Some(group),
            c.clone(),
            0,
            300,
        ));
        out.push(base(
            format!("pod/{i}-{pod}-b"),
            UsageKind::Pod,
            Some(group),
            c,
            324,
            720,
        ));
    }
    out
}

#[tokio::main]
async fn main() {
    let clusters: usize = std::env::args()
        .skip_while(|a| a != "--clusters")
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(10_000);
    let db = krayne_tests::test_database().await;
    let store = Store::connect(&DatabaseOptions {
        url: db.url.clone(),
        max_connections: 4,
        statement_timeout: Duration::from_secs(120),
        acquire_timeout: Duration::from_secs(5),
        ca_file: None,
    })
    .unwrap();
    store.migrate().await.unwrap();
    let ledger = SqlUsageLedger::new(store);
    let month: Timestamp = "2026-10-01T00:00:00Z".parse().unwrap();
    let end: Timestamp = "2026-11-01T00:00:00Z".parse().unwrap();
    let started = Instant::now();
    let mut rows = 0;
    for chunk in (0..clusters).collect::<Vec<_>>().chunks(250) {
        let intervals: Vec<UsageInterval> = chunk.iter().flat_map(|i| cluster_intervals(*i, month)).collect();
        rows += intervals.len();
        ledger.open(&intervals).await.unwrap();
    }
    let written = started.elapsed();

    let namespaces: Vec<String> = (0..NAMESPACES).map(|n| format!("team-{n:04}")).collect();
    let mut one = Vec::new();
    let mut all = Vec::new();
    let mut one_rows = 0;
    let mut all_rows = 0;
    for _ in 0..5 {
        let t = Instant::now();
        let intervals = ledger.intervals(Some(&namespaces[..1]), month, end).await.unwrap();
        let report = usage_report(&intervals, month, end, &[UsageBy::Cluster, UsageBy::Day], end);
        one.push(t.elapsed());
        one_rows = report.rows.len();
        let t = Instant::now();
        let intervals = ledger.intervals(Some(&namespaces), month, end).await.unwrap();
        let report = usage_report(&intervals, month, end, &[UsageBy::Team], end);
        all.push(t.elapsed());
        all_rows = report.rows.len();
    }
    one.sort();
    all.sort();
    let ms = |sorted: &[Duration], p: f64| percentile(sorted, p).as_secs_f64() * 1000.0;
    let size: i64 = sqlx::query_scalar("SELECT pg_total_relation_size('usage_intervals')")
        .fetch_one(&sqlx::PgPool::connect(&db.url).await.unwrap())
        .await
        .unwrap();
    let per_row = size as f64 / rows as f64;
    println!(
        "{clusters} clusters, {rows} intervals (a month), written in {:.1} s",
        written.as_secs_f64()
    );
    println!();
    println!("| report | rows | median ms | p95 ms |");
    println!("|---|---|---|---|");
    println!(
        "| one namespace, by cluster and day | {one_rows} | {:.1} | {:.1} |",
        ms(&one, 0.5),
        ms(&one, 0.95)
    );
    println!(
        "| every namespace, by team | {all_rows} | {:.1} | {:.1} |",
        ms(&all, 0.5),
        ms(&all, 0.95)
    );
    println!();
    println!(
        "storage: {:.0} bytes per interval (table and indexes, {:.1} MiB)",
        per_row,
        size as f64 / 1048576.0
    );
    println!(
        "{}",
        json!({"bench": "usage", "clusters": clusters, "intervals": rows,
               "one_namespace_ms": ms(&one, 0.5), "all_namespaces_ms": ms(&all, 0.5),
               "bytes_per_interval": per_row})
    );
}
