//! Watches: ordered events, resume from a resourceVersion, 410 Gone,
//! bookmarks, and kube-runtime's watcher on top.

use std::time::Duration;

use futures::{StreamExt as _, TryStreamExt as _};
use krayne_sandbox::SandboxOptions;
use kube::{
    api::{DeleteParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams},
    runtime::watcher,
};
use serde_json::json;

use crate::{raycluster, rayclusters, start, start_with};

/// No operator: the watch sees only the test's own writes.
fn paused() -> SandboxOptions {
    SandboxOptions {
        run_operator: false,
        ..SandboxOptions::fast()
    }
}

#[tokio::test]
async fn watch_streams_changes_in_order_and_resumes() {
    let (_sb, client) = start_with(paused()).await;
    let rc = rayclusters(&client, "ml");
    let list = rc.list(&Default::default()).await.unwrap();
    let from = list.metadata.resource_version.unwrap();
    let mut stream = rc
        .watch(&WatchParams::default().timeout(10), &from)
        .await
        .unwrap()
        .boxed();

    rc.create(&PostParams::default(), &raycluster("name: w1\nnamespace: ml\n"))
        .await
        .unwrap();
    rc.patch(
        "w1",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"a": "1"}}})),
    )
    .await
    .unwrap();
    rc.delete("w1", &DeleteParams::default()).await.unwrap();

    let mut kinds = Vec::new();
    let mut resume_at = String::new();
    while kinds.len() < 3 {
        match stream.try_next().await.unwrap().unwrap() {
            WatchEvent::Added(o) => {
                resume_at = o.metadata.resource_version.clone().unwrap();
                kinds.push("ADDED");
            }
            WatchEvent::Modified(_) => kinds.push("MODIFIED"),
            WatchEvent::Deleted(_) => kinds.push("DELETED"),
            WatchEvent::Bookmark(_) => {}
            WatchEvent::Error(e) => panic!("{e:?}"),
        }
    }
    assert_eq!(kinds, ["ADDED", "MODIFIED", "DELETED"]);

    // Resuming after the ADDED replays only what followed it.
    let mut resumed = rc
        .watch(&WatchParams::default().timeout(10), &resume_at)
        .await
        .unwrap()
        .boxed();
    let first = resumed.try_next().await.unwrap().unwrap();
    assert!(matches!(first, WatchEvent::Modified(_)), "{first:?}");
}

#[tokio::test]
async fn a_too_old_resource_version_is_gone() {
    let mut options = paused();
    options.history_limit = 5;
    let (_sb, client) = start_with(options).await;
    let rc = rayclusters(&client, "ml");
    for i in 0..8 {
        rc.create(
            &PostParams::default(),
            &raycluster(&format!("name: g{i}\nnamespace: ml\n")),
        )
        .await
        .unwrap();
    }
    let mut stream = rc.watch(&WatchParams::default().timeout(5), "2").await.unwrap().boxed();
    match stream.try_next().await.unwrap().unwrap() {
        WatchEvent::Error(e) => assert_eq!((e.code, e.reason.as_str()), (410, "Expired")),
        other => panic!("expected 410, got {other:?}"),
    }
}

#[tokio::test]
async fn bookmarks_arrive_when_allowed() {
    // kube-rs asks for bookmarks by default.
    let (_sb, client) = start().await;
    let rc = rayclusters(&client, "ml");
    let rv = rc
        .list(&Default::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut stream = rc
        .watch(&WatchParams::default().timeout(10), &rv)
        .await
        .unwrap()
        .boxed();
    let event = tokio::time::timeout(Duration::from_secs(5), stream.try_next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(matches!(event, WatchEvent::Bookmark(_)), "{event:?}");
}

#[tokio::test]
async fn kube_runtime_watcher_lists_then_follows() {
    let (_sb, client) = start_with(paused()).await;
    let rc = rayclusters(&client, "ml");
    rc.create(&PostParams::default(), &raycluster("name: before\nnamespace: ml\n"))
        .await
        .unwrap();
    let mut events = watcher(rc.clone(), watcher::Config::default()).boxed();
    let mut seen = Vec::new();
    while !seen.contains(&"after".to_owned()) {
        let event = tokio::time::timeout(Duration::from_secs(10), events.try_next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        match event {
            watcher::Event::InitApply(o) | watcher::Event::Apply(o) => seen.push(o.metadata.name.unwrap()),
            watcher::Event::InitDone => {
                rc.create(&PostParams::default(), &raycluster("name: after\nnamespace: ml\n"))
                    .await
                    .unwrap();
            }
            _ => {}
        }
    }
    assert_eq!(seen, ["before", "after"]);
}
