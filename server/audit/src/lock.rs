//! Quota admission serialized per namespace in the audit database, so it
//! holds across every replica that shares it: a Postgres session-level
//! advisory lock (`pg_advisory_lock(key, hashtext(namespace))`) on a
//! connection held by the guard, taken after a lock in this process (so
//! one pool connection per namespace waits, not one per request). With
//! SQLite (one process by design) the lock in this process serves.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use sqlx::Executor as _;

use crate::{
    domain::{AdmissionGuard, AdmissionLock, Error},
    store::Store,
};

/// The advisory lock's first key: krayne's quota admissions.
const QUOTA_LOCKS: i32 = 0x6b71_7461; // "kqta"

/// The audit database's admission lock.
pub struct SqlAdmissionLock {
    store: Store,
    local: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl SqlAdmissionLock {
    /// The lock in `store`'s database.
    pub fn new(store: Store) -> Self {
        Self {
            store,
            local: Mutex::default(),
        }
    }
}

/// A held Postgres advisory lock: released on drop (the connection goes
/// back to the pool after an unlock, or is closed, which releases it too).
struct PgHeld {
    connection: Option<sqlx::pool::PoolConnection<sqlx::Postgres>>,
    namespace: String,
}

impl Drop for PgHeld {
    fn drop(&mut self) {
        let Some(mut connection) = self.connection.take() else {
            return;
        };
        let namespace = std::mem::take(&mut self.namespace);
        let unlock = async move {
            let unlocked = sqlx::query("SELECT pg_advisory_unlock($1, hashtext($2))")
                .bind(QUOTA_LOCKS)
                .bind(&namespace)
                .execute(&mut *connection)
                .await;
            if unlocked.is_err() {
                // Closing the session releases its locks.
                connection.close_on_drop();
            }
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(unlock);
            }
            Err(_) => tracing::warn!("an admission lock outlived the runtime; its connection closes with it"),
        }
    }
}

impl SqlAdmissionLock {
    async fn local_lock(&self, namespace: &str) -> tokio::sync::OwnedMutexGuard<()> {
        let lock = self
            .local
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(namespace.to_owned())
            .or_default()
            .clone();
        lock.lock_owned().await
    }
}

#[async_trait::async_trait]
impl AdmissionLock for SqlAdmissionLock {
    async fn lock(&self, namespace: &str) -> Result<AdmissionGuard, Error> {
        let unavailable = |e: sqlx::Error| {
            tracing::warn!(error = %e, namespace, "quota admission lock unavailable");
            Error::Unavailable(
                "quota admission cannot be serialized now (the audit database does not answer); nothing was created"
                    .into(),
            )
        };
        match &self.store {
            Store::Postgres(pool) => {
                // Admissions in this process queue here first, so at most
                // one pool connection per namespace waits on the database
                // lock (waiting ones must not starve the audit writers).
                let local = self.local_lock(namespace).await;
                let mut connection = pool.acquire().await.map_err(unavailable)?;
                // The connection's statement timeout bounds the wait.
                connection
                    .execute(
                        sqlx::query("SELECT pg_advisory_lock($1, hashtext($2))")
                            .bind(QUOTA_LOCKS)
                            .bind(namespace),
                    )
                    .await
                    .map_err(unavailable)?;
                // Dropped in order: the database lock, then the local one.
                Ok(AdmissionGuard::new((
                    PgHeld {
                        connection: Some(connection),
                        namespace: namespace.to_owned(),
                    },
                    local,
                )))
            }
            Store::Sqlite(_) => Ok(AdmissionGuard::new(self.local_lock(namespace).await)),
        }
    }
}
