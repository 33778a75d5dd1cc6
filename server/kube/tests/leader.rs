//! Leader election against the sandbox's Leases (updates carrying the
//! resourceVersion read, as kube-apiserver checks it): one of two
//! candidates leads; when it goes, the other takes over within the lease's
//! duration, and the two never hold it at once; a candidate that cannot
//! reach the lease at first stands again until it can. Expiry is judged by
//! time observed: a holder whose clock is far behind keeps a lease it
//! renews, and one far ahead loses it once it stops.
// Test helpers outside #[test] fns: failing loudly is their job.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, Instant};

use k8s_openapi::{
    api::coordination::v1::{Lease, LeaseSpec},
    apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta},
};
use krayne_core::domain::Leadership as _;
use krayne_kube::{Client, LeaseLeadership, LeaseTerms};
use krayne_sandbox::{Sandbox, SandboxOptions};
use kube::{Api, api::PostParams};

async fn sandbox() -> (Sandbox, Client) {
    let mut options = SandboxOptions::fast();
    options.namespaces.push("krayne".into());
    let sandbox = Sandbox::start(options).await.unwrap();
    let client = Client::try_from(kube::Config::new(sandbox.url().parse().unwrap())).unwrap();
    (sandbox, client)
}

fn terms(seconds: u64) -> LeaseTerms {
    LeaseTerms {
        duration: Duration::from_secs(seconds),
        max_skew: Duration::from_secs(5),
    }
}

fn candidate(client: &Client, identity: &str) -> LeaseLeadership {
    LeaseLeadership::stand(client.clone(), "krayne", "krayne-lifecycle", identity, terms(3)).unwrap()
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
    // killed outright does not: e2e lifecycle::of_two_replicas_*, and the
    // test below).
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
    let refused = LeaseLeadership::stand(client, "krayne", "l", "a", terms(1));
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

/// Writes the lease as held by `holder`, renewed at `renewed` (another
/// machine's clock).
async fn hold_as(api: &Api<Lease>, holder: &str, renewed: jiff::Timestamp) {
    let spec = LeaseSpec {
        holder_identity: Some(holder.into()),
        lease_duration_seconds: Some(3),
        renew_time: Some(MicroTime(renewed)),
        ..LeaseSpec::default()
    };
    match api.get_opt("krayne-lifecycle").await.unwrap() {
        Some(mut lease) => {
            lease.spec = Some(spec);
            api.replace("krayne-lifecycle", &PostParams::default(), &lease)
                .await
                .unwrap();
        }
        None => {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some("krayne-lifecycle".into()),
                    ..ObjectMeta::default()
                },
                spec: Some(spec),
            };
            api.create(&PostParams::default(), &lease).await.unwrap();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expiry_is_judged_by_time_observed_never_by_the_holders_clock() {
    let (_sandbox, client) = sandbox().await;
    let api: Api<Lease> = Api::namespaced(client.clone(), "krayne");
    // A holder whose clock is an hour behind, renewing every second: its
    // renewTime always looks long past here, yet the lease is live.
    let hour = jiff::SignedDuration::from_hours(1);
    hold_as(&api, "behind", jiff::Timestamp::now() - hour).await;
    let patient = candidate(&client, "patient");
    for _ in 0..8 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        hold_as(&api, "behind", jiff::Timestamp::now() - hour).await;
    }
    assert!(!patient.holds().await, "took a lease its holder renews");
    // A holder whose clock is an hour ahead stops renewing: its renewTime
    // looks valid for an hour here, yet the lease lapses in its duration.
    hold_as(&api, "ahead", jiff::Timestamp::now() + hour).await;
    let started = Instant::now();
    tokio::time::timeout(Duration::from_secs(20), patient.leading())
        .await
        .expect("the lapsed lease is taken");
    assert!(patient.holds().await);
    assert!(
        started.elapsed() >= Duration::from_secs(3),
        "taken before its duration had passed unchanged: {:?}",
        started.elapsed()
    );
}
