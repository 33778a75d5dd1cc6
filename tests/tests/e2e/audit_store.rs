//! The audit store's contract, run on Postgres and on SQLite alike.

use std::{collections::HashSet, sync::Arc, time::Duration};

use krayne_server::{
    domain::{
        AuditSink as _,
        audit::{AuditEntry, AuditFilter, Outcome, RequestMeta, Transport},
    },
    store::{DatabaseOptions, QueueOptions, SqlAuditSink, Store},
};
use krayne_tests::test_database;
use serde_json::json;

fn options(url: &str) -> DatabaseOptions {
    DatabaseOptions {
        url: url.to_owned(),
        max_connections: 5,
        statement_timeout: Duration::from_secs(5),
        acquire_timeout: Duration::from_secs(5),
        ca_file: None,
    }
}

fn at(minutes_ago: i64) -> String {
    jiff::Timestamp::now()
        .checked_sub(jiff::SignedDuration::from_mins(minutes_ago))
        .unwrap()
        .to_string()
}

fn entry(action: &str, namespace: &str, subject: &str, outcome: Outcome, minutes_ago: i64) -> AuditEntry {
    AuditEntry {
        id: uuid::Uuid::now_v7().to_string(),
        occurred_at: at(minutes_ago),
        meta: RequestMeta {
            request_id: uuid::Uuid::new_v4().to_string().into(),
            correlation_id: None,
            transport: Transport::Grpc,
            source_ip: Some("10.1.2.3".into()),
            user_agent: Some("test/1".into()),
        },
        subject: subject.into(),
        email: Some(format!("{subject}@example.com")),
        groups: vec!["g1".into(), "g2".into()],
        teams: vec!["t1".into()],
        action: action.into(),
        namespace: Some(namespace.into()),
        cluster: Some("c1".into()),
        summary: json!({"spec": {"name": "c1"}}),
        outcome,
        completed_at: None,
        http_status: None,
        grpc_code: None,
        error: None,
        duration_ms: None,
    }
}

async fn contract(url: &str) {
    let store = Store::connect(&options(url)).unwrap();
    store.migrate().await.unwrap();
    store.migrate().await.unwrap(); // idempotent
    let queues = QueueOptions {
        batch_delay: Duration::from_millis(20),
        ..QueueOptions::default()
    };
    let sink: Arc<SqlAuditSink> = SqlAuditSink::start(store.clone(), &queues, "test-replica");
    sink.ping().await.unwrap();

    // begin writes the pending row at once; finish completes it.
    let mut e = entry("cluster.create", "ns-a", "alice", Outcome::Pending, 0);
    sink.begin(&e).await.unwrap();
    let rows = sink.query(&AuditFilter::default(), 10, None).await.unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].outcome, Outcome::Pending);
    assert_eq!(
        (rows[0].id.as_str(), rows[0].subject.as_str()),
        (e.id.as_str(), "alice")
    );
    assert_eq!(rows[0].groups, ["g1", "g2"]);
    assert_eq!(rows[0].summary, json!({"spec": {"name": "c1"}}));
    assert_eq!(rows[0].meta.transport, Transport::Grpc);
    e.outcome = Outcome::Succeeded;
    e.completed_at = Some(at(0));
    e.http_status = Some(201);
    e.grpc_code = Some("OK".into());
    e.duration_ms = Some(12);
    sink.finish(&e).await;
    let done = &sink.query(&AuditFilter::default(), 10, None).await.unwrap()[0];
    assert_eq!(
        (done.outcome, done.http_status, done.duration_ms),
        (Outcome::Succeeded, Some(201), Some(12))
    );
    assert!(done.completed_at.is_some());
    // A finished row's outcome is final: a late or repeated finish does
    // not rewrite it.
    let mut rewrite = e.clone();
    rewrite.outcome = Outcome::Failed;
    rewrite.error = Some("rewritten".into());
    store.finish(&rewrite).await.unwrap();
    let kept = &sink.query(&AuditFilter::default(), 10, None).await.unwrap()[0];
    assert_eq!((kept.outcome, kept.error.as_deref()), (Outcome::Succeeded, None));

    // record goes through the batching writer.
    for subject in ["bob", "carol", "dave"] {
        let mut d = entry("cluster.delete", "ns-b", subject, Outcome::Denied, 0);
        d.http_status = Some(403);
        sink.record(&d).await;
    }
    let denied = AuditFilter {
        outcome: Some("denied".into()),
        ..AuditFilter::default()
    };
    for _ in 0..100 {
        if sink.query(&denied, 10, None).await.unwrap().len() == 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(sink.query(&denied, 10, None).await.unwrap().len(), 3);

    // Every filter.
    let count = |f: AuditFilter| {
        let sink = sink.clone();
        async move { sink.query(&f, 100, None).await.unwrap().len() }
    };
    assert_eq!(
        count(AuditFilter {
            namespace: Some("ns-b".into()),
            ..Default::default()
        })
        .await,
        3
    );
    assert_eq!(
        count(AuditFilter {
            actor: Some("alice".into()),
            ..Default::default()
        })
        .await,
        1
    );
    assert_eq!(
        count(AuditFilter {
            action: Some("cluster.create".into()),
            ..Default::default()
        })
        .await,
        1
    );
    assert_eq!(
        count(AuditFilter {
            cluster: Some("c1".into()),
            ..Default::default()
        })
        .await,
        4
    );
    assert_eq!(
        count(AuditFilter {
            cluster: Some("zz".into()),
            ..Default::default()
        })
        .await,
        0
    );
    assert_eq!(
        count(AuditFilter {
            scope: Some(vec!["ns-a".into()]),
            ..Default::default()
        })
        .await,
        1
    );
    assert_eq!(
        count(AuditFilter {
            scope: Some(vec![]),
            ..Default::default()
        })
        .await,
        0
    );
    assert_eq!(
        count(AuditFilter {
            since: Some(at(1)),
            ..Default::default()
        })
        .await,
        4
    );
    assert_eq!(
        count(AuditFilter {
            until: Some(at(1)),
            ..Default::default()
        })
        .await,
        0
    );

    // Sweeper: an old pending row becomes unknown; a fresh one stays.
    let old = entry("cluster.scale", "ns-a", "alice", Outcome::Pending, 10);
    let fresh = entry("cluster.scale", "ns-a", "alice", Outcome::Pending, 0);
    store.insert(&[old.clone(), fresh.clone()]).await.unwrap();
    assert_eq!(sink.sweep(Duration::from_secs(120)).await.unwrap(), 1);
    let scale = sink
        .query(
            &AuditFilter {
                action: Some("cluster.scale".into()),
                ..Default::default()
            },
            10,
            None,
        )
        .await
        .unwrap();
    let by_id = |id: &str| scale.iter().find(|r| r.id == id).unwrap().clone();
    assert_eq!(by_id(&old.id).outcome, Outcome::Unknown);
    assert!(by_id(&old.id).error.unwrap().contains("stopped before recording"));
    assert_eq!(by_id(&fresh.id).outcome, Outcome::Pending);

    // Retention, in batches: five old rows two at a time, all gone.
    let old_rows: Vec<AuditEntry> = (0..5)
        .map(|i| entry("cluster.create", "ns-c", "old", Outcome::Succeeded, 100 * 24 * 60 + i))
        .collect();
    store.insert(&old_rows).await.unwrap();
    assert_eq!(store.prune(&at(90 * 24 * 60), 2).await.unwrap(), 5);
    assert_eq!(store.prune(&at(90 * 24 * 60), 2).await.unwrap(), 0);
}

/// 1 000 rows paged newest first while more arrive: each exactly once.
async fn paging(url: &str) {
    let store = Store::connect(&options(url)).unwrap();
    store.migrate().await.unwrap();
    let sink = SqlAuditSink::start(store.clone(), &QueueOptions::default(), "test-replica");
    let mut written = Vec::new();
    for chunk in 0..10 {
        let rows: Vec<AuditEntry> = (0..100)
            .map(|i| entry("cluster.create", "ns", &format!("u{chunk}-{i}"), Outcome::Succeeded, 0))
            .collect();
        store.insert(&rows).await.unwrap();
        written.extend(rows.into_iter().map(|r| r.id));
    }
    let mut seen = Vec::new();
    let mut before: Option<String> = None;
    let mut writer = None;
    loop {
        let page = sink
            .query(&AuditFilter::default(), 37, before.as_deref())
            .await
            .unwrap();
        if writer.is_none() {
            let store = store.clone();
            writer = Some(tokio::spawn(async move {
                for _ in 0..20 {
                    let rows: Vec<AuditEntry> = (0..10)
                        .map(|_| entry("cluster.create", "ns", "late", Outcome::Succeeded, 0))
                        .collect();
                    store.insert(&rows).await.unwrap();
                    tokio::task::yield_now().await;
                }
            }));
        }
        let Some(last) = page.last() else { break };
        before = Some(last.id.clone());
        seen.extend(page.into_iter().map(|r| r.id));
    }
    if let Some(w) = writer {
        w.await.unwrap();
    }
    let unique: HashSet<&String> = seen.iter().collect();
    assert_eq!(unique.len(), seen.len(), "an event appeared twice");
    let expected: HashSet<&String> = written.iter().collect();
    assert_eq!(
        unique, expected,
        "every event written before the first page, exactly once"
    );
    let mut newest_first = written.clone();
    newest_first.reverse();
    assert_eq!(seen, newest_first);
}

/// What a hostile caller can put in a row (NUL, names far past any index's
/// limit) is stored, and a row the database refuses outright is dropped
/// alone: the batching writer goes on with the rest.
async fn hostile_rows(url: &str, postgres: bool) {
    let store = Store::connect(&options(url)).unwrap();
    store.migrate().await.unwrap();
    let queues = QueueOptions {
        batch_delay: Duration::from_millis(200),
        ..QueueOptions::default()
    };
    let sink = SqlAuditSink::start(store.clone(), &queues, "test-replica");
    let noise: String = (0..5_000).map(|_| fastrand::alphanumeric()).collect();
    let mut odd = entry("cluster.scale", "ns\0x", "alice\0", Outcome::Pending, 0);
    odd.cluster = Some(noise.clone());
    odd.summary = json!({"worker_group": "w\0", "k\0": ["\0"]});
    odd.meta.user_agent = Some("agent\0".into());
    sink.begin(&odd)
        .await
        .expect("a pending row with NUL and a 5 000-character name");
    odd.outcome = Outcome::Failed;
    odd.error = Some(format!("worker group \"w\0\" not found in {noise}"));
    sink.finish(&odd).await;
    let stored = sink.query(&AuditFilter::default(), 10, None).await.unwrap();
    let row = stored.iter().find(|r| r.id == odd.id).expect("the row");
    assert_eq!(row.outcome, Outcome::Failed, "the outcome was written");
    assert_eq!(row.namespace.as_deref(), Some("ns\u{FFFD}x"));
    assert_eq!(row.summary["worker_group"], "w\u{FFFD}");
    let cluster = row.cluster.as_deref().unwrap();
    assert_eq!(cluster, format!("{}…", &noise[..253]));

    // A batch that repeats a stored row (its commit's reply lost, say)
    // writes the rest and keeps the stored row once. On Postgres a row the
    // database refuses outright (an id that is no UUID) is dropped alone.
    let stored = entry("cluster.get", "ns-h", "stored", Outcome::Succeeded, 0);
    store.insert(std::slice::from_ref(&stored)).await.unwrap();
    let mut refused = entry("cluster.get", "ns-h", "refused", Outcome::Succeeded, 0);
    refused.id = "not-a-uuid".into();
    let mut batch = vec![stored, entry("cluster.get", "ns-h", "after-1", Outcome::Succeeded, 0)];
    if postgres {
        batch.push(refused);
    }
    batch.push(entry("cluster.get", "ns-h", "after-2", Outcome::Succeeded, 0));
    for row in &batch {
        sink.record(row).await;
    }
    sink.flush().await;
    let in_ns = AuditFilter {
        namespace: Some("ns-h".into()),
        ..AuditFilter::default()
    };
    let subjects = |rows: Vec<AuditEntry>| {
        let mut s: Vec<String> = rows.into_iter().map(|r| r.subject).collect();
        s.sort();
        s
    };
    assert_eq!(
        subjects(sink.query(&in_ns, 10, None).await.unwrap()),
        ["after-1", "after-2", "stored"]
    );
    sink.record(&entry("cluster.get", "ns-h", "later", Outcome::Succeeded, 0))
        .await;
    sink.flush().await;
    assert_eq!(
        sink.query(&in_ns, 10, None).await.unwrap().len(),
        4,
        "the writer went on"
    );
}

/// The embedded store's one connection is a queue, not an outage: while
/// another process holds SQLite's write lock for 2 s, four pending rows
/// wait their turn past the 1 s acquire timeout meant for an unreachable
/// Postgres, and are all written.
#[tokio::test]
async fn sqlite_writers_queue_for_the_lock_instead_of_failing() {
    use sqlx::Connection as _;
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("audit.db").display());
    let store = Store::connect(&DatabaseOptions {
        acquire_timeout: Duration::from_secs(1),
        ..options(&url)
    })
    .unwrap();
    store.migrate().await.unwrap();
    let sink = SqlAuditSink::start(store, &QueueOptions::default(), "test-replica");
    let mut other = sqlx::SqliteConnection::connect(&url).await.unwrap();
    sqlx::query("BEGIN IMMEDIATE").execute(&mut other).await.unwrap();
    let rows: Vec<AuditEntry> = (0..4)
        .map(|i| entry("cluster.create", "ns-q", &format!("q{i}"), Outcome::Pending, 0))
        .collect();
    let written = futures::future::join_all(rows.iter().map(|r| sink.begin(r)));
    let release = async {
        tokio::time::sleep(Duration::from_secs(2)).await;
        sqlx::query("COMMIT").execute(&mut other).await.unwrap();
    };
    let (results, ()) = tokio::join!(written, release);
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    let queued = AuditFilter {
        namespace: Some("ns-q".into()),
        ..AuditFilter::default()
    };
    assert_eq!(sink.query(&queued, 10, None).await.unwrap().len(), 4);
}

#[tokio::test]
async fn hostile_rows_on_postgres() {
    let db = test_database().await;
    hostile_rows(&db.url, true).await;
}

#[tokio::test]
async fn hostile_rows_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    hostile_rows(&format!("sqlite://{}", dir.path().join("audit.db").display()), false).await;
}

#[tokio::test]
async fn contract_on_postgres() {
    let db = test_database().await;
    contract(&db.url).await;
}

#[tokio::test]
async fn contract_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    contract(&format!("sqlite://{}", dir.path().join("audit.db").display())).await;
}

#[tokio::test]
async fn paging_on_postgres() {
    let db = test_database().await;
    paging(&db.url).await;
}

#[tokio::test]
async fn paging_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    paging(&format!("sqlite://{}", dir.path().join("audit.db").display())).await;
}

/// A `begin` whose insert committed while its answer was lost (Postgres
/// stopping in between) refuses the mutation, so the row it stored all the
/// same is settled as failed once the database is back, not left pending
/// for as long as the replica lives.
#[tokio::test]
async fn a_begin_that_fails_settles_the_row_it_may_have_stored() {
    let pg = krayne_tests::PgServer::start().await;
    let store = Store::connect(&DatabaseOptions {
        acquire_timeout: Duration::from_secs(1),
        ..options(&pg.url)
    })
    .unwrap();
    store.migrate().await.unwrap();
    let sink = SqlAuditSink::start(store.clone(), &QueueOptions::default(), "test-replica");
    let landed = entry("cluster.create", "ns-l", "alice", Outcome::Pending, 0);
    store.insert(std::slice::from_ref(&landed)).await.unwrap();
    let never = entry("cluster.delete", "ns-l", "alice", Outcome::Pending, 0);
    pg.stop();
    for e in [&landed, &never] {
        let refused = sink.begin(e).await.expect_err("the database is down");
        assert_eq!(refused.http_status(), 503);
    }
    pg.resume().await;
    sink.flush().await;
    let rows = sink.query(&AuditFilter::default(), 10, None).await.unwrap();
    assert_eq!(rows.len(), 1, "a row never stored is not written by settling it");
    let row = &rows[0];
    assert_eq!(
        (row.id.as_str(), row.outcome, row.http_status, row.grpc_code.as_deref()),
        (landed.id.as_str(), Outcome::Failed, Some(503), Some("UNAVAILABLE"))
    );
    assert!(row.error.as_deref().unwrap().contains("nothing was changed"), "{row:?}");
    assert!(row.completed_at.is_some());
}
