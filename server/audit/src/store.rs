//! The two databases behind one set of operations. Every value is bound as
//! text; Postgres casts it to the column's type.

use std::time::Duration;

use sqlx::{
    AssertSqlSafe, Database, Executor, IntoArguments, Pool, Postgres, QueryBuilder, Sqlite,
    postgres::PgPoolOptions,
    sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions},
};

use super::rows::{COLUMNS, RawRow, indexable, stamp, values};
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
}

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
            let pool = PgPoolOptions::new()
                .max_connections(o.max_connections)
                .acquire_timeout(o.acquire_timeout)
                .after_connect(move |conn, _| {
                    Box::pin(async move {
                        let set = format!("SET statement_timeout = {timeout_ms}");
                        conn.execute(AssertSqlSafe(set)).await.map(|_| ())
                    })
                })
                .connect_lazy(&o.url)
                .map_err(|e| format!("database {}: {e}", redact(&o.url)))?;
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

    /// Applies the migrations (Postgres: under sqlx's advisory lock, so
    /// replicas may start together).
    pub async fn migrate(&self) -> Result<(), String> {
        match self {
            Self::Postgres(p) => sqlx::migrate!("../../migrations/postgres").run(p).await,
            Self::Sqlite(p) => sqlx::migrate!("../../migrations/sqlite").run(p).await,
        }
        .map_err(|e| format!("migrations: {e}"))
    }

    /// Inserts rows in one statement; returns how many were new (a row
    /// whose id is already stored is left as it is).
    pub async fn insert(&self, rows: &[AuditEntry]) -> Result<u64, sqlx::Error> {
        match self {
            Self::Postgres(p) => insert(p, rows, &PG_CASTS)
                .await
                .map(|r| r.map_or(0, |r| r.rows_affected())),
            Self::Sqlite(p) => insert(p, rows, &NO_CASTS)
                .await
                .map(|r| r.map_or(0, |r| r.rows_affected())),
        }
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
    pub async fn prune(&self, cutoff: &str) -> Result<u64, sqlx::Error> {
        let cutoff = stamp(cutoff);
        match self {
            Self::Postgres(p) => sqlx::query("DELETE FROM audit_events WHERE occurred_at < $1::timestamptz")
                .bind(cutoff)
                .execute(p)
                .await
                .map(|r| r.rows_affected()),
            Self::Sqlite(p) => sqlx::query("DELETE FROM audit_events WHERE occurred_at < $1")
                .bind(cutoff)
                .execute(p)
                .await
                .map(|r| r.rows_affected()),
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
    let mut qb = QueryBuilder::<DB>::new(format!("INSERT INTO audit_events ({}) ", COLUMNS.join(", ")));
    qb.push_values(rows, |mut b, e| {
        for (value, cast) in values(e).into_iter().zip(casts) {
            b.push_bind(value).push_unseparated(*cast);
        }
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
    qb.push(" WHERE id = ").push_bind(all[0].clone()).push(casts[0]);
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
    use super::redact;

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
