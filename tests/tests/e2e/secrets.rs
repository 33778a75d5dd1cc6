//! No secrets in logs. Every server the suites start logs at debug level
//! and its log is scanned when it is dropped (krayne_tests::secrets_in);
//! this test adds what the others lack: a database password, refused and
//! tampered tokens, and a database outage, so error paths log too.

use std::net::SocketAddr;

use krayne_tests::{Env, EnvOptions, Proxy, Rest, register_secret, secrets_in, test_database};
use serde_json::json;

const PASSWORD: &str = "Pa55-w0rd-never-logged";

#[tokio::test]
async fn tokens_keys_and_database_passwords_never_reach_the_log() {
    let db = test_database().await;
    // Trust authentication ignores the password; the server still holds it.
    let (scheme, rest) = db.url.split_once("://").unwrap();
    let (user, host_db) = rest.split_once('@').unwrap();
    let user = user.split(':').next().unwrap();
    let target: SocketAddr = host_db.split('/').next().unwrap().parse().unwrap();
    let proxy = Proxy::start(target).await;
    let database = db.url.replacen(
        &format!("{user}@{target}"),
        &format!("{user}:{PASSWORD}@{}", proxy.addr),
        1,
    );
    assert!(
        database.starts_with(&format!("{scheme}://{user}:{PASSWORD}@")),
        "{database}"
    );
    register_secret(PASSWORD);
    let env = Env::start_with(EnvOptions {
        database_url: Some(database),
        server_args: vec!["--log".into(), "debug".into()],
        ..EnvOptions::default()
    })
    .await;
    let alice = env.rest(&env.alice());
    alice.get("/v1/whoami").await.expect(200);
    alice
        .post("/v1/namespaces/ml-team/clusters", &json!({"name": "logged"}))
        .await
        .expect(201);
    let mut grpc = env.grpc(&env.alice()).await;
    grpc.identity
        .who_am_i(krayne_proto::v1::WhoAmIRequest {})
        .await
        .unwrap();

    // Refused tokens: tampered, for another issuer, garbage.
    let token = env.alice();
    let (head, _) = token.rsplit_once('.').unwrap();
    for bad in [
        format!("{head}.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"),
        format!("{}x", &token[..token.len() - 1]),
        "not-a-token".to_owned(),
    ] {
        Rest::new(&env.url(), Some(bad)).get("/v1/whoami").await.expect(401);
    }
    // The database goes away: mutations fail and the errors are logged.
    proxy.down();
    alice
        .post("/v1/namespaces/ml-team/clusters", &json!({"name": "refused"}))
        .await
        .expect(503);
    krayne_tests::dependency_becomes(&env.ops(), "audit_database", "down", std::time::Duration::from_secs(10)).await;
    proxy.up();

    let log = env.server.log.lock().unwrap().clone();
    assert!(log.contains("DEBUG"), "the server logged at debug level");
    assert!(log.contains("audit write failed"), "the outage was logged");
    let found = secrets_in(&log);
    assert!(found.is_empty(), "{found:#?}");
}
