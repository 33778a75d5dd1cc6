//! The two databases behind one set of operations. Every value is bound as
//! text; Postgres casts it to the column's type.

use std::{collections::BTreeSet, path::PathBuf, str::FromStr as _, time::Duration};

use sqlx::{
    AssertSqlSafe, Database, Executor, IntoArguments, Pool, Postgres, QueryBuilder, Sqlite,
    migrate::Migrator,
    postgres::{PgConnectOptions, PgPoolOptions, PgSslMode},
    sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions},
};

use crate::audit::rows::{COLUMNS, RawRow, indexable, stamp, values};
use crate::domain::audit::{AuditEntry, AuditFilter};

/// How to connect.
#[derive(Debug, Clone)]
pub struct DatabaseOptions {
    /// `postgres://…` or `sqlite://path`.
    pub url: String,
    /// Largest pool.
    pub max_connections: u32,
    /// Longest a statement may run (Postgres); for SQLite, how long to
    /// wait for its lock and its one connection.
    pub statement_timeout: Duration,
    /// Longest to wait for a connection.
    pub acquire_timeout: Duration,
    /// CA certificate(s) to verify the Postgres server's certificate and
    /// host name against (`sslmode=verify-full`); `None`: as the URL says.
    pub ca_file: Option<PathBuf>,
}

impl DatabaseOptions {
    /// `url` with the defaults of `krayne-server serve`.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            max_connections: 10,
            statement_timeout: Duration::from_secs(5),
            acquire_timeout: Duration::from_secs(1),
            ca_file: None,
        }
    }
}

static POSTGRES_MIGRATIONS: Migrator = sqlx::migrate!("../../migrations/postgres");
static SQLITE_MIGRATIONS: Migrator = sqlx::migrate!("../../migrations/sqlite");

/// Postgres connection options from `url`, verifying the server against
/// `ca_file` when one is given.
fn pg_options(url: &str, ca_file: Option<&std::path::Path>) -> Result<PgConnectOptions, String> {
    let options = PgConnectOptions::from_str(url).map_err(|e| format!("database {}: {e}", redact(url)))?;
    Ok(match ca_file {
        Some(ca) => {
            if !ca.is_file() {
                return Err(format!("database CA file {}: not a readable file", ca.display()));
            }
            options.ssl_mode(PgSslMode::VerifyFull).ssl_root_cert(ca)
        }
        None => options,
    })
}

/// `d` in whole milliseconds, for Postgres intervals.
fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// The stored form of the time `d` ago, by this process's clock (SQLite:
/// one process, one clock).
fn ago(d: Duration) -> String {
    let now = jiff::Timestamp::now();
    let then = now
        .checked_sub(jiff::SignedDuration::try_from(d).unwrap_or_default())
        .unwrap_or(now);
    stamp(&then.to_string())
}

/// `name` as a quoted SQL identifier.
fn quoted(name: &str) -> Result<String, String> {
    if name.is_empty() || name.len() > 63 || name.contains('\0') {
        return Err(format!("{name:?} is not a Postgres role name"));
    }
    Ok(format!("\"{}\"", name.replace('"', "\"\"")))
}

/// What `serve` needs and nothing more: read and append audit rows, write
/// outcomes, keep its heartbeat and admission leases. No DELETE, TRUNCATE
/// or DDL on the audit log.
const RUNTIME_GRANTS: [&str; 7] = [
    "GRANT USAGE ON SCHEMA {schema} TO {role}",
    "GRANT SELECT, INSERT ON audit_events TO {role}",
    "GRANT UPDATE (completed_at, request_summary, outcome, http_status, grpc_code, error, duration_ms) \
     ON audit_events TO {role}",
    "GRANT SELECT, INSERT, UPDATE, DELETE ON krayne_replicas, quota_admissions, cluster_uses, lifecycle_policies TO {role}",
    // Usage intervals are recorded and closed, never deleted.
    "GRANT SELECT, INSERT, UPDATE ON usage_intervals, usage_recorder TO {role}",
    // What was kept of a RayJob's ended job is written once, never changed.
    "GRANT SELECT, INSERT ON rayjob_runs TO {role}",
    "GRANT SELECT ON _sqlx_migrations TO {role}",
];

/// Postgres casts per column, in `COLUMNS` order.
const PG_CASTS: [&str; 21] = [
    "::uuid",
    "::timestamptz",
    "::timestamptz",
    "",
    "",
    "",
    "::jsonb",
    "::jsonb",
    "",
    "",
    "",
    "",
    "",
    "",
    "::jsonb",
    "",
    "::integer",
    "",
    "",
    "::bigint",
    "",
];
const NO_CASTS: [&str; 21] = [""; 21];

const PG_SELECT: &str = "SELECT id::text AS id, \
    to_char(occurred_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"') AS occurred_at, \
    to_char(completed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"') AS completed_at, \
    request_id, actor_subject, actor_email, actor_groups::text AS actor_groups, actor_teams::text AS actor_teams, \
    source_ip, user_agent, transport, action, namespace, cluster, request_summary::text AS request_summary, \
    outcome, http_status::text AS http_status, grpc_code, error, duration_ms::text AS duration_ms, correlation_id \
    FROM audit_events";
const SQLITE_SELECT: &str = "SELECT id, occurred_at, completed_at, request_id, actor_subject, actor_email, \
    actor_groups, actor_teams, source_ip, user_agent, transport, action, namespace, cluster, request_summary, \
    outcome, CAST(http_status AS TEXT) AS http_status, grpc_code, error, \
    CAST(duration_ms AS TEXT) AS duration_ms, correlation_id FROM audit_events";

/// A connected audit database.
#[derive(Clone)]
pub enum Store {
    /// Production.
    Postgres(Pool<Postgres>),
    /// Embedded default.
    Sqlite(Pool<Sqlite>),
}

/// Redacts the password of a database URL, for logs.
pub fn redact(url: &str) -> String {
    let Some(scheme) = url.find("://") else {
        return url.to_owned();
    };
    let rest = &url[scheme + 3..];
    let authority_end = rest.find('/').unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) if rest[..at].contains(':') => {
            let user = rest[..at].split(':').next().unwrap_or("");
            format!("{}{user}:***{}", &url[..scheme + 3], &rest[at..])
        }
        _ => url.to_owned(),
    }
}

impl Store {
    /// Connects lazily (a database that is down now may be up later) and
    /// returns at once.
    pub fn connect(o: &DatabaseOptions) -> Result<Self, String> {
        if o.url.starts_with("postgres://") || o.url.starts_with("postgresql://") {
            let timeout_ms = o.statement_timeout.as_millis();
            let options = pg_options(&o.url, o.ca_file.as_deref())?;
            let pool = PgPoolOptions::new()
                .max_connections(o.max_connections)
                .acquire_timeout(o.acquire_timeout)
                .after_connect(move |conn, _| {
                    Box::pin(async move {
                        let set = format!("SET statement_timeout = {timeout_ms}");
                        conn.execute(AssertSqlSafe(set)).await.map(|_| ())
                    })
                })
                .connect_lazy_with(options);
            Ok(Self::Postgres(pool))
        } else if o.url.starts_with("sqlite:") {
            let options: SqliteConnectOptions = o.url.parse().map_err(|e| format!("database {}: {e}", o.url))?;
            // WAL: a commit is one append and one fsync, not a rollback
            // journal's three.
            let options = options
                .create_if_missing(true)
                .busy_timeout(o.statement_timeout)
                .journal_mode(SqliteJournalMode::Wal);
            // One writer: SQLite serializes writes anyway. Waiting for it is
            // queueing, not a sign of an unreachable database (the reason
            // for a short acquire timeout), so requests wait as long as a
            // statement may take.
            let pool = SqlitePoolOptions::new()
                .max_connections(1)
                .acquire_timeout(o.acquire_timeout.max(o.statement_timeout))
                .connect_lazy_with(options);
            Ok(Self::Sqlite(pool))
        } else {
            Err(format!(
                "database URL must start with postgres:// or sqlite: (got {})",
                redact(&o.url)
            ))
        }
    }

    /// Connects new connections with `url` from now on (a rotated
    /// password); open ones are kept until the pool retires them.
    ///
    /// # Errors
    /// When `url` is not a Postgres URL this pool can use.
    pub fn set_url(&self, url: &str, ca_file: Option<&std::path::Path>) -> Result<(), String> {
        match self {
            Self::Postgres(pool) => {
                pool.set_connect_options(pg_options(url, ca_file)?);
                Ok(())
            }
            Self::Sqlite(_) => Err("an SQLite audit log's URL cannot change while serving".into()),
        }
    }

    fn migrator(&self) -> Migrator {
        let known = match self {
            Self::Postgres(_) => &POSTGRES_MIGRATIONS,
            Self::Sqlite(_) => &SQLITE_MIGRATIONS,
        };
        // A schema newer than this binary is fine: migrations only add,
        // so an older binary (a rollback, a pod of the previous release)
        // still starts and serves.
        let mut migrator = Migrator {
            migrations: known.migrations.clone(),
            ..Migrator::DEFAULT
        };
        migrator.set_ignore_missing(true);
        migrator
    }

    /// Applies the migrations this binary knows that the database lacks
    /// (Postgres: under sqlx's advisory lock, so replicas may start
    /// together). Versions applied by a newer binary are left alone.
    pub async fn migrate(&self) -> Result<(), String> {
        let migrator = self.migrator();
        match self {
            Self::Postgres(p) => migrator.run(p).await,
            Self::Sqlite(p) => migrator.run(p).await,
        }
        .map_err(|e| format!("migrations: {e}"))
    }

    /// Versions of the migrations this binary knows that the database has
    /// not applied (empty: the schema is new enough).
    pub async fn missing_migrations(&self) -> Result<Vec<i64>, sqlx::Error> {
        let query = "SELECT version FROM _sqlx_migrations WHERE success";
        let applied: Vec<i64> = match self {
            Self::Postgres(p) => sqlx::query_scalar(query).fetch_all(p).await,
            Self::Sqlite(p) => sqlx::query_scalar(query).fetch_all(p).await,
        }
        .or_else(|e| match &e {
            // No migrations table: nothing is applied.
            sqlx::Error::Database(db) if matches!(db.code().as_deref(), Some("42P01")) => Ok(Vec::new()),
            sqlx::Error::Database(db) if db.message().contains("no such table") => Ok(Vec::new()),
            _ => Err(e),
        })?;
        let applied: BTreeSet<i64> = applied.into_iter().collect();
        Ok(self
            .migrator()
            .iter()
            .map(|m| m.version)
            .filter(|v| !applied.contains(v))
            .collect())
    }

    /// Grants `role` what `krayne-server serve` needs (see
    /// [`RUNTIME_GRANTS`]), in the current schema. Postgres only.
    ///
    /// # Errors
    /// With SQLite, for a name that is no role, or when Postgres refuses.
    pub async fn grant_runtime(&self, role: &str) -> Result<(), String> {
        let Self::Postgres(pool) = self else {
            return Err("--grant-to: SQLite has no roles".into());
        };
        let role = quoted(role)?;
        let schema: String = sqlx::query_scalar("SELECT current_schema()")
            .fetch_one(pool)
            .await
            .map_err(|e| format!("grant: {e}"))?;
        let schema = quoted(&schema)?;
        for grant in RUNTIME_GRANTS {
            let statement = grant.replace("{schema}", &schema).replace("{role}", &role);
            pool.execute(AssertSqlSafe(statement))
                .await
                .map_err(|e| format!("grant to {role}: {e}"))?;
        }
        Ok(())
    }

    /// Inserts rows in one statement; returns how many were new (a row
    /// whose id is already stored is left as it is).
    pub async fn insert(&self, rows: &[AuditEntry]) -> Result<u64, sqlx::Error> {
        self.insert_by(rows, None).await
    }

    /// [`Store::insert`], naming the replica that wrote the rows.
    pub async fn insert_by(&self, rows: &[AuditEntry], served_by: Option<&str>) -> Result<u64, sqlx::Error> {
        match self {
            Self::Postgres(p) => insert(p, rows, &PG_CASTS, served_by)
                .await
                .map(|r| r.map_or(0, |r| r.rows_affected())),
            Self::Sqlite(p) => insert(p, rows, &NO_CASTS, served_by)
                .await
                .map(|r| r.map_or(0, |r| r.rows_affected())),
        }
    }

    /// Renews `replica`'s heartbeat (Postgres: by the database's clock,
    /// which every replica shares).
    pub async fn heartbeat(&self, replica: &str) -> Result<(), sqlx::Error> {
        const UPSERT: &str = "ON CONFLICT (id) DO UPDATE SET seen_at = EXCLUDED.seen_at";
        match self {
            Self::Postgres(p) => sqlx::query(AssertSqlSafe(format!(
                "INSERT INTO krayne_replicas (id, seen_at) VALUES ($1, now()) {UPSERT}"
            )))
            .bind(replica)
            .execute(p)
            .await
            .map(|_| ()),
            Self::Sqlite(p) => sqlx::query(AssertSqlSafe(format!(
                "INSERT INTO krayne_replicas (id, seen_at) VALUES ($1, $2) {UPSERT}"
            )))
            .bind(replica)
            .bind(stamp(&jiff::Timestamp::now().to_string()))
            .execute(p)
            .await
            .map(|_| ()),
        }
    }

    /// Removes `replica`'s heartbeat (it stops), and those not renewed
    /// for `stale` (replicas long gone).
    pub async fn forget(&self, replica: &str, stale: Duration) -> Result<(), sqlx::Error> {
        match self {
            Self::Postgres(p) => sqlx::query(
                "DELETE FROM krayne_replicas WHERE id = $1 OR seen_at < now() - $2::bigint * interval '1 millisecond'",
            )
            .bind(replica)
            .bind(millis(stale))
            .execute(p)
            .await
            .map(|_| ()),
            Self::Sqlite(p) => sqlx::query("DELETE FROM krayne_replicas WHERE id = $1 OR seen_at < $2")
                .bind(replica)
                .bind(ago(stale))
                .execute(p)
                .await
                .map(|_| ()),
        }
    }

    /// Resolves as `unknown` the rows still `pending` for longer than
    /// `older` whose replica is gone: none is named, or its heartbeat is
    /// older than `stale` (Postgres: by the database's clock). Returns
    /// each row's id, request id and action.
    pub async fn resolve_abandoned(
        &self,
        older: Duration,
        stale: Duration,
        error: &str,
    ) -> Result<Vec<(String, String, String)>, sqlx::Error> {
        const PG: &str = "UPDATE audit_events SET outcome = 'unknown', completed_at = now(), error = $3 \
            WHERE outcome = 'pending' AND occurred_at < now() - $1::bigint * interval '1 millisecond' \
            AND (served_by IS NULL OR NOT EXISTS (SELECT 1 FROM krayne_replicas r \
            WHERE r.id = audit_events.served_by AND r.seen_at >= now() - $2::bigint * interval '1 millisecond')) \
            RETURNING id::text AS id, request_id, action";
        const SQLITE: &str = "UPDATE audit_events SET outcome = 'unknown', completed_at = $4, error = $3 \
            WHERE outcome = 'pending' AND occurred_at < $1 AND (served_by IS NULL OR NOT EXISTS \
            (SELECT 1 FROM krayne_replicas r WHERE r.id = audit_events.served_by AND r.seen_at >= $2)) \
            RETURNING id, request_id, action";
        match self {
            Self::Postgres(p) => {
                sqlx::query_as(PG)
                    .bind(millis(older))
                    .bind(millis(stale))
                    .bind(error)
                    .fetch_all(p)
                    .await
            }
            Self::Sqlite(p) => {
                sqlx::query_as(SQLITE)
                    .bind(ago(older))
                    .bind(ago(stale))
                    .bind(error)
                    .bind(stamp(&jiff::Timestamp::now().to_string()))
                    .fetch_all(p)
                    .await
            }
        }
    }

    /// Takes the admission lease of `namespace` for `holder`, for `lease`
    /// by the database's clock, if nobody holds it (or its holder's lease
    /// ran out); returns whether it was taken. Postgres only.
    pub(crate) async fn take_lease(&self, namespace: &str, holder: &str, lease: Duration) -> Result<bool, sqlx::Error> {
        let Self::Postgres(p) = self else {
            return Ok(true);
        };
        let taken: Option<String> = sqlx::query_scalar(
            "INSERT INTO quota_admissions (namespace, holder, expires_at) VALUES ($1, $2, now() + $3::bigint * interval '1 millisecond') \
             ON CONFLICT (namespace) DO UPDATE SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at \
             WHERE quota_admissions.expires_at < now() RETURNING holder",
        )
        .bind(namespace)
        .bind(holder)
        .bind(millis(lease))
        .fetch_optional(p)
        .await?;
        Ok(taken.is_some())
    }

    /// Extends the admission lease of `namespace` by `lease` from now, if
    /// `holder` still has it: whether it did.
    pub(crate) async fn renew_lease(
        &self,
        namespace: &str,
        holder: &str,
        lease: Duration,
    ) -> Result<bool, sqlx::Error> {
        let Self::Postgres(p) = self else {
            return Ok(true);
        };
        sqlx::query(
            "UPDATE quota_admissions SET expires_at = now() + $3::bigint * interval '1 millisecond' \
             WHERE namespace = $1 AND holder = $2",
        )
        .bind(namespace)
        .bind(holder)
        .bind(millis(lease))
        .execute(p)
        .await
        .map(|done| done.rows_affected() == 1)
    }

    /// Gives the admission lease of `namespace` back, if `holder` has it.
    pub(crate) async fn drop_lease(&self, namespace: &str, holder: &str) -> Result<(), sqlx::Error> {
        let Self::Postgres(p) = self else {
            return Ok(());
        };
        sqlx::query("DELETE FROM quota_admissions WHERE namespace = $1 AND holder = $2")
            .bind(namespace)
            .bind(holder)
            .execute(p)
            .await
            .map(|_| ())
    }

    /// Writes a finished row's outcome.
    pub async fn finish(&self, e: &AuditEntry) -> Result<(), sqlx::Error> {
        match self {
            Self::Postgres(p) => finish(p, e, &PG_CASTS).await,
            Self::Sqlite(p) => finish(p, e, &NO_CASTS).await,
        }
    }

    /// Rows matching `f`, newest first.
    pub async fn query(
        &self,
        f: &AuditFilter,
        limit: usize,
        before: Option<&str>,
    ) -> Result<Vec<AuditEntry>, sqlx::Error> {
        match self {
            Self::Postgres(p) => query(p, PG_SELECT, "::uuid", "::timestamptz", f, limit, before).await,
            Self::Sqlite(p) => query(p, SQLITE_SELECT, "", "", f, limit, before).await,
        }
    }

    /// Rows still `pending` that arrived before `cutoff`.
    pub async fn pending_before(&self, cutoff: &str) -> Result<Vec<AuditEntry>, sqlx::Error> {
        let f = AuditFilter {
            outcome: Some("pending".into()),
            until: Some(cutoff.to_owned()),
            ..AuditFilter::default()
        };
        self.query(&f, 10_000, None).await
    }

    /// Deletes rows that arrived before `cutoff`; returns how many.
    pub async fn prune(&self, cutoff: &str, batch: u32) -> Result<u64, sqlx::Error> {
        let cutoff = stamp(cutoff);
        let postgres = "DELETE FROM audit_events WHERE id IN (SELECT id FROM audit_events \
                        WHERE occurred_at < $1::timestamptz ORDER BY occurred_at LIMIT $2)";
        let sqlite = "DELETE FROM audit_events WHERE id IN (SELECT id FROM audit_events \
                      WHERE occurred_at < $1 ORDER BY occurred_at LIMIT $2)";
        self.delete_in_batches([postgres, sqlite], &cutoff, batch).await
    }

    /// Deletes what was kept of RayJobs' runs (their driver logs' tails)
    /// before `cutoff`, with the audit rows of their time, `batch` rows a
    /// statement as [`Self::prune`] does (a row holds up to 1 MiB of
    /// log); returns how many.
    pub async fn prune_runs(&self, cutoff: &str, batch: u32) -> Result<u64, sqlx::Error> {
        // `kept_at` is RFC 3339 text in UTC, so text order is time order.
        let sql = "DELETE FROM rayjob_runs WHERE uid IN \
                   (SELECT uid FROM rayjob_runs WHERE kept_at < $1 ORDER BY kept_at LIMIT $2)";
        self.delete_in_batches([sql, sql], cutoff, batch).await
    }

    /// Runs `sql` (Postgres's, SQLite's: a delete of at most `$2` rows
    /// before `$1`) until it deletes fewer than `batch`: oldest first,
    /// each statement short (well within the statement timeout, locks held
    /// briefly), and an interrupted prune keeps what it did.
    async fn delete_in_batches(&self, sql: [&'static str; 2], cutoff: &str, batch: u32) -> Result<u64, sqlx::Error> {
        let mut deleted = 0;
        loop {
            let n = match self {
                Self::Postgres(p) => sqlx::query(sql[0])
                    .bind(cutoff)
                    .bind(i64::from(batch))
                    .execute(p)
                    .await
                    .map(|r| r.rows_affected()),
                Self::Sqlite(p) => sqlx::query(sql[1])
                    .bind(cutoff)
                    .bind(i64::from(batch))
                    .execute(p)
                    .await
                    .map(|r| r.rows_affected()),
            }?;
            deleted += n;
            if n < u64::from(batch) {
                return Ok(deleted);
            }
        }
    }

    /// Whether the database answers.
    pub async fn ping(&self) -> Result<(), sqlx::Error> {
        match self {
            Self::Postgres(p) => sqlx::query("SELECT 1").execute(p).await.map(|_| ()),
            Self::Sqlite(p) => sqlx::query("SELECT 1").execute(p).await.map(|_| ()),
        }
    }
}

async fn insert<DB>(
    pool: &Pool<DB>,
    rows: &[AuditEntry],
    casts: &[&str; 21],
    served_by: Option<&str>,
) -> Result<Option<DB::QueryResult>, sqlx::Error>
where
    DB: Database,
    for<'q> Option<String>: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'c> &'c Pool<DB>: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
{
    if rows.is_empty() {
        return Ok(None);
    }
    let mut qb = QueryBuilder::<DB>::new(format!("INSERT INTO audit_events ({}, served_by) ", COLUMNS.join(", ")));
    qb.push_values(rows, |mut b, e| {
        for (value, cast) in values(e).into_iter().zip(casts) {
            b.push_bind(value).push_unseparated(*cast);
        }
        b.push_bind(served_by.map(str::to_owned));
    });
    // A batch retried after its commit's reply was lost is already stored.
    qb.push(" ON CONFLICT (id) DO NOTHING");
    qb.build().execute(pool).await.map(Some)
}

async fn finish<DB>(pool: &Pool<DB>, e: &AuditEntry, casts: &[&str; 21]) -> Result<(), sqlx::Error>
where
    DB: Database,
    for<'q> Option<String>: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'c> &'c Pool<DB>: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
{
    let all = values(e);
    let mut qb = QueryBuilder::<DB>::new("UPDATE audit_events SET ");
    let mut sep = qb.separated(", ");
    // The summary too: a tunnel's row gains the bytes that flowed.
    for i in [2usize, 14, 15, 16, 17, 18, 19] {
        sep.push(format!("{} = ", COLUMNS[i]));
        sep.push_bind_unseparated(all[i].clone());
        sep.push_unseparated(casts[i]);
    }
    // A row's outcome is final once it is neither pending nor unknown
    // (migration 0007 enforces it for every role).
    qb.push(" WHERE id = ").push_bind(all[0].clone()).push(casts[0]);
    qb.push(" AND outcome IN ('pending', 'unknown')");
    qb.build().execute(pool).await.map(|_| ())
}

async fn query<DB>(
    pool: &Pool<DB>,
    select: &str,
    id_cast: &str,
    time_cast: &str,
    f: &AuditFilter,
    limit: usize,
    before: Option<&str>,
) -> Result<Vec<AuditEntry>, sqlx::Error>
where
    DB: Database,
    for<'q> Option<String>: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> String: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'c> &'c Pool<DB>: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    RawRow: for<'r> sqlx::FromRow<'r, DB::Row>,
{
    let mut qb = QueryBuilder::<DB>::new(select);
    qb.push(" WHERE 1 = 1");
    // Filters are stored-form text, as rows are: a NUL or an overlong
    // name matches the row it went into (and Postgres takes the query).
    for (column, value) in [
        ("namespace", &f.namespace),
        ("actor_subject", &f.actor),
        ("action", &f.action),
        ("outcome", &f.outcome),
        ("cluster", &f.cluster),
        ("correlation_id", &f.correlation_id),
    ] {
        if let Some(v) = value {
            qb.push(format!(" AND {column} = ")).push_bind(indexable(v));
        }
    }
    if let Some(scope) = &f.scope {
        if scope.is_empty() {
            qb.push(" AND 1 = 0");
        } else {
            qb.push(" AND namespace IN (");
            let mut sep = qb.separated(", ");
            for ns in scope {
                sep.push_bind(ns.clone());
            }
            qb.push(")");
        }
    }
    if let Some(since) = &f.since {
        qb.push(" AND occurred_at >= ").push_bind(stamp(since)).push(time_cast);
    }
    if let Some(until) = &f.until {
        qb.push(" AND occurred_at < ").push_bind(stamp(until)).push(time_cast);
    }
    if let Some(id) = before {
        qb.push(" AND id < ").push_bind(id.to_owned()).push(id_cast);
    }
    qb.push(format!(" ORDER BY id DESC LIMIT {limit}"));
    let rows: Vec<RawRow> = qb.build_query_as().fetch_all(pool).await?;
    Ok(rows.into_iter().map(Into::into).collect())
}

#[cfg(test)]
mod tests {
    use super::{quoted, redact};

    #[test]
    fn role_names_are_quoted_identifiers() {
        assert_eq!(quoted("krayne_app").unwrap(), "\"krayne_app\"");
        assert_eq!(
            quoted("a\"; DROP TABLE audit_events; --").unwrap(),
            "\"a\"\"; DROP TABLE audit_events; --\""
        );
        assert!(quoted("").is_err());
        assert!(quoted(&"r".repeat(64)).is_err());
        assert!(quoted("nul\0").is_err());
    }

    #[test]
    fn passwords_never_reach_logs() {
        assert_eq!(
            redact("postgres://krayne:s3cret@db:5432/audit"),
            "postgres://krayne:***@db:5432/audit"
        );
        assert_eq!(redact("postgres://db/audit"), "postgres://db/audit");
        assert_eq!(redact("postgres://postgres@db/audit"), "postgres://postgres@db/audit");
        assert_eq!(redact("postgres://u:p@ss@db/a"), "postgres://u:***@db/a");
        assert_eq!(redact("sqlite://audit.db"), "sqlite://audit.db");
    }
}
