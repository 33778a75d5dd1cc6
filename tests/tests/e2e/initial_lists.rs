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

/// The value of `key` in `uri`'s query.
fn param<'a>(uri: &'a str, key: &str) -> Option<&'a str> {
    let query = uri.split_once('?')?.1;
    query
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .find_map(|(k, v)| (k == key).then_some(v))
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
async fn without_watch_list_a_replica_lists_small_kinds_from_the_watch_cache_and_pages_big_ones() {
    let mut options = EnvOptions {
        teams: TEAMS.to_owned(),
        // Four namespaces are "big" here: they are paged from etcd.
        server_args: vec!["--cache-whole-lists-up-to".into(), "2".into()],
        ..EnvOptions::default()
    };
    options.sandbox.watch_list = false;
    let env = Env::start_with(options).await;
    env.ready_cluster("paged").await;
    let requests = cache_requests(&env);
    let lists = |kind: &str| -> Vec<String> {
        requests
            .iter()
            .filter(|(uri, watch)| !watch && uri.contains(kind))
            .map(|(uri, _)| uri.clone())
            .collect()
    };
    let from_watch_cache = |uri: &String| param(uri, "resourceVersion") == Some("0") && param(uri, "limit").is_none();
    let from_etcd_in_pages =
        |uri: &String| param(uri, "limit") == Some("500") && param(uri, "resourceVersion").is_none();
    let counting = |uri: &String| param(uri, "limit") == Some("1");
    // Few clusters and events (counted first): whole, from the watch cache.
    for kind in ["/rayclusters?", "/events?"] {
        let lists = lists(kind);
        assert!(
            lists.iter().any(from_watch_cache),
            "no list of {kind} from the watch cache: {lists:#?}"
        );
        assert!(lists.iter().any(counting), "{kind} was not counted first: {lists:#?}");
        assert!(!lists.iter().any(from_etcd_in_pages), "{kind} paged: {lists:#?}");
    }
    // Ray's pods are listed by label, which the API server does not count:
    // pages from etcd, never a whole list.
    let pods = lists("/pods?");
    assert!(pods.iter().any(from_etcd_in_pages), "pods not paged: {pods:#?}");
    assert!(!pods.iter().any(from_watch_cache), "pods listed whole: {pods:#?}");
    assert!(!pods.iter().any(counting), "pods counted: {pods:#?}");
    // More namespaces than `--cache-whole-lists-up-to`: pages from etcd.
    let namespaces: Vec<String> = env
        .sandbox
        .requests()
        .into_iter()
        .filter(|r| r.method == "GET" && r.uri.starts_with("/api/v1/namespaces?") && !r.uri.contains("watch=true"))
        .map(|r| r.uri)
        .collect();
    assert!(
        namespaces.iter().any(counting),
        "namespaces not counted: {namespaces:#?}"
    );
    assert!(
        namespaces.iter().any(from_etcd_in_pages),
        "namespaces not paged: {namespaces:#?}"
    );
    assert!(
        !namespaces.iter().any(from_watch_cache),
        "namespaces listed whole: {namespaces:#?}"
    );
    // The refused streaming watches: at most one per watcher that asked
    // before the first refusal was heard.
    let refused = requests
        .iter()
        .filter(|(uri, _)| uri.contains("sendInitialEvents=true"))
        .count();
    assert!((1..=5).contains(&refused), "{refused} streaming watches: {requests:#?}");
    assert_eq!(env.metric("krayne_cache_initial_list", "strategy=\"lists\"").await, 1.0);
    for (kind, read) in [
        ("pods", "etcd_pages"),
        ("namespaces", "etcd_pages"),
        ("rayclusters", "watch_cache"),
    ] {
        let lists = env
            .metric("krayne_cache_lists_total", &format!("kind=\"{kind}\",read=\"{read}\""))
            .await;
        assert!(lists >= 1.0, "{lists} {kind} lists read from {read}");
    }
    served_from_the_cache(&env, "paged").await;
}

/// The sandbox without WatchList answers as kube-apiserver 1.31 does: a
/// list at `resourceVersion=0` whole from its watch cache, `limit` or not;
/// a quorum list in pages, counting what follows where no selector is set.
#[tokio::test]
async fn the_sandbox_without_watch_list_pages_only_quorum_lists() {
    let mut options = EnvOptions::default();
    options.sandbox.watch_list = false;
    let env = Env::start_with(options).await;
    let get = |query: &'static str| {
        let url = format!("{}/api/v1/namespaces?{query}", env.sandbox.url());
        async move {
            reqwest::get(url)
                .await
                .unwrap()
                .json::<serde_json::Value>()
                .await
                .unwrap()
        }
    };
    let whole = get("resourceVersion=0&resourceVersionMatch=NotOlderThan&limit=1").await;
    let all = whole["items"].as_array().unwrap().len();
    assert!(all >= 4, "{whole}");
    assert!(whole["metadata"].get("continue").is_none(), "{whole}");
    let first = get("limit=1").await;
    assert_eq!(first["items"].as_array().unwrap().len(), 1);
    assert!(first["metadata"]["continue"].is_string(), "{first}");
    assert_eq!(first["metadata"]["remainingItemCount"], all - 1, "{first}");
    let selected = get("limit=1&labelSelector=%21no-such-label").await;
    assert!(selected["metadata"]["continue"].is_string(), "{selected}");
    assert!(selected["metadata"].get("remainingItemCount").is_none(), "{selected}");
}
