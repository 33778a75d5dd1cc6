//! The usage ledger in the store database (`usage_intervals`,
//! `usage_recorder`): the leader's recorder writes every Ray pod's and
//! cluster's intervals, every replica reads them for reports.

use jiff::Timestamp;
use sqlx::QueryBuilder;

use crate::{
    domain::{Atom, Error, PodCharge, UsageClose, UsageInterval, UsageKind, UsageLedger},
    store::Store,
};

/// Rows written per statement (each binds 14 values; both databases
/// accept well over 14 × 500).
const CHUNK: usize = 500;

/// The store database's usage ledger.
#[derive(Clone)]
pub struct SqlUsageLedger {
    store: Store,
}

impl SqlUsageLedger {
    /// The ledger in `store`'s database.
    pub fn new(store: Store) -> Self {
        Self { store }
    }
}

fn unavailable(e: &sqlx::Error) -> Error {
    Error::Unavailable(format!("the store database does not answer: {e}"))
}

fn millis(t: Timestamp) -> i64 {
    t.as_millisecond()
}

fn stamp(ms: i64) -> Timestamp {
    Timestamp::from_millisecond(ms).unwrap_or(Timestamp::UNIX_EPOCH)
}

fn big(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Runs the same statement, built by `$build` into a `QueryBuilder` of
/// either database, on the store's pool.
macro_rules! on_store {
    ($store:expr, |$q:ident| $build:expr, |$run:ident, $pool:ident| $exec:expr) => {
        match $store {
            Store::Postgres($pool) => {
                let mut $q = QueryBuilder::<sqlx::Postgres>::new("");
                $build;
                let $run = $q.build();
                $exec
            }
            Store::Sqlite($pool) => {
                let mut $q = QueryBuilder::<sqlx::Sqlite>::new("");
                $build;
                let $run = $q.build();
                $exec
            }
        }
    };
}

/// A row of `usage_intervals` as read.
type Row = (
    String,
    String,
    String,
    String,
    Option<String>,
    Option<String>,
    String,
    i64,
    i64,
    i64,
    Option<String>,
    i64,
    Option<i64>,
    bool,
);

fn interval(row: Row) -> Option<UsageInterval> {
    let (
        key,
        kind,
        namespace,
        cluster,
        worker_group,
        creator,
        teams,
        cpu,
        memory,
        gpus,
        gpu_resource,
        started,
        ended,
        estimated,
    ) = row;
    Some(UsageInterval {
        key,
        kind: UsageKind::parse(&kind)?,
        namespace,
        cluster,
        worker_group,
        creator,
        teams: serde_json::from_str(&teams).unwrap_or_default(),
        charge: PodCharge {
            cpu_millis: u64::try_from(cpu).unwrap_or(0),
            memory_bytes: u64::try_from(memory).unwrap_or(0),
            gpus: u64::try_from(gpus).unwrap_or(0),
            gpu_resource: gpu_resource.map(Atom::from),
        },
        started_at: stamp(started),
        ended_at: ended.map(stamp),
        estimated,
    })
}

#[async_trait::async_trait]
impl UsageLedger for SqlUsageLedger {
    async fn open(&self, intervals: &[UsageInterval]) -> Result<(), Error> {
        for chunk in intervals.chunks(CHUNK) {
            on_store!(
                &self.store,
                |q| {
                    q.push(
                        "INSERT INTO usage_intervals (key, kind, namespace, cluster, worker_group, creator, teams, \
                         cpu_millis, memory_bytes, gpus, gpu_resource, started_ms, ended_ms, estimated) ",
                    );
                    q.push_values(chunk, |mut row, i| {
                        row.push_bind(i.key.clone())
                            .push_bind(i.kind.as_str())
                            .push_bind(i.namespace.clone())
                            .push_bind(i.cluster.clone())
                            .push_bind(i.worker_group.clone())
                            .push_bind(i.creator.clone())
                            .push_bind(serde_json::to_string(&i.teams).unwrap_or_else(|_| "[]".into()))
                            .push_bind(big(i.charge.cpu_millis))
                            .push_bind(big(i.charge.memory_bytes))
                            .push_bind(big(i.charge.gpus))
                            .push_bind(i.charge.gpu_resource.as_ref().map(|g| g.as_str().to_owned()))
                            .push_bind(millis(i.started_at))
                            .push_bind(i.ended_at.map(millis))
                            .push_bind(i.estimated);
                    });
                    q.push(" ON CONFLICT (key) DO NOTHING");
                },
                |query, pool| query.execute(pool).await.map(|_| ()).map_err(|e| unavailable(&e))?
            );
        }
        Ok(())
    }

    async fn close(&self, closes: &[UsageClose]) -> Result<(), Error> {
        // One statement for 500 ends, not one each: a round that sees a
        // large cluster go (or a new leader closing what ended during an
        // outage) writes thousands. The first end given for a key wins, as
        // it would one statement at a time.
        let mut given = std::collections::HashSet::new();
        let closes: Vec<&UsageClose> = closes.iter().filter(|c| given.insert(c.key.as_str())).collect();
        for chunk in closes.chunks(CHUNK) {
            on_store!(
                &self.store,
                |q| {
                    q.push("WITH c (key, ended_ms, estimated) AS (");
                    q.push_values(chunk, |mut row, c| {
                        row.push_bind(c.key.clone())
                            .push_bind(millis(c.ended_at))
                            .push_bind(c.estimated);
                    });
                    // An end is never before its start (a clock's skew must
                    // not make hours negative).
                    q.push(
                        ") UPDATE usage_intervals AS u SET \
                         ended_ms = CASE WHEN c.ended_ms > u.started_ms THEN c.ended_ms ELSE u.started_ms END, \
                         estimated = c.estimated \
                         FROM c WHERE u.key = c.key AND u.ended_ms IS NULL",
                    );
                },
                |query, pool| query.execute(pool).await.map(|_| ()).map_err(|e| unavailable(&e))?
            );
        }
        Ok(())
    }

    async fn open_keys(&self) -> Result<Vec<String>, Error> {
        let sql = "SELECT key FROM usage_intervals WHERE ended_ms IS NULL";
        let rows: Vec<(String,)> = match &self.store {
            Store::Postgres(p) => sqlx::query_as(sql).fetch_all(p).await,
            Store::Sqlite(p) => sqlx::query_as(sql).fetch_all(p).await,
        }
        .map_err(|e| unavailable(&e))?;
        Ok(rows.into_iter().map(|(k,)| k).collect())
    }

    async fn mark_seen(&self, at: Timestamp) -> Result<(), Error> {
        let sql = "INSERT INTO usage_recorder (id, seen_ms) VALUES (1, $1) \
                   ON CONFLICT (id) DO UPDATE SET seen_ms = excluded.seen_ms";
        match &self.store {
            Store::Postgres(p) => sqlx::query(sql).bind(millis(at)).execute(p).await.map(|_| ()),
            Store::Sqlite(p) => sqlx::query(sql).bind(millis(at)).execute(p).await.map(|_| ()),
        }
        .map_err(|e| unavailable(&e))?;
        Ok(())
    }

    async fn last_seen(&self) -> Result<Option<Timestamp>, Error> {
        let sql = "SELECT seen_ms FROM usage_recorder WHERE id = 1";
        let row: Option<(i64,)> = match &self.store {
            Store::Postgres(p) => sqlx::query_as(sql).fetch_optional(p).await,
            Store::Sqlite(p) => sqlx::query_as(sql).fetch_optional(p).await,
        }
        .map_err(|e| unavailable(&e))?;
        Ok(row.map(|(ms,)| stamp(ms)))
    }

    async fn intervals(
        &self,
        namespaces: Option<&[String]>,
        from: Timestamp,
        to: Timestamp,
    ) -> Result<Vec<UsageInterval>, Error> {
        if namespaces.is_some_and(<[String]>::is_empty) {
            return Ok(Vec::new());
        }
        let rows: Vec<Row> = on_store!(
            &self.store,
            |q| {
                q.push(
                    "SELECT key, kind, namespace, cluster, worker_group, creator, teams, cpu_millis, memory_bytes, \
                     gpus, gpu_resource, started_ms, ended_ms, estimated FROM usage_intervals WHERE started_ms < ",
                );
                q.push_bind(millis(to));
                q.push(" AND (ended_ms IS NULL OR ended_ms > ");
                q.push_bind(millis(from));
                q.push(")");
                if let Some(namespaces) = namespaces {
                    q.push(" AND namespace IN (");
                    let mut list = q.separated(", ");
                    for namespace in namespaces {
                        list.push_bind(namespace.clone());
                    }
                    q.push(")");
                }
            },
            |query, pool| {
                use sqlx::FromRow as _;
                let raw = query.fetch_all(pool).await.map_err(|e| unavailable(&e))?;
                raw.iter()
                    .map(Row::from_row)
                    .collect::<Result<Vec<Row>, _>>()
                    .map_err(|e| unavailable(&e))?
            }
        );
        Ok(rows.into_iter().filter_map(interval).collect())
    }
}
