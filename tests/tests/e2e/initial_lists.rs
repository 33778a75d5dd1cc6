//! Issue 59: a replica's watch cache lists through streaming lists
//! (`sendInitialEvents`, Kubernetes' WatchList) where the API server
//! offers them, and through lists served from the API server's watch cache
//! (`resourceVersion=0`, one request each) where it refuses them.

use krayne_tests::{Env, EnvOptions, TEAMS};

/// The cache's requests for RayClusters, pods and events: `(uri, is a
/// watch)`.
fn cache_requests(env: &Env) -> Vec<(String, bool)> {
    env.sandbox
        .requests()
        .into_iter()
        .filter(|r| r.method == "GET")
        .filter(|r| {
            let path = r.uri.split('?').next().unwrap_or_default();
            ["/rayclusters", "/pods", "/events"].iter().any(|k| path.ends_with(k))
        })
        .map(|r| {
            let watch = r.uri.contains("watch=true") || r.uri.contains("watch=1");
            (r.uri, watch)
        })
        .collect()
}

/// `name` reads as ready, from the cache the lists filled.
async fn served_from_the_cache(env: &Env, name: &str) {
    let got = env
        .rest(&env.alice())
        .get(&format!("/v1/namespaces/ml-team/clusters/{name}"))
        .await
        .expect(200);
    assert_eq!(got.body["status"], "ready");
    let cached = env
        .metric("krayne_cache_reads_total", "kind=\"rayclusters\",source=\"cache\"")
        .await;
    assert!(cached >= 1.0, "{cached} reads from the cache");
}

#[tokio::test]
async fn a_replica_streams_its_initial_lists_where_the_api_server_offers_them() {
    let env = Env::start().await;
    env.ready_cluster("streamed").await;
    let requests = cache_requests(&env);
    for kind in ["/rayclusters?", "/pods?", "/events?"] {
        assert!(
            requests
                .iter()
                .any(|(uri, watch)| *watch && uri.contains(kind) && uri.contains("sendInitialEvents=true")),
            "no streaming list of {kind}: {requests:#?}"
        );
    }
    // A watcher's list pages (`limit=`) or reads the watch cache
    // (`resourceVersion=0`); krayne's own reads (a probe at start) do
    // neither.
    let listed: Vec<_> = requests
        .iter()
        .filter(|(uri, watch)| !watch && (uri.contains("limit=") || uri.contains("resourceVersion=0")))
        .collect();
    assert!(listed.is_empty(), "the watchers listed: {listed:#?}");
    assert_eq!(
        env.metric("krayne_cache_initial_list", "strategy=\"streaming\"").await,
        1.0
    );
    served_from_the_cache(&env, "streamed").await;
}

#[tokio::test]
async fn without_watch_list_a_replica_lists_from_the_api_servers_watch_cache() {
    let mut options = EnvOptions {
        teams: TEAMS.to_owned(),
        ..EnvOptions::default()
    };
    options.sandbox.watch_list = false;
    let env = Env::start_with(options).await;
    env.ready_cluster("paged").await;
    let requests = cache_requests(&env);
    for kind in ["/rayclusters?", "/pods?", "/events?"] {
        let lists: Vec<_> = requests
            .iter()
            .filter(|(uri, watch)| {
                !watch && uri.contains(kind) && uri.contains("resourceVersion=0&resourceVersionMatch=NotOlderThan")
            })
            .collect();
        assert!(
            !lists.is_empty(),
            "no list of {kind} from the watch cache: {requests:#?}"
        );
    }
    let paged: Vec<_> = requests.iter().filter(|(uri, _)| uri.contains("limit=")).collect();
    assert!(paged.is_empty(), "paged quorum reads from etcd: {paged:#?}");
    // The refused streaming watches: at most one per watcher that asked
    // before the first refusal was heard.
    let refused = requests
        .iter()
        .filter(|(uri, _)| uri.contains("sendInitialEvents=true"))
        .count();
    assert!((1..=4).contains(&refused), "{refused} streaming watches: {requests:#?}");
    assert_eq!(env.metric("krayne_cache_initial_list", "strategy=\"paged\"").await, 1.0);
    served_from_the_cache(&env, "paged").await;
}
