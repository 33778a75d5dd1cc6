//! The lifecycle policies the reaper has seen in force, per namespace
//! (`lifecycle_policies`): which is new or changed, and since when, so a
//! policy only reports what it alone would do until it has settled —
//! known to every replica, and to one restarted after the change.

use std::collections::HashMap;

use crate::{
    audit::rows::stamp,
    domain::{Error, PolicyLedger, PolicyRecord},
    store::Store,
};

/// The audit database's policy ledger.
#[derive(Clone)]
pub struct SqlPolicyLedger {
    store: Store,
}

impl SqlPolicyLedger {
    /// The ledger in `store`'s database.
    pub fn new(store: Store) -> Self {
        Self { store }
    }
}

/// One row: namespace, policy, previous, since.
type Row = (String, String, Option<String>, String);

fn unavailable(e: &sqlx::Error) -> Error {
    Error::Unavailable(format!("the audit database does not answer: {e}"))
}

/// What to write for `seen` given the `recorded` rows: rows to upsert
/// (new or changed policies) and namespaces to forget.
fn changes(recorded: &[Row], seen: &[(String, String)], now: &str) -> (Vec<Row>, Vec<String>) {
    let by_namespace: HashMap<&str, &Row> = recorded.iter().map(|r| (r.0.as_str(), r)).collect();
    let upserts = seen
        .iter()
        .filter_map(|(namespace, policy)| match by_namespace.get(namespace.as_str()) {
            Some(row) if row.1 == *policy => None,
            Some(row) => Some((namespace.clone(), policy.clone(), Some(row.1.clone()), now.to_owned())),
            None => Some((namespace.clone(), policy.clone(), None, now.to_owned())),
        })
        .collect();
    let listed: std::collections::HashSet<&str> = seen.iter().map(|(n, _)| n.as_str()).collect();
    let forgotten = recorded
        .iter()
        .filter(|r| !listed.contains(r.0.as_str()))
        .map(|r| r.0.clone())
        .collect();
    (upserts, forgotten)
}

const SELECT: &str = "SELECT namespace, policy, previous, since FROM lifecycle_policies";
const UPSERT: &str = "INSERT INTO lifecycle_policies (namespace, policy, previous, since) VALUES ($1, $2, $3, $4) \
     ON CONFLICT (namespace) DO UPDATE SET policy = EXCLUDED.policy, previous = EXCLUDED.previous, since = EXCLUDED.since";
const FORGET: &str = "DELETE FROM lifecycle_policies WHERE namespace = $1";

/// The same statements on either database.
macro_rules! observe_in {
    ($pool:expr, $seen:expr, $now:expr) => {{
        let mut tx = $pool.begin().await.map_err(|e| unavailable(&e))?;
        let recorded: Vec<Row> = sqlx::query_as(SELECT)
            .fetch_all(&mut *tx)
            .await
            .map_err(|e| unavailable(&e))?;
        let (upserts, forgotten) = changes(&recorded, $seen, $now);
        for (namespace, policy, previous, since) in &upserts {
            sqlx::query(UPSERT)
                .bind(namespace)
                .bind(policy)
                .bind(previous)
                .bind(since)
                .execute(&mut *tx)
                .await
                .map_err(|e| unavailable(&e))?;
        }
        for namespace in &forgotten {
            sqlx::query(FORGET)
                .bind(namespace)
                .execute(&mut *tx)
                .await
                .map_err(|e| unavailable(&e))?;
        }
        tx.commit().await.map_err(|e| unavailable(&e))?;
        let mut rows: HashMap<String, Row> = recorded.into_iter().map(|r| (r.0.clone(), r)).collect();
        rows.extend(upserts.into_iter().map(|r| (r.0.clone(), r)));
        rows
    }};
}

#[async_trait::async_trait]
impl PolicyLedger for SqlPolicyLedger {
    async fn observe(&self, policies: &[(String, String)], now: jiff::Timestamp) -> Result<Vec<PolicyRecord>, Error> {
        let now = stamp(&now.to_string());
        let rows = match &self.store {
            Store::Postgres(p) => observe_in!(p, policies, &now),
            Store::Sqlite(p) => observe_in!(p, policies, &now),
        };
        Ok(policies
            .iter()
            .filter_map(|(namespace, _)| {
                let row = rows.get(namespace)?;
                Some(PolicyRecord {
                    namespace: namespace.clone(),
                    previous: row.2.clone(),
                    since: row.3.parse().ok()?,
                })
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_and_changed_policies_start_anew_and_unlisted_ones_are_forgotten() {
        let row = |n: &str, p: &str| (n.to_owned(), p.to_owned(), None, "t0".to_owned());
        let recorded = vec![row("same", "a"), row("changed", "a"), row("gone", "a")];
        let seen = [("same", "a"), ("changed", "b"), ("new", "c")].map(|(n, p)| (n.to_owned(), p.to_owned()));
        let (upserts, forgotten) = changes(&recorded, &seen, "t1");
        assert_eq!(
            upserts,
            vec![
                (
                    "changed".to_owned(),
                    "b".to_owned(),
                    Some("a".to_owned()),
                    "t1".to_owned()
                ),
                ("new".to_owned(), "c".to_owned(), None, "t1".to_owned()),
            ]
        );
        assert_eq!(forgotten, vec!["gone".to_owned()]);
    }
}
