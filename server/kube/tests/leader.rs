//! Leader election against the sandbox's Leases (server-side apply with
//! field ownership, as kube-apiserver has it): one of two candidates leads;
//! when it goes, the other takes over within the lease's duration, and the
//! two never hold it at once; a candidate that cannot reach the lease at
//! first stands again until it can.
// Test helpers outside #[test] fns: failing loudly is their job.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, Instant};

use krayne_core::domain::Leadership as _;
use krayne_kube::{Client, LeaseLeadership};
use krayne_sandbox::{Sandbox, SandboxOptions};

async fn sandbox() -> (Sandbox, Client) {
    let mut options = SandboxOptions::fast();
    options.namespaces.push("krayne".into());
    let sandbox = Sandbox::start(options).await.unwrap();
    let client = Client::try_from(kube::Config::new(sandbox.url().parse().unwrap())).unwrap();
    (sandbox, client)
}

fn candidate(client: &Client, identity: &str) -> LeaseLeadership {
    LeaseLeadership::stand(
        client.clone(),
        "krayne",
        "krayne-lifecycle",
        identity,
        Duration::from_secs(3),
    )
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_leads_and_the_other_takes_over_when_it_goes() {
    let (_sandbox, client) = sandbox().await;
    let (a, b) = (candidate(&client, "replica-a"), candidate(&client, "replica-b"));
    tokio::time::timeout(Duration::from_secs(20), async {
        tokio::select! {
            () = a.leading() => {}
            () = b.leading() => {}
        }
    })
    .await
    .expect("one of them leads");
    let (holds_a, holds_b) = (a.holds().await, b.holds().await);
    assert!(holds_a ^ holds_b, "exactly one holds: a {holds_a}, b {holds_b}");
    let (leader, follower) = if holds_a { (a, b) } else { (b, a) };

    // The leader goes (it gives the lease back as it does; a replica
    // killed outright does not: e2e lifecycle::of_two_replicas_*).
    drop(leader);
    let started = Instant::now();
    tokio::time::timeout(Duration::from_secs(20), follower.leading())
        .await
        .expect("the other takes over");
    assert!(follower.holds().await);
    // Within the lease's duration (3 s) past its last renewal, plus the
    // follower's polling and back-off.
    assert!(
        started.elapsed() < Duration::from_secs(12),
        "took {:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn a_lease_shorter_than_two_seconds_is_refused() {
    let (_sandbox, client) = sandbox().await;
    let refused = LeaseLeadership::stand(client, "krayne", "l", "a", Duration::from_secs(1));
    assert!(refused.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_candidate_stands_again_until_the_api_server_answers() {
    let (mut sandbox, client) = sandbox().await;
    sandbox.stop_api().await;
    let candidate = candidate(&client, "patient");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(!candidate.holds().await, "no lease while the API server is away");
    sandbox.start_api().await.unwrap();
    tokio::time::timeout(Duration::from_secs(30), candidate.leading())
        .await
        .expect("it leads once the API server is back");
    assert!(candidate.holds().await);
}
