//! The audit log: the only code that talks to SQL. Postgres in
//! production, SQLite (a file) as the embedded default.
#![forbid(unsafe_code)]

use krayne_core::domain;

mod lock;
mod rows;
mod sink;
mod store;

use std::sync::Arc;

pub use lock::SqlAdmissionLock;
pub use sink::{QueueOptions, SqlAuditSink};
pub use store::{DatabaseOptions, Store, redact};

/// Connects, migrates, and resolves rows a crash left pending (older than
/// `sweep_after`).
pub async fn open(
    db: &DatabaseOptions,
    queues: &QueueOptions,
    sweep_after: std::time::Duration,
) -> Result<Arc<SqlAuditSink>, String> {
    let store = Store::connect(db)?;
    store
        .migrate()
        .await
        .map_err(|e| format!("audit database {}: {e}", redact(&db.url)))?;
    let sink = SqlAuditSink::start(store, queues);
    let cutoff = jiff::Timestamp::now()
        .checked_sub(jiff::SignedDuration::try_from(sweep_after).unwrap_or_default())
        .unwrap_or_else(|_| jiff::Timestamp::now());
    let resolved = sink.sweep(&cutoff.to_string()).await?;
    tracing::info!(database = %redact(&db.url), resolved_pending = resolved, "audit log ready");
    Ok(sink)
}
