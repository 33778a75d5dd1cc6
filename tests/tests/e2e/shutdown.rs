//! SIGTERM: requests in flight finish; new connections are refused.

use krayne_tests::{Env, EnvOptions};
use serde_json::json;

#[tokio::test]
async fn requests_in_flight_complete_after_sigterm() {
    let mut options = EnvOptions::default();
    // Slow pods keep the wait below in flight when the signal comes.
    options.sandbox.operator.start_delay = std::time::Duration::from_millis(1500);
    let mut env = Env::start_with(options).await;
    let alice = env.rest(&env.alice());
    alice
        .post("/v1/namespaces/ml-team/clusters", &json!({"name": "slow"}))
        .await
        .expect(201);
    let waiting = tokio::spawn({
        let alice = alice.clone();
        async move {
            alice
                .get("/v1/namespaces/ml-team/clusters/slow/wait?timeout_seconds=30")
                .await
        }
    });
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    env.server.terminate();
    let answer = waiting.await.unwrap().expect(200);
    assert_eq!(answer.body["status"], "ready");
    assert_eq!(env.server.exit_code().await, Some(0));
    let log = env.server.log.lock().unwrap().clone();
    assert!(log.contains("shutting down"), "{log}");
}
