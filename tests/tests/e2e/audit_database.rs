//! The audit database on day two (issue 40): the server starts and serves
//! reads while Postgres is down and migrates once it answers; an older
//! binary starts on a schema a newer release migrated (a rollback); a
//! schema older than the binary is reported and refuses mutations until
//! `krayne-server migrate` runs; `migrate --grant-to` leaves the serving
//! role unable to erase its log; a rotated database URL file is picked up
//! without a restart; `--database-ca-file` verifies the server's
//! certificate.

use std::time::{Duration, Instant};

use krayne_tests::{Env, EnvOptions, PgServer, PgSetup, Rest, dependency_becomes, test_database};
use serde_json::json;
use sqlx::{Connection as _, Executor as _, PgConnection};

const NS: &str = "/v1/namespaces/ml-team/clusters";

fn server(args: &[&str]) -> std::process::Output {
    std::process::Command::new(krayne_tests::server_binary())
        .args(args)
        .output()
        .unwrap()
}

fn succeeded(output: &std::process::Output) -> String {
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Creates `name` until it is admitted (201), asserting that every refusal
/// before is the fail-closed 503; gives up after `within`.
async fn created_eventually(rest: &Rest, name: &str, within: Duration) {
    let started = Instant::now();
    loop {
        let answer = rest.post(NS, &json!({"name": name})).await;
        if answer.status == 201 {
            return;
        }
        assert_eq!(answer.status, 503, "{}", answer.text);
        assert!(
            started.elapsed() < within,
            "{name} not created within {within:?}: {}",
            answer.text
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// `/readyz`'s problems, as text.
async fn problems(ops: &Rest) -> String {
    ops.get("/readyz").await.expect(200).body["problems"].to_string()
}

#[tokio::test]
async fn the_server_starts_and_serves_reads_with_the_database_down() {
    let pg = PgServer::start().await;
    pg.stop();
    let env = Env::start_with(EnvOptions::with_database(&pg.url)).await;
    let alice = env.rest(&env.alice());
    let ops = env.ops();
    dependency_becomes(&ops, "audit_database", "down", Duration::from_secs(15)).await;
    assert!(
        problems(&ops).await.contains("audit database"),
        "the failed migration is reported"
    );
    alice.get(NS).await.expect(200);
    alice.get("/v1/whoami").await.expect(200);
    let refused = alice
        .post(NS, &json!({"name": "early"}))
        .await
        .problem(503, "unavailable");
    assert!(refused.text.contains("audit"), "{}", refused.text);
    assert!(
        env.raycluster_writes().is_empty(),
        "nothing reached Kubernetes unaudited"
    );

    // Once it answers, the server migrates it in the background and
    // mutations are admitted, audited.
    pg.resume().await;
    created_eventually(&alice, "later", Duration::from_secs(30)).await;
    dependency_becomes(&ops, "audit_database", "up", Duration::from_secs(15)).await;
    let rows = env
        .rest(&env.admin())
        .get("/v1/audit?cluster=later&action=cluster.create")
        .await
        .expect(200);
    assert_eq!(rows.body["events"][0]["outcome"], "succeeded", "{}", rows.text);
    let log = env.server.log.lock().unwrap().clone();
    assert!(log.contains("audit database migrated"), "{log}");
}

/// What a newer release leaves behind: a migration this binary does not
/// know, and the column it added.
async fn migrate_as_a_newer_release(url: &str) {
    succeeded(&server(&["migrate", "--database-url", url]));
    let mut db = PgConnection::connect(url).await.unwrap();
    db.execute("ALTER TABLE audit_events ADD COLUMN from_a_newer_release TEXT")
        .await
        .unwrap();
    db.execute(
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
         VALUES (20991231000000, 'from a newer release', true, '\\x00'::bytea, 1)",
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn an_older_binary_starts_on_a_newer_schema_as_after_a_rollback() {
    let db = test_database().await;
    migrate_as_a_newer_release(&db.url).await;
    // sqlx's default migrator refuses such a database: what made every old
    // pod crash after `helm rollback`.
    let pool = sqlx::PgPool::connect(&db.url).await.unwrap();
    let strict = sqlx::migrate::Migrator::new(std::path::Path::new("../migrations/postgres"))
        .await
        .unwrap();
    let refused = strict.run(&pool).await.unwrap_err();
    assert!(
        matches!(refused, sqlx::migrate::MigrateError::VersionMissing(20_991_231_000_000)),
        "{refused}"
    );
    pool.close().await;

    // This binary migrates it (a no-op), and serves from it, whether it
    // migrates at start or not.
    succeeded(&server(&["migrate", "--database-url", &db.url]));
    let env = Env::start_with(EnvOptions::with_database(&db.url)).await;
    let alice = env.rest(&env.alice());
    alice.post(NS, &json!({"name": "on-newer"})).await.expect(201);
    let checking = env.spawn_server(&["--migrate-on-start", "false"]).await;
    let ops = Rest::new(&format!("http://{}", checking.ops), None);
    assert_eq!(problems(&ops).await, "null", "a newer schema is no problem");
    let via_checking = Rest::new(&format!("http://{}", checking.api), Some(env.alice()));
    via_checking.post(NS, &json!({"name": "on-newer-2"})).await.expect(201);
    let rows = env
        .rest(&env.admin())
        .get("/v1/audit?action=cluster.create")
        .await
        .expect(200);
    assert_eq!(rows.body["events"].as_array().unwrap().len(), 2, "{}", rows.text);
}

#[tokio::test]
async fn a_schema_older_than_the_binary_is_reported_until_migrate_runs() {
    let db = test_database().await;
    // The schema of an older release (its two migrations: before the
    // replicas' heartbeats, which writes need, and the `system` transport).
    let pool = sqlx::PgPool::connect(&db.url).await.unwrap();
    let previous = sqlx::migrate::Migrator::new(std::path::Path::new("../migrations/postgres"))
        .await
        .unwrap();
    previous.run_to(2, &pool).await.unwrap();
    pool.close().await;

    let env = Env::start_with(EnvOptions {
        server_args: vec!["--migrate-on-start".into(), "false".into()],
        ..EnvOptions::with_database(&db.url)
    })
    .await;
    let ops = env.ops();
    let reported = problems(&ops).await;
    assert!(
        reported.contains("lacks migrations [3, 4, 5, 6, 7, 8, 9]") && reported.contains("krayne-server migrate"),
        "{reported}"
    );
    let alice = env.rest(&env.alice());
    alice.get(NS).await.expect(200);
    alice
        .post(NS, &json!({"name": "too-early"}))
        .await
        .problem(503, "unavailable");
    assert!(
        env.raycluster_writes().is_empty(),
        "fail closed: nothing reached Kubernetes"
    );

    let migrated = succeeded(&server(&["migrate", "--database-url", &db.url]));
    assert!(migrated.contains("migrations applied"), "{migrated}");
    created_eventually(&alice, "in-time", Duration::from_secs(20)).await;
    let started = Instant::now();
    while problems(&ops).await != "null" {
        assert!(started.elapsed() < Duration::from_secs(20), "{}", problems(&ops).await);
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// `url` with its user replaced by `user` (no password: trust auth).
fn as_user(url: &str, user: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap();
    let host = rest.rsplit_once('@').map_or(rest, |(_, host)| host);
    format!("{scheme}://{user}@{host}")
}

/// The SQLSTATE of what `sql` got, run as the connection's role.
async fn sqlstate(db: &mut PgConnection, sql: &str) -> String {
    match db.execute(sqlx::AssertSqlSafe(sql.to_owned())).await {
        Ok(done) => format!("done ({} rows)", done.rows_affected()),
        Err(sqlx::Error::Database(e)) => e.code().unwrap_or_default().into_owned(),
        Err(e) => panic!("{sql}: {e}"),
    }
}

#[tokio::test]
async fn the_serving_role_appends_to_the_log_but_cannot_erase_it() {
    let db = test_database().await;
    let role = format!("krayne_app_{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
    let mut owner = PgConnection::connect(&db.url).await.unwrap();
    owner
        .execute(sqlx::AssertSqlSafe(format!("CREATE ROLE {role} LOGIN")))
        .await
        .unwrap();
    let granted = succeeded(&server(&["migrate", "--database-url", &db.url, "--grant-to", &role]));
    assert!(granted.contains(&format!("granted {role}")), "{granted}");

    let runtime = as_user(&db.url, &role);
    let env = Env::start_with(EnvOptions {
        server_args: vec!["--migrate-on-start".into(), "false".into()],
        ..EnvOptions::with_database(&runtime)
    })
    .await;
    let alice = env.rest(&env.alice());
    alice.post(NS, &json!({"name": "appended"})).await.expect(201);
    alice.delete(&format!("{NS}/appended")).await.expect(204);
    let rows = env
        .rest(&env.admin())
        .get("/v1/audit?cluster=appended")
        .await
        .expect(200);
    assert_eq!(rows.body["events"].as_array().unwrap().len(), 2, "{}", rows.text);
    assert_eq!(problems(&env.ops()).await, "null");

    let mut serving = PgConnection::connect(&runtime).await.unwrap();
    for erase in [
        "DELETE FROM audit_events",
        "TRUNCATE audit_events",
        "UPDATE audit_events SET actor_subject = 'someone else'",
        "DROP TABLE audit_events",
        "ALTER TABLE audit_events DROP COLUMN error",
        "DELETE FROM _sqlx_migrations",
    ] {
        assert_eq!(sqlstate(&mut serving, erase).await, "42501", "{erase} must be refused");
    }
    // Nor rewrite what a request's outcome was: a final row stays final.
    assert_eq!(
        sqlstate(
            &mut serving,
            "UPDATE audit_events SET outcome = 'failed', error = 'rewritten' WHERE cluster = 'appended'"
        )
        .await,
        "23000",
        "outcomes of finished rows are final"
    );
    serving.close().await.unwrap();
    // The uses of clusters it records for the lifecycle reaper it may
    // write, read and forget.
    use krayne_server::{
        domain::{ActivityLedger as _, ClusterUse},
        store::{DatabaseOptions, SqlActivityLedger, Store},
    };
    let ledger = SqlActivityLedger::new(Store::connect(&DatabaseOptions::new(runtime.clone())).unwrap());
    let now = jiff::Timestamp::now();
    let used = |at: jiff::Timestamp| ClusterUse {
        namespace: "ml-team".into(),
        name: "appended".into(),
        at,
    };
    ledger.record(&[used(now)]).await.unwrap();
    let earlier = now.checked_sub(jiff::SignedDuration::from_secs(60)).unwrap();
    ledger.record(&[used(earlier)]).await.unwrap();
    let last = ledger.last_uses().await.unwrap();
    assert_eq!(last.len(), 1, "{last:?}");
    // Postgres keeps microseconds, rounded.
    let off = last[0].at.duration_since(now).abs();
    assert!(
        off < jiff::SignedDuration::from_millis(1),
        "the later use is kept: {last:?}"
    );
    assert_eq!(
        ledger
            .forget(now.checked_add(jiff::SignedDuration::from_secs(1)).unwrap())
            .await
            .unwrap(),
        1
    );
    // And the lifecycle policies it has seen, to tell new ones.
    let policies =
        krayne_server::store::SqlPolicyLedger::new(Store::connect(&DatabaseOptions::new(runtime.clone())).unwrap());
    use krayne_server::domain::PolicyLedger as _;
    let seen = [("ml-team".to_owned(), r#"{"idle_after":"7200s"}"#.to_owned())];
    let first = policies.observe(&seen, now).await.unwrap();
    assert_eq!(first[0].previous, None);
    let later = now.checked_add(jiff::SignedDuration::from_secs(60)).unwrap();
    let changed = [("ml-team".to_owned(), r#"{"idle_after":"3600s"}"#.to_owned())];
    let second = policies.observe(&changed, later).await.unwrap();
    assert_eq!(second[0].previous.as_deref(), Some(seen[0].1.as_str()));
    assert!(second[0].since.duration_since(later).abs() < jiff::SignedDuration::from_millis(1));
    let again = policies
        .observe(
            &changed,
            later.checked_add(jiff::SignedDuration::from_secs(60)).unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(again, second, "an unchanged policy keeps its time");
    assert!(policies.observe(&[], later).await.unwrap().is_empty());
    drop(env);
    owner
        .execute(sqlx::AssertSqlSafe(format!("DROP OWNED BY {role}; DROP ROLE {role}")))
        .await
        .unwrap();
}

#[tokio::test]
async fn a_rotated_database_url_file_is_used_without_a_restart() {
    let pg = PgServer::start_with(PgSetup {
        password: Some("postgres-owner-password-e2e".into()),
        ..PgSetup::default()
    })
    .await;
    let (first, second) = ("rotated-password-one-7c1f9a", "rotated-password-two-2b8e4d");
    krayne_tests::register_secret(first);
    krayne_tests::register_secret(second);
    let mut owner = PgConnection::connect(&pg.url).await.unwrap();
    owner
        .execute(sqlx::AssertSqlSafe(format!(
            "CREATE ROLE rotated LOGIN PASSWORD '{first}'"
        )))
        .await
        .unwrap();
    owner.execute("CREATE DATABASE audit OWNER rotated").await.unwrap();
    let url = |password: &str| format!("postgres://rotated:{password}@127.0.0.1:{}/audit", pg.port);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("url");
    std::fs::write(&file, format!("{}\n", url(first))).unwrap();
    let env = Env::start_with(EnvOptions {
        server_args: vec!["--database-url-file".into(), file.to_str().unwrap().into()],
        ..EnvOptions::with_database("sqlite://not-used.db")
    })
    .await;
    let alice = env.rest(&env.alice());
    alice.post(NS, &json!({"name": "first"})).await.expect(201);

    // The password is rotated and its old sessions ended, as a secret
    // manager does: the old URL no longer connects.
    owner
        .execute(sqlx::AssertSqlSafe(format!(
            "ALTER ROLE rotated PASSWORD '{second}'; \
             SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = 'rotated'"
        )))
        .await
        .unwrap();
    alice
        .post(NS, &json!({"name": "refused"}))
        .await
        .problem(503, "unavailable");
    // The mounted Secret changes; the same process picks it up.
    std::fs::write(&file, format!("{}\n", url(second))).unwrap();
    created_eventually(&alice, "second", Duration::from_secs(30)).await;
    let log = env.server.log.lock().unwrap().clone();
    assert!(log.contains("database URL changed"), "{log}");
    assert!(
        !log.contains(first) && !log.contains(second),
        "passwords stay out of the log"
    );
    let rows = env
        .rest(&env.admin())
        .get("/v1/audit?action=cluster.create")
        .await
        .expect(200);
    let clusters: Vec<&str> = rows.body["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["cluster"].as_str().unwrap())
        .collect();
    assert!(
        clusters.contains(&"first") && clusters.contains(&"second"),
        "{clusters:?}"
    );
    assert!(!clusters.contains(&"refused"), "{clusters:?}");
}

#[tokio::test]
async fn the_database_certificate_is_verified_against_the_ca_file() {
    let pg = PgServer::start_with(PgSetup {
        tls: true,
        ..PgSetup::default()
    })
    .await;
    let env = Env::start_with(EnvOptions::with_database(&pg.url)).await;
    let ca = pg.ca_file();
    let verifying = env.spawn_server(&["--database-ca-file", ca.to_str().unwrap()]).await;
    let via = |server: &krayne_tests::ServerProcess| {
        (
            Rest::new(&format!("http://{}", server.api), Some(env.alice())),
            Rest::new(&format!("http://{}", server.ops), None),
        )
    };
    let (api, ops) = via(&verifying);
    api.post(NS, &json!({"name": "verified"})).await.expect(201);
    dependency_becomes(&ops, "audit_database", "up", Duration::from_secs(10)).await;

    // A CA that did not sign the server's certificate: no connection, so
    // no mutation, and the log says why.
    let dir = tempfile::tempdir().unwrap();
    let other = krayne_tests::unrelated_ca(dir.path(), "other");
    let distrusting = env.spawn_server(&["--database-ca-file", other.to_str().unwrap()]).await;
    let (api, ops) = via(&distrusting);
    dependency_becomes(&ops, "audit_database", "down", Duration::from_secs(15)).await;
    api.post(NS, &json!({"name": "unverified"}))
        .await
        .problem(503, "unavailable");
    let log = distrusting.log.lock().unwrap().to_lowercase();
    assert!(log.contains("certificate") || log.contains("unknownissuer"), "{log}");

    // A CA file that is not there is a start-up error, not a silent
    // downgrade.
    let missing = server(&[
        "migrate",
        "--database-url",
        &pg.url,
        "--database-ca-file",
        "/nonexistent/ca.crt",
    ]);
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("/nonexistent/ca.crt"));
}
