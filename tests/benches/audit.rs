//! Audit throughput on a real Postgres: single-row inserts vs the batching
//! writer, the latency the write-ahead row adds to a mutation, and
//! pgbench's single-row insert rate on the same database for scale.
//!
//! `cargo bench -p krayne-tests --bench audit` (uses `TEST_DATABASE_URL`,
//! else a throwaway cluster). Prints a table and one JSON line.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::panic,
    missing_docs
)]

use std::time::{Duration, Instant};

use krayne_server::{
    domain::{
        AuditSink as _,
        audit::{AuditEntry, AuditFilter, Outcome, RequestMeta, Transport},
    },
    store::{DatabaseOptions, QueueOptions, SqlAuditSink, Store},
};
use krayne_tests::load::percentile;
use serde_json::json;

fn entry(outcome: Outcome) -> AuditEntry {
    AuditEntry {
        id: uuid::Uuid::now_v7().to_string(),
        occurred_at: jiff::Timestamp::now().to_string(),
        meta: RequestMeta {
            request_id: uuid::Uuid::new_v4().to_string().into(),
            correlation_id: None,
            transport: Transport::Rest,
            source_ip: Some("10.0.0.1".into()),
            user_agent: Some("bench".into()),
        },
        subject: "alice@example.com".into(),
        email: None,
        groups: vec!["ml-research".into()],
        teams: vec!["ml-research".into()],
        action: "cluster.create".into(),
        namespace: Some("ml-team".into()),
        cluster: Some("bench".into()),
        summary: json!({"spec": {"name": "bench", "worker_groups": [{"replicas": 2}]}}),
        outcome,
        completed_at: None,
        http_status: Some(201),
        grpc_code: Some("OK".into()),
        error: None,
        duration_ms: Some(5),
    }
}

async fn count(sink: &SqlAuditSink) -> usize {
    sink.query(&AuditFilter::default(), 1_000_000, None)
        .await
        .unwrap()
        .len()
}

/// pgbench's single-row INSERT transactions per second on a table shaped
/// like the audit table, on the same server.
fn pgbench(url: &str) -> Option<f64> {
    let bin = ["17", "16", "15", "14"]
        .iter()
        .map(|v| format!("/usr/lib/postgresql/{v}/bin/pgbench"))
        .find(|p| std::path::Path::new(p).exists())?;
    let setup = "CREATE TABLE IF NOT EXISTS pgbench_audit (id uuid PRIMARY KEY DEFAULT gen_random_uuid(), occurred_at timestamptz NOT NULL DEFAULT now(), request_id text, actor_subject text, action text, namespace text, cluster text, request_summary jsonb, outcome text)";
    let psql = bin.replace("pgbench", "psql");
    std::process::Command::new(&psql)
        .args([url, "-qc", setup])
        .status()
        .ok()?;
    let script = std::env::temp_dir().join("krayne-pgbench.sql");
    std::fs::write(&script, "INSERT INTO pgbench_audit (request_id, actor_subject, action, namespace, cluster, request_summary, outcome) VALUES (md5(random()::text), 'alice@example.com', 'cluster.create', 'ml-team', 'bench', '{\"spec\": {\"name\": \"bench\"}}', 'succeeded');\n").ok()?;
    let out = std::process::Command::new(&bin)
        .args(["-n", "-c", "1", "-t", "2000", "-f"])
        .arg(&script)
        .arg(url)
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find(|l| l.starts_with("tps = "))
        .and_then(|l| l.split_whitespace().nth(2))
        .and_then(|v| v.parse().ok())
}

#[tokio::main]
async fn main() {
    let db = krayne_tests::test_database().await;
    let store = Store::connect(&DatabaseOptions {
        url: db.url.clone(),
        max_connections: 4,
        statement_timeout: Duration::from_secs(30),
        acquire_timeout: Duration::from_secs(5),
        ca_file: None,
    })
    .unwrap();
    store.migrate().await.unwrap();
    // Room for the whole burst: beyond its queue the writer drops (and
    // counts) rows rather than block requests.
    let sink = SqlAuditSink::start(
        store.clone(),
        &QueueOptions {
            batch_queue: 50_000,
            ..QueueOptions::default()
        },
        "bench",
    );

    const SINGLE: usize = 2_000;
    let started = Instant::now();
    for _ in 0..SINGLE {
        store.insert(&[entry(Outcome::Succeeded)]).await.unwrap();
    }
    let single_rate = SINGLE as f64 / started.elapsed().as_secs_f64();

    const MULTI: usize = 20_000;
    let rows: Vec<AuditEntry> = (0..MULTI).map(|_| entry(Outcome::Succeeded)).collect();
    let started = Instant::now();
    for chunk in rows.chunks(200) {
        store.insert(chunk).await.unwrap();
    }
    let multi_rate = MULTI as f64 / started.elapsed().as_secs_f64();

    // The batching writer end to end: records queued, then written.
    const BATCHED: usize = 20_000;
    let before = count(&sink).await;
    let started = Instant::now();
    for _ in 0..BATCHED {
        sink.record(&entry(Outcome::Denied)).await;
    }
    while count(&sink).await < before + BATCHED {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let batched_rate = BATCHED as f64 / started.elapsed().as_secs_f64();

    // The write-ahead cost of one mutation: the pending row before the
    // Kubernetes call, and its outcome after.
    let mut begin = Vec::new();
    let mut finish = Vec::new();
    for _ in 0..500 {
        let mut e = entry(Outcome::Pending);
        let t = Instant::now();
        sink.begin(&e).await.unwrap();
        begin.push(t.elapsed());
        e.outcome = Outcome::Succeeded;
        e.completed_at = Some(jiff::Timestamp::now().to_string());
        let t = Instant::now();
        sink.finish(&e).await;
        finish.push(t.elapsed());
    }
    begin.sort();
    finish.sort();
    let pg = pgbench(&db.url);

    println!(
        "audit throughput on Postgres ({})",
        krayne_server::store::redact(&db.url)
    );
    println!("{:<44} {:>12}", "measure", "value");
    println!("{:<44} {:>10.0}/s", "single-row inserts (sequential)", single_rate);
    println!(
        "{:<44} {:>10.0}/s",
        "multi-row inserts (200 rows/statement)", multi_rate
    );
    println!("{:<44} {:>11.1}x", "multi-row / single-row", multi_rate / single_rate);
    println!("{:<44} {:>10.0}/s", "batching writer end to end (record)", batched_rate);
    match pg {
        Some(tps) => {
            println!("{:<44} {:>10.0}/s", "pgbench single-row INSERT (1 client)", tps);
            println!("{:<44} {:>11.2}x", "krayne single-row / pgbench", single_rate / tps);
        }
        None => println!("{:<44} {:>12}", "pgbench single-row INSERT", "n/a"),
    }
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "{:<44} {:>9.2} ms",
        "write-ahead row (begin) p50",
        ms(percentile(&begin, 0.5))
    );
    println!(
        "{:<44} {:>9.2} ms",
        "write-ahead row (begin) p99",
        ms(percentile(&begin, 0.99))
    );
    println!(
        "{:<44} {:>9.2} ms",
        "outcome update (finish) p50",
        ms(percentile(&finish, 0.5))
    );
    println!(
        "{:<44} {:>9.2} ms",
        "outcome update (finish) p99",
        ms(percentile(&finish, 0.99))
    );
    println!(
        "{}",
        json!({
            "bench": "audit", "single_rows_per_s": single_rate.round(), "multi_rows_per_s": multi_rate.round(),
            "batched_writer_rows_per_s": batched_rate.round(),
            "pgbench_tps": pg.map(f64::round), "begin_p50_ms": ms(percentile(&begin, 0.5)),
            "begin_p99_ms": ms(percentile(&begin, 0.99)), "finish_p50_ms": ms(percentile(&finish, 0.5)),
            "finish_p99_ms": ms(percentile(&finish, 0.99)),
        })
    );
}
