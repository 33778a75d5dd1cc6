//! Memory of a release server whose watch cache holds many clusters: RSS
//! and peak RSS after loading `--clusters` (default 10 000) RayClusters,
//! their pods and their events, and again after reads over all of them.
//!
//! ```sh
//! cargo build --release -p krayne-server
//! cargo bench -p krayne-tests --bench memory [-- --clusters 10000]
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

use std::time::{Duration, Instant};

use clap::Parser;
use comfy_table::{Table, presets::ASCII_MARKDOWN};
use krayne_tests::load::{BenchEnv, bench_namespace, rss_kib};
use serde_json::{Value, json};

#[derive(Parser)]
#[command(about = "Memory benchmark: krayne-server's RSS with many cached clusters")]
struct Args {
    /// Clusters to load (each gets a head and one worker pod).
    #[arg(long, default_value_t = 10_000)]
    clusters: usize,
    /// Namespaces they are spread over.
    #[arg(long, default_value_t = 20)]
    namespaces: usize,
    /// Passed by `cargo bench`.
    #[arg(long, hide = true)]
    bench: bool,
}

/// `krayne_cache_objects` by kind, from the server's metrics.
async fn cached_objects(http: &reqwest::Client, ops: &str) -> Vec<(String, f64)> {
    let text = http
        .get(format!("http://{ops}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .filter_map(|l| l.strip_prefix("krayne_cache_objects{kind=\""))
        .filter_map(|l| {
            let (kind, rest) = l.split_once("\"}")?;
            Some((kind.to_owned(), rest.trim().parse().ok()?))
        })
        .collect()
}

fn count(objects: &[(String, f64)], kind: &str) -> usize {
    objects.iter().find(|(k, _)| k == kind).map_or(0, |(_, n)| *n as usize)
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let bench = BenchEnv::start(args.namespaces, |sandbox| {
        // Room for the burst of changes, so the server's watches never
        // fall behind the kept history (a relist would be measured too).
        sandbox.history_limit = args.clusters * 20;
    })
    .await;
    let (env, http) = (&bench.env, &bench.http);
    let (pid, ops) = (env.server.pid(), env.server.ops.to_string());
    let (idle, _) = rss_kib(pid).unwrap();

    eprintln!("krayne-server pid {pid}; loading {} clusters…", args.clusters);
    let started = Instant::now();
    let created = bench.create_clusters(args.clusters).await;
    assert_eq!(created, args.clusters, "not every cluster was created");
    // Every cluster and pod cached, and the counts still for 2 s: the
    // simulated pods have started and their events arrived.
    let mut last = Vec::new();
    let objects = loop {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let now = cached_objects(http, &ops).await;
        let all_in = count(&now, "rayclusters") >= args.clusters && count(&now, "pods") >= 2 * args.clusters;
        if all_in && now == last {
            break now;
        }
        last = now;
    };
    let load_seconds = started.elapsed().as_secs_f64();
    let (loaded, loaded_peak) = rss_kib(pid).unwrap();

    eprintln!("reading every cluster…");
    let mut clusters_seen = 0;
    for ns in 0..args.namespaces {
        let mut token_param = String::new();
        loop {
            let page: Value = http
                .get(format!(
                    "{}/v1/namespaces/{}/clusters?page_size=1000{token_param}",
                    env.url(),
                    bench_namespace(ns, args.namespaces)
                ))
                .bearer_auth(&bench.token)
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            clusters_seen += page["clusters"].as_array().map_or(0, Vec::len);
            match page["next_page_token"].as_str().filter(|t| !t.is_empty()) {
                Some(t) => token_param = format!("&page_token={t}"),
                None => break,
            }
        }
    }
    let describes = bench
        .each(args.clusters, |i| {
            let (ns, name) = bench.cluster(i);
            http.get(format!("{}/v1/namespaces/{ns}/clusters/{name}/details", env.url()))
        })
        .await;
    assert_eq!(clusters_seen, args.clusters, "lists did not show every cluster");
    assert_eq!(describes, args.clusters, "not every describe succeeded");
    let (read, read_peak) = rss_kib(pid).unwrap();

    let mib = |kib: u64| kib as f64 / 1024.0;
    let mut table = Table::new();
    table.load_style(ASCII_MARKDOWN).set_header(["measure", "value"]);
    let rows = [
        (
            "clusters / pods / events cached",
            format!(
                "{} / {} / {}",
                count(&objects, "rayclusters"),
                count(&objects, "pods"),
                count(&objects, "events")
            ),
        ),
        (
            "load time (create over REST, pods start)",
            format!("{load_seconds:.0} s"),
        ),
        ("RSS idle (empty cache)", format!("{:.1} MiB", mib(idle))),
        ("RSS loaded", format!("{:.1} MiB", mib(loaded))),
        ("peak RSS while loading", format!("{:.1} MiB", mib(loaded_peak))),
        ("RSS after listing and describing all", format!("{:.1} MiB", mib(read))),
        ("peak RSS overall", format!("{:.1} MiB", mib(read_peak))),
    ];
    for (k, v) in &rows {
        table.add_row([(*k).to_owned(), v.clone()]);
    }
    println!("memory: {} clusters in {} namespaces", args.clusters, args.namespaces);
    println!("{table}");
    println!(
        "{}",
        json!({
            "bench": "memory", "clusters": count(&objects, "rayclusters"), "pods": count(&objects, "pods"),
            "events": count(&objects, "events"), "load_seconds": load_seconds.round(),
            "rss_idle_mib": mib(idle), "rss_loaded_mib": mib(loaded), "rss_loaded_peak_mib": mib(loaded_peak),
            "rss_after_reads_mib": mib(read), "rss_peak_mib": mib(read_peak),
        })
    );
}
