//! What krayne keeps of RayJobs' ended jobs (`rayjob_runs`): Ray's status,
//! the exit code and the driver log's last MiB, for after their clusters
//! are gone.

use crate::{
    domain::{Error, KeptRun, RunLedger},
    store::Store,
};

/// The audit database's ledger of kept runs.
#[derive(Clone)]
pub struct SqlRunLedger {
    store: Store,
}

impl SqlRunLedger {
    /// The ledger in `store`'s database.
    pub fn new(store: Store) -> Self {
        Self { store }
    }
}

fn unavailable(e: &sqlx::Error) -> Error {
    Error::Unavailable(format!("the audit database does not answer: {e}"))
}

/// Postgres text holds no NUL; a driver may print one.
fn storable(text: &str) -> String {
    text.replace('\0', "\u{FFFD}")
}

const INSERT: &str = "INSERT INTO rayjob_runs (uid, namespace, name, job_id, status, exit_code, log_tail, truncated, \
     kept_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (uid) DO NOTHING";
const SELECT: &str = "SELECT namespace, name, uid, job_id, status, exit_code, log_tail, truncated, kept_at \
     FROM rayjob_runs WHERE uid = $1 AND namespace = $2 AND name = $3";

/// One row, in `SELECT`'s order.
type Row = (
    String,
    String,
    String,
    String,
    String,
    Option<i64>,
    Option<String>,
    bool,
    String,
);

/// The same statements on either database.
macro_rules! keep_in {
    ($pool:expr, $run:expr) => {
        sqlx::query(INSERT)
            .bind(&$run.uid)
            .bind(&$run.namespace)
            .bind(&$run.name)
            .bind(storable(&$run.job_id))
            .bind(storable(&$run.status))
            .bind($run.exit_code)
            .bind($run.log_tail.as_deref().map(storable))
            .bind($run.truncated)
            .bind(&$run.kept_at)
            .execute($pool)
            .await
            .map(|_| ())
    };
}

macro_rules! kept_in {
    ($pool:expr, $namespace:expr, $name:expr, $uid:expr) => {
        sqlx::query_as::<_, Row>(SELECT)
            .bind($uid)
            .bind($namespace)
            .bind($name)
            .fetch_optional($pool)
            .await
    };
}

#[async_trait::async_trait]
impl RunLedger for SqlRunLedger {
    async fn keep(&self, run: &KeptRun) -> Result<(), Error> {
        match &self.store {
            Store::Postgres(p) => keep_in!(p, run),
            Store::Sqlite(p) => keep_in!(p, run),
        }
        .map_err(|e| unavailable(&e))
    }

    async fn kept(&self, namespace: &str, name: &str, uid: &str) -> Result<Option<KeptRun>, Error> {
        let row = match &self.store {
            Store::Postgres(p) => kept_in!(p, namespace, name, uid),
            Store::Sqlite(p) => kept_in!(p, namespace, name, uid),
        }
        .map_err(|e| unavailable(&e))?;
        Ok(row.map(
            |(namespace, name, uid, job_id, status, exit_code, log_tail, truncated, kept_at)| KeptRun {
                namespace,
                name,
                uid,
                job_id,
                status,
                exit_code,
                log_tail,
                truncated,
                kept_at,
            },
        ))
    }
}
