//! `krayne get -w` and the SDK's `watch_clusters` (issue 25): the table
//! now, then each change as it happens; `-o json` one event per line.

use std::time::Duration;

use futures::StreamExt as _;
use krayne_client::{Client, WatchFrom, event_type_name};
use krayne_tests::Env;
use serde_json::json;
use tokio::io::{AsyncBufReadExt as _, BufReader};

use crate::support::{Krayne, words};

const NS: &str = "/v1/namespaces/ml-team/clusters";

#[tokio::test]
async fn krayne_get_watch_prints_the_clusters_then_each_change() {
    let env = Env::start().await;
    let rest = env.rest(&env.alice());
    rest.post(NS, &json!({"name": "before"})).await.expect(201);
    // Settled before the watch starts: its own changes (creating, then
    // containers-creating, …) would interleave with those of `during`.
    rest.get(&format!("{NS}/before/wait?timeout_seconds=60"))
        .await
        .expect(200);
    let krayne = Krayne::new(&env, &env.alice());
    let mut child = krayne.spawn(&["get", "-w", "-n", "ml-team"]);
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut next = async || {
        tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .expect("a line in time")
            .unwrap()
            .expect("krayne still watching")
    };
    let header = next().await;
    assert_eq!(
        words(&header)[..4],
        ["EVENT", "NAME", "NAMESPACE", "STATUS"],
        "{header}"
    );
    let first = next().await;
    assert_eq!(words(&first)[..3], ["ADDED", "before", "ml-team"], "{first}");

    rest.post(NS, &json!({"name": "during"})).await.expect(201);
    rest.delete(&format!("{NS}/during")).await.expect(204);
    let mut seen = Vec::new();
    loop {
        let line = next().await;
        let w: Vec<String> = words(&line).into_iter().map(str::to_owned).collect();
        seen.push(line);
        if w[..2] == ["DELETED", "during"] {
            break;
        }
    }
    assert!(seen[0].starts_with("ADDED") && seen[0].contains("during"), "{seen:#?}");
    // Issue 41: later rows line up under the header, and a change that
    // changes nothing shown is not printed again.
    let status_at = header.find("STATUS").unwrap();
    for line in &seen {
        let status = words(line)[3];
        assert_eq!(line.find(status), Some(status_at), "{header}\n{line}");
    }
    // Every word but the age (EVENT NAME NAMESPACE STATUS WORKERS AGE).
    let shown: Vec<Vec<&str>> = seen
        .iter()
        .map(|l| {
            let mut w = words(l);
            w.remove(5);
            w
        })
        .collect();
    for pair in shown.windows(2) {
        assert!(
            pair[0] != pair[1] || pair[0][0] != "MODIFIED",
            "a repeated row: {seen:#?}"
        );
    }
    child.kill().await.unwrap();

    let mut json_child = krayne.spawn(&["get", "-w", "-A", "-o", "json"]);
    let mut json_lines = BufReader::new(json_child.stdout.take().unwrap()).lines();
    let line = tokio::time::timeout(Duration::from_secs(30), json_lines.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let event: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(
        (event["type"].as_str(), event["cluster"]["name"].as_str()),
        (Some("ADDED"), Some("before"))
    );
    assert!(event["resource_version"].as_str().is_some_and(|v| v.contains('.')));
    json_child.kill().await.unwrap();
}

#[tokio::test]
async fn the_sdk_streams_changes_and_resumes_from_a_version() {
    let env = Env::start().await;
    let client = Client::connect(env.url()).await.unwrap().with_token(env.alice());
    let mut events = std::pin::pin!(
        client
            .watch_clusters(Some("ml-team"), WatchFrom::default())
            .await
            .unwrap()
    );
    let start = events.next().await.unwrap().unwrap();
    assert_eq!(event_type_name(&start), "BOOKMARK");
    env.rest(&env.alice())
        .post(NS, &json!({"name": "sdk"}))
        .await
        .expect(201);
    let added = events.next().await.unwrap().unwrap();
    assert_eq!(
        (event_type_name(&added), added.cluster.unwrap().name.as_str()),
        ("ADDED", "sdk")
    );

    let from = WatchFrom {
        resource_version: Some(start.resource_version.clone()),
        send_initial_events: false,
    };
    let mut again = std::pin::pin!(client.watch_clusters(Some("ml-team"), from).await.unwrap());
    let replayed = again.next().await.unwrap().unwrap();
    assert_eq!(
        replayed.resource_version, added.resource_version,
        "resumed right after the start"
    );

    let too_old = WatchFrom {
        resource_version: Some("00000000.1".into()),
        send_initial_events: false,
    };
    let gone = match client.watch_clusters(Some("ml-team"), too_old).await {
        Ok(_) => panic!("a version of another server is not resumed"),
        Err(e) => e,
    };
    assert_eq!(gone.code(), krayne_client::Code::OutOfRange, "{gone}");
}
