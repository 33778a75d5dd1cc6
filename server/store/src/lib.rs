//! The store database: the only code that talks to SQL. Postgres in
//! production, SQLite (a file) as the embedded default. It holds the
//! audit trail (`audit`), the shared quota admission lock (`admission`),
//! the clusters' last uses for idleness (`activity`) and the lifecycle
//! policies seen (`policies`).
#![forbid(unsafe_code)]

use krayne_core::domain;

mod activity;
mod admission;
mod audit;
mod policies;
mod runs;
mod store;
mod upkeep;
mod usage;

use std::{sync::Arc, time::Duration};

pub use activity::SqlActivityLedger;
pub use admission::SqlAdmissionLock;
pub use audit::{QueueOptions, SqlAuditSink};
pub use policies::SqlPolicyLedger;
pub use runs::SqlRunLedger;
pub use store::{DatabaseOptions, Store, redact};
pub use upkeep::{Upkeep, read_url};
pub use usage::SqlUsageLedger;

/// This process's name among the replicas sharing an audit database: the
/// host (a pod's name) and a random suffix, so a restarted pod is a new
/// replica.
pub fn replica_name() -> String {
    let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "krayne".into());
    let suffix = uuid::Uuid::new_v4().simple().to_string();
    format!("{host}-{}", &suffix[..8])
}

/// Opens the audit log without waiting for its database: the sink is
/// returned at once (writes fail, and mutations are refused, while the
/// database is away), and the [`Upkeep`] runs in the background — its
/// first round (migrations, schema check, heartbeat, sweep) is given up
/// to `first_within` before this returns.
pub async fn open(
    db: &DatabaseOptions,
    queues: &QueueOptions,
    upkeep: Upkeep,
    first_within: Duration,
) -> Result<Arc<SqlAuditSink>, String> {
    let store = Store::connect(db)?;
    let sink = SqlAuditSink::start(store.clone(), queues, &replica_name());
    let url = upkeep.url_file.is_some().then(|| db.url.clone());
    upkeep::start(
        store,
        sink.replica().to_owned(),
        upkeep,
        sink.problems_handle(),
        first_within,
        url,
    )
    .await;
    tracing::info!(database = %redact(&db.url), replica = sink.replica(), "audit log opened");
    Ok(sink)
}
