//! One shape per answer: the same cluster (and caller) read over REST and
//! over gRPC — in protobuf's JSON mapping, as `krayne -o json` prints it —
//! carry the same fields with the same values; so do audit events.

use std::time::Duration;

use krayne_client::{Client, json::to_json};
use krayne_tests::Env;
use serde_json::{Value, json};

/// Times are RFC 3339 on both sides, but protobuf's mapping may write
/// fractions REST does not: compared as instants.
fn same_time(a: &str, b: &str) -> bool {
    let parse = |s: &str| s.parse::<jiff::Timestamp>().ok();
    parse(a).is_some() && parse(a) == parse(b)
}

/// Every field either side has, at every level: REST's `null` is an unset
/// proto field (which the SDK's JSON writes as `null` too, or leaves out
/// for a field REST does not have), anything else must be equal.
fn compare(path: &str, rest: &Value, grpc: &Value, problems: &mut Vec<String>) {
    match (rest, grpc) {
        (Value::Object(r), Value::Object(g)) => {
            let keys: std::collections::BTreeSet<&String> = r.keys().chain(g.keys()).collect();
            for key in keys {
                let (rv, gv) = (r.get(key), g.get(key));
                match (rv, gv) {
                    (Some(rv), Some(gv)) => compare(&format!("{path}.{key}"), rv, gv, problems),
                    (Some(Value::Null), None) => {}
                    (None, _) => problems.push(format!("{path}.{key}: only over gRPC")),
                    (Some(_), None) => problems.push(format!("{path}.{key}: only over REST")),
                }
            }
        }
        (Value::Array(r), Value::Array(g)) => {
            if r.len() != g.len() {
                problems.push(format!("{path}: {} items over REST, {} over gRPC", r.len(), g.len()));
            }
            for (i, (rv, gv)) in r.iter().zip(g).enumerate() {
                compare(&format!("{path}[{i}]"), rv, gv, problems);
            }
        }
        // Enum values are spelled alike (`editor`): the SDK's JSON names
        // them as REST does. A proxy URL REST gives as a path on the
        // server, the SDK makes absolute against the server it uses.
        (Value::String(r), Value::String(g))
            if r != g
                && !same_time(r, g)
                && !(path.contains(".proxy_urls.") && r.starts_with('/') && g.ends_with(r.as_str())) =>
        {
            problems.push(format!("{path}: {r:?} over REST, {g:?} over gRPC"));
        }
        (Value::String(_), Value::String(_)) => {}
        (r, g) if r != g => problems.push(format!("{path}: {r} over REST, {g} over gRPC")),
        _ => {}
    }
}

#[tokio::test]
async fn rest_and_grpc_answers_carry_the_same_fields() {
    let env = Env::start().await;
    // One token both ways: whoami carries its expiry.
    let token = env.alice();
    let alice = env.rest(&token);
    let ns = "/v1/namespaces/ml-team/clusters";
    let body = json!({"name": "shapes", "worker_groups": [{"name": "cpu", "replicas": 1, "max_replicas": 2}]});
    alice.post(ns, &body).await.expect(201);
    alice
        .get(&format!("{ns}/shapes/wait?timeout_seconds=60"))
        .await
        .expect(200);
    // Let the cache settle on the ready state before reading both ways.
    tokio::time::sleep(Duration::from_millis(300)).await;

    let client = Client::connect(env.url()).await.unwrap().with_token(token.clone());
    let mut problems = Vec::new();
    let details = to_json(&client.describe("ml-team", "shapes").await.unwrap()).unwrap();
    let rest = alice.get(&format!("{ns}/shapes/details")).await.expect(200).body;
    assert!(!rest["pods"].as_array().unwrap().is_empty(), "pods to compare: {rest}");
    compare("details", &rest, &details, &mut problems);

    let info = to_json(&client.get("ml-team", "shapes").await.unwrap()).unwrap();
    let rest = alice.get(&format!("{ns}/shapes")).await.expect(200).body;
    compare("info", &rest, &info, &mut problems);

    let whoami = to_json(&client.whoami().await.unwrap()).unwrap();
    let rest = alice.get("/v1/whoami").await.expect(200).body;
    compare("whoami", &rest, &whoami, &mut problems);

    let admin = Client::connect(env.url()).await.unwrap().with_token(env.admin());
    let query = krayne_client::AuditQuery {
        action: "cluster.create".into(),
        ..krayne_client::AuditQuery::default()
    };
    let page = admin.audit_page(&query, "").await.unwrap();
    let grpc_event = to_json(&page.events[0]).unwrap();
    let rest = env
        .rest(&env.admin())
        .get("/v1/audit?action=cluster.create")
        .await
        .expect(200)
        .body;
    compare("audit", &rest["events"][0], &grpc_event, &mut problems);
    assert!(problems.is_empty(), "REST and gRPC differ:\n{}", problems.join("\n"));
}
