//! The usage ledger in the audit database (`cluster_uses`): each replica
//! records when something last used a cluster through it, and the
//! lifecycle reaper, on whichever replica leads, reads them all.

use sqlx::QueryBuilder;

use crate::{
    audit::rows::stamp,
    domain::{ActivityLedger, ClusterUse, Error},
    store::Store,
};

/// The audit database's usage ledger.
#[derive(Clone)]
pub struct SqlActivityLedger {
    store: Store,
}

impl SqlActivityLedger {
    /// The ledger in `store`'s database.
    pub fn new(store: Store) -> Self {
        Self { store }
    }
}

fn unavailable(e: &sqlx::Error) -> Error {
    Error::Unavailable(format!("the audit database does not answer: {e}"))
}

#[async_trait::async_trait]
impl ActivityLedger for SqlActivityLedger {
    async fn record(&self, uses: &[ClusterUse]) -> Result<(), Error> {
        if uses.is_empty() {
            return Ok(());
        }
        match &self.store {
            Store::Postgres(p) => {
                let mut q = QueryBuilder::new("INSERT INTO cluster_uses (namespace, cluster, used_at) ");
                q.push_values(uses, |mut row, u| {
                    row.push_bind(&u.namespace)
                        .push_bind(&u.name)
                        .push_bind(u.at.to_string())
                        .push_unseparated("::timestamptz");
                });
                q.push(
                    " ON CONFLICT (namespace, cluster) DO UPDATE \
                     SET used_at = GREATEST(cluster_uses.used_at, EXCLUDED.used_at)",
                );
                q.build().execute(p).await.map_err(|e| unavailable(&e))?;
            }
            Store::Sqlite(p) => {
                let mut q = QueryBuilder::new("INSERT INTO cluster_uses (namespace, cluster, used_at) ");
                q.push_values(uses, |mut row, u| {
                    row.push_bind(&u.namespace)
                        .push_bind(&u.name)
                        .push_bind(stamp(&u.at.to_string()));
                });
                q.push(
                    " ON CONFLICT (namespace, cluster) DO UPDATE \
                     SET used_at = MAX(cluster_uses.used_at, excluded.used_at)",
                );
                q.build().execute(p).await.map_err(|e| unavailable(&e))?;
            }
        }
        Ok(())
    }

    async fn last_uses(&self) -> Result<Vec<ClusterUse>, Error> {
        let rows: Vec<(String, String, String)> = match &self.store {
            Store::Postgres(p) => sqlx::query_as(
                "SELECT namespace, cluster, to_char(used_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"') \
                 FROM cluster_uses",
            )
            .fetch_all(p)
            .await
            .map_err(|e| unavailable(&e))?,
            Store::Sqlite(p) => sqlx::query_as("SELECT namespace, cluster, used_at FROM cluster_uses")
                .fetch_all(p)
                .await
                .map_err(|e| unavailable(&e))?,
        };
        Ok(rows
            .into_iter()
            .filter_map(|(namespace, name, at)| {
                Some(ClusterUse {
                    namespace,
                    name,
                    at: at.parse().ok()?,
                })
            })
            .collect())
    }

    async fn forget(&self, before: jiff::Timestamp) -> Result<u64, Error> {
        let before = stamp(&before.to_string());
        let done = match &self.store {
            Store::Postgres(p) => sqlx::query("DELETE FROM cluster_uses WHERE used_at < $1::timestamptz")
                .bind(before)
                .execute(p)
                .await
                .map(|r| r.rows_affected()),
            Store::Sqlite(p) => sqlx::query("DELETE FROM cluster_uses WHERE used_at < $1")
                .bind(before)
                .execute(p)
                .await
                .map(|r| r.rows_affected()),
        };
        done.map_err(|e| unavailable(&e))
    }
}
