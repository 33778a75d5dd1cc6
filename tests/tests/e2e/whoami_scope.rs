//! Issue 59: what a caller may use is looked up by their grants, so
//! `whoami` answers what the caller's grants reach, whatever the platform's
//! namespace count; a global admin's `whoami` is bounded (their teams'
//! namespaces and a count), and `GET /v1/namespaces` pages through all.

use krayne_tests::{Env, EnvOptions};
use serde_json::Value;

fn names(list: &Value) -> Vec<&str> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|n| n["namespace"].as_str().unwrap())
        .collect()
}

#[tokio::test]
async fn whoami_answers_what_the_callers_grants_reach_and_an_admins_is_bounded() {
    let mut options = EnvOptions::default();
    options
        .sandbox
        .namespaces
        .extend((0..300).map(|i| format!("tenant-{i:03}")));
    options.sandbox.namespaces.push("shared-models".into());
    let env = Env::start_with(options).await;
    let existing: Value = reqwest::get(format!("{}/api/v1/namespaces", env.sandbox.url()))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let total = existing["items"].as_array().unwrap().len();
    assert!(total > 300, "{total} namespaces");

    let alice = env.rest(&env.alice()).get("/v1/whoami").await.expect(200).body;
    assert_eq!(
        names(&alice["namespaces"]),
        ["ml-team", "shared-data", "shared-models"],
        "{alice}"
    );
    assert_eq!(alice["namespace_count"], 3);

    let admin = env.rest(&env.admin());
    let me = admin.get("/v1/whoami").await.expect(200).body;
    assert_eq!(me["global_admin"], true);
    assert_eq!(
        me["namespaces"],
        serde_json::json!([]),
        "a global admin in no team: no namespace listed"
    );
    assert_eq!(me["namespace_count"], total, "{me}");
    let mut all = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let path = match &token {
            Some(t) => format!("/v1/namespaces?page_size=100&page_token={t}"),
            None => "/v1/namespaces?page_size=100".to_owned(),
        };
        let page = admin.get(&path).await.expect(200).body;
        all.extend(names(&page["namespaces"]).into_iter().map(str::to_owned));
        match page["next_page_token"].as_str() {
            Some(t) if !t.is_empty() => token = Some(t.to_owned()),
            _ => break,
        }
    }
    assert_eq!(all.len(), total, "every namespace, paged");
    assert!(all.windows(2).all(|w| w[0] < w[1]), "in order, each once");

    let mut grpc = env.grpc(&env.admin()).await;
    let me = grpc
        .identity
        .who_am_i(krayne_proto::v1::WhoAmIRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(me.namespace_count, total as u64);
    assert!(me.namespaces.is_empty());
}
