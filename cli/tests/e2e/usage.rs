//! `krayne usage` (issue 58) through the binary: a table with totals,
//! CSV for spreadsheets, JSON, the chart, and the month's line under
//! `krayne quota`.

use std::time::Duration;

use krayne_tests::{Env, EnvOptions, TEAMS};
use serde_json::json;

use crate::support::Krayne;

#[tokio::test]
async fn krayne_usage_prints_a_table_csv_json_and_a_chart() {
    let env = Env::start_with(EnvOptions {
        server_args: ["--lifecycle", "report", "--lifecycle-lease-seconds", "3"]
            .map(str::to_owned)
            .to_vec(),
        teams: TEAMS.to_owned(),
        ..EnvOptions::default()
    })
    .await;
    env.rest(&env.alice())
        .post(
            "/v1/namespaces/ml-team/clusters",
            &json!({"name": "u", "worker_groups": [{"name": "gpu", "replicas": 1, "max_replicas": 1, "gpus": 1}]}),
        )
        .await
        .expect(201);
    let k = Krayne::new(&env, &env.alice());
    k.run(&["wait", "u", "-n", "ml-team"]).await.code(0);
    tokio::time::sleep(Duration::from_secs(3)).await;

    let table = k
        .run(&["usage", "-n", "ml-team", "--by", "cluster"])
        .await
        .code(0)
        .stdout();
    assert!(table.contains("NAMESPACE") && table.contains("GPU-HOURS"), "{table}");
    assert!(
        table.lines().any(|l| l.starts_with("ml-team") && l.contains(" u ")),
        "{table}"
    );
    assert!(table.lines().last().unwrap_or("").starts_with("TOTAL"), "{table}");

    let csv = k
        .run(&["usage", "-n", "ml-team", "--by", "cluster,worker_group", "-o", "csv"])
        .await
        .code(0)
        .stdout();
    let mut lines = csv.lines();
    assert_eq!(
        lines.next(),
        Some(
            "NAMESPACE,CLUSTER,WORKER GROUP,CPU-HOURS,MEMORY GIB-HOURS,GPU-HOURS,CLUSTER-HOURS,SUSPENDED-HOURS,ESTIMATED"
        )
    );
    let gpu_row = lines
        .find(|l| l.starts_with("ml-team,u,gpu,"))
        .unwrap_or_else(|| panic!("{csv}"));
    let gpu_hours: f64 = gpu_row.split(',').nth(5).unwrap().parse().unwrap();
    assert!(gpu_hours > 0.0, "{csv}");
    assert!(!csv.contains("TOTAL"), "CSV rows are data only: {csv}");

    let data = k.run(&["usage", "-A", "-o", "json"]).await.json();
    assert!(data["totals"]["gpu_hours"].as_f64().unwrap_or(0.0) > 0.0, "{data}");

    let chart = k.run(&["usage", "-n", "ml-team", "--chart"]).await.code(0);
    let today = jiff::Timestamp::now().strftime("%Y-%m-%d").to_string();
    assert!(
        chart.stdout().lines().any(|l| l.starts_with(&today) && l.contains('█')),
        "{}",
        chart.stdout()
    );
    assert!(chart.stderr().contains("GPU-hours per day"), "{}", chart.stderr());

    let refused = k.run(&["usage", "-n", "other-team"]).await;
    assert_ne!(refused.0.status.code(), Some(0), "{}", refused.stderr());
    let quota = k.run(&["quota", "-n", "ml-team"]).await.code(0);
    assert!(quota.stderr().contains("This month:"), "{}", quota.stderr());
}
