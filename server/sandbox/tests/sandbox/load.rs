//! Consistency under concurrent writes.

use futures::future::join_all;
use k8s_openapi::api::core::v1::Pod;
use krayne_sandbox::SandboxOptions;
use kube::api::{ListParams, PostParams};

use crate::{api_error, eventually, raycluster, rayclusters, start_with};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_creates_stay_consistent() {
    let mut options = SandboxOptions::fast();
    options.operator.time_scale = 10_000.0;
    let (_sb, client) = start_with(options).await;
    let rc = rayclusters(&client, "ml");

    let distinct = (0..200).map(|i| {
        let rc = rc.clone();
        async move {
            rc.create(
                &PostParams::default(),
                &raycluster(&format!("name: c{i}\nnamespace: ml\n")),
            )
            .await
        }
    });
    let results = join_all(distinct).await;
    assert!(
        results.iter().all(Result::is_ok),
        "{:?}",
        results.iter().find(|r| r.is_err())
    );
    assert_eq!(rc.list(&ListParams::default()).await.unwrap().items.len(), 200);

    let same = (0..50).map(|_| {
        let rc = rc.clone();
        async move {
            rc.create(&PostParams::default(), &raycluster("name: contested\nnamespace: ml\n"))
                .await
        }
    });
    let results = join_all(same).await;
    let won = results.iter().filter(|r| r.is_ok()).count();
    let lost: Vec<String> = results
        .into_iter()
        .filter_map(Result::err)
        .map(|e| api_error(e).0)
        .collect();
    assert_eq!(won, 1);
    assert_eq!(lost.len(), 49);
    assert!(lost.iter().all(|r| r == "AlreadyExists"), "{lost:?}");

    // The operator made exactly one head per cluster.
    let pods: kube::Api<Pod> = kube::Api::namespaced(client.clone(), "ml");
    let heads = ListParams::default().labels("ray.io/node-type=head");
    eventually("201 heads", || async {
        (pods.list(&heads).await.unwrap().items.len() == 201).then_some(())
    })
    .await;
}
