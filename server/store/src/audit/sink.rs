//! The SQL audit sink: mutations write their row before they act (fail
//! closed); outcomes that cannot be written are retried from a bounded
//! queue; other rows are batched; rows a crash left `pending` are resolved
//! by a sweeper at start-up.

use std::{sync::Arc, time::Duration};

use tokio::sync::{mpsc, oneshot};

use crate::domain::{
    AuditSink, Error,
    audit::{AuditEntry, AuditFilter, Outcome},
};
use crate::store::Store;

/// Sizes of the in-memory queues.
#[derive(Debug, Clone)]
pub struct QueueOptions {
    /// Rows waiting to be batched (non-mutations); beyond it rows are
    /// dropped and counted.
    pub batch_queue: usize,
    /// Rows per batched insert.
    pub batch_size: usize,
    /// Longest a row waits for its batch.
    pub batch_delay: Duration,
    /// Outcomes waiting for a retry.
    pub retry_queue: usize,
}

impl Default for QueueOptions {
    fn default() -> Self {
        Self {
            batch_queue: 10_000,
            batch_size: 200,
            batch_delay: Duration::from_millis(100),
            retry_queue: 10_000,
        }
    }
}

/// What the background writers receive.
enum Queued {
    /// A row to write.
    Row(Box<AuditEntry>),
    /// Write everything received before this, then answer.
    Flush(oneshot::Sender<()>),
}

/// The audit log in Postgres or SQLite.
pub struct SqlAuditSink {
    store: Store,
    /// This replica, named in the rows it writes.
    replica: Arc<str>,
    batch: mpsc::Sender<Queued>,
    retry: mpsc::Sender<Queued>,
    problems: crate::upkeep::Problems,
}

/// Resolves once the writer behind `queue` has handled what was queued.
async fn drained(queue: &mpsc::Sender<Queued>) {
    let (done, answered) = oneshot::channel();
    if queue.send(Queued::Flush(done)).await.is_ok() {
        let _ = answered.await;
    }
}

/// `Unavailable` saying what could not be done; the cause goes to the log.
fn unavailable(e: &sqlx::Error, what: &str) -> Error {
    tracing::warn!(error = %e, "audit database error");
    Error::Unavailable(what.to_owned())
}

const NOT_WRITTEN: &str = "the audit log cannot be written";

impl SqlAuditSink {
    /// The usage ledger in this sink's database.
    pub fn activity_ledger(&self) -> crate::SqlActivityLedger {
        crate::SqlActivityLedger::new(self.store.clone())
    }

    /// The usage accounting ledger in the same database.
    pub fn usage_ledger(&self) -> crate::SqlUsageLedger {
        crate::SqlUsageLedger::new(self.store.clone())
    }

    /// What is kept of RayJobs' ended jobs, in the same database.
    pub fn run_ledger(&self) -> crate::SqlRunLedger {
        crate::SqlRunLedger::new(self.store.clone())
    }

    /// The lifecycle policy ledger in the same database.
    pub fn policy_ledger(&self) -> crate::SqlPolicyLedger {
        crate::SqlPolicyLedger::new(self.store.clone())
    }

    /// Quota admission serialized in this sink's database.
    pub fn admission_lock(&self) -> crate::SqlAdmissionLock {
        crate::SqlAdmissionLock::new(self.store.clone())
    }

    /// A sink over `store`, writing as `replica`, with its background
    /// writers started.
    pub fn start(store: Store, q: &QueueOptions, replica: &str) -> Arc<Self> {
        let (batch, batch_rx) = mpsc::channel(q.batch_queue.max(1));
        let (retry, retry_rx) = mpsc::channel(q.retry_queue.max(1));
        let replica: Arc<str> = Arc::from(replica);
        tokio::spawn(write_batches(
            store.clone(),
            replica.clone(),
            batch_rx,
            q.batch_size.max(1),
            q.batch_delay,
        ));
        tokio::spawn(retry_outcomes(store.clone(), retry_rx));
        Arc::new(Self {
            store,
            replica,
            batch,
            retry,
            problems: crate::upkeep::Problems::default(),
        })
    }

    /// This replica's name in the rows it writes and in its heartbeat.
    pub fn replica(&self) -> &str {
        &self.replica
    }

    pub(crate) fn problems_handle(&self) -> crate::upkeep::Problems {
        self.problems.clone()
    }

    /// The store this sink writes to.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The error a `begin` that could not write `entry` answers. A write
    /// that failed on the way (the database stopping after its commit,
    /// before its answer) may have stored the row all the same; the
    /// mutation does not run, so that row is settled as refused once the
    /// database takes writes again. Updating a row never stored changes
    /// nothing, and a row the database refused outright was never stored.
    fn refused(&self, entry: &AuditEntry, e: &sqlx::Error) -> Error {
        let error = unavailable(e, NOT_WRITTEN);
        if !is_permanent(e) {
            let mut settled = entry.clone();
            settled.outcome = Outcome::Failed;
            settled.http_status = Some(error.http_status());
            settled.grpc_code = Some(error.grpc_code().1.to_owned());
            settled.error = Some(format!("{NOT_WRITTEN}, so nothing was changed"));
            settled.completed_at = Some(jiff::Timestamp::now().to_string());
            settled.duration_ms = Some(0);
            if self.retry.try_send(Queued::Row(Box::new(settled))).is_err() {
                metrics::counter!("krayne_audit_dropped_total", "queue" => "retry").increment(1);
                tracing::error!(id = %entry.id, "audit retry queue full; a refused mutation's row may stay pending");
            }
        }
        error
    }

    /// Resolves rows left `pending` for longer than `older` by replicas
    /// that are gone (none named, or no heartbeat for a minute): their
    /// mutation may or may not have reached Kubernetes, so they become
    /// `unknown`, saying so. Rows of live replicas (a tunnel open for
    /// hours) stay. Returns how many.
    pub async fn sweep(&self, older: Duration) -> Result<usize, String> {
        let error = "the server stopped before recording the outcome; check the cluster";
        let resolved = self
            .store
            .resolve_abandoned(older, Duration::from_secs(60), error)
            .await
            .map_err(|e| e.to_string())?;
        Ok(resolved.len())
    }
}

#[async_trait::async_trait]
impl AuditSink for SqlAuditSink {
    async fn begin(&self, entry: &AuditEntry) -> Result<(), Error> {
        let started = std::time::Instant::now();
        let written = self
            .store
            .insert_by(std::slice::from_ref(entry), Some(&self.replica))
            .await;
        metrics::histogram!("krayne_audit_insert_seconds").record(started.elapsed().as_secs_f64());
        written.map(|_| ()).map_err(|e| self.refused(entry, &e))
    }

    async fn begin_unique(&self, entry: &AuditEntry) -> Result<bool, Error> {
        let written = self
            .store
            .insert_by(std::slice::from_ref(entry), Some(&self.replica))
            .await;
        written.map(|new| new == 1).map_err(|e| self.refused(entry, &e))
    }

    async fn finish(&self, entry: &AuditEntry) {
        match self.store.finish(entry).await {
            Ok(()) => {}
            Err(e) => {
                tracing::warn!(id = %entry.id, error = %e, "audit outcome not written; queued for retry");
                if self.retry.try_send(Queued::Row(Box::new(entry.clone()))).is_err() {
                    metrics::counter!("krayne_audit_dropped_total", "queue" => "retry").increment(1);
                    tracing::error!(id = %entry.id, "audit retry queue full; the sweeper will resolve this row");
                }
            }
        }
    }

    async fn record(&self, entry: &AuditEntry) {
        if self.batch.try_send(Queued::Row(Box::new(entry.clone()))).is_err() {
            metrics::counter!("krayne_audit_dropped_total", "queue" => "batch").increment(1);
        }
    }

    async fn ping(&self) -> Result<(), Error> {
        self.store.ping().await.map_err(|e| unavailable(&e, NOT_WRITTEN))
    }

    fn problems(&self) -> Vec<String> {
        self.problems.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    async fn flush(&self) {
        // Side by side: a batch stuck on a database that is down must not
        // use up the time the outcomes (which settle `pending` rows) have.
        tokio::join!(drained(&self.batch), drained(&self.retry));
    }

    async fn query(&self, filter: &AuditFilter, limit: usize, before: Option<&str>) -> Result<Vec<AuditEntry>, Error> {
        self.store
            .query(filter, limit, before)
            .await
            .map_err(|e| unavailable(&e, "the audit log cannot be read now; try again shortly"))
    }
}

/// Batches rows until `size` or `delay` (or a flush), then inserts them in
/// one statement; a failed batch is retried with backoff, never dropped.
async fn write_batches(store: Store, replica: Arc<str>, mut rx: mpsc::Receiver<Queued>, size: usize, delay: Duration) {
    while let Some(first) = rx.recv().await {
        let mut flushes = Vec::new();
        let mut batch = Vec::new();
        match first {
            Queued::Row(e) => batch.push(*e),
            Queued::Flush(done) => flushes.push(done),
        }
        let deadline = tokio::time::sleep(delay);
        tokio::pin!(deadline);
        while batch.len() < size && flushes.is_empty() {
            tokio::select! {
                next = rx.recv() => match next {
                    Some(Queued::Row(e)) => batch.push(*e),
                    Some(Queued::Flush(done)) => flushes.push(done),
                    None => break,
                },
                () = &mut deadline => break,
            }
        }
        write_batch(&store, &replica, &batch).await;
        for done in flushes {
            let _ = done.send(());
        }
    }
}

async fn write_batch(store: &Store, replica: &str, batch: &[AuditEntry]) {
    if batch.is_empty() {
        return;
    }
    let mut written = batch.len();
    if insert_retrying(store, replica, batch).await.is_err() {
        // One row the database will never take must not hold back the
        // rest: write them one by one and drop only that row.
        for row in batch {
            if let Err(e) = insert_retrying(store, replica, std::slice::from_ref(row)).await {
                written -= 1;
                metrics::counter!("krayne_audit_dropped_total", "queue" => "rejected").increment(1);
                tracing::error!(id = %row.id, request_id = %row.meta.request_id, error = %e,
                    "the database refused an audit row; dropped");
            }
        }
    }
    metrics::counter!("krayne_audit_batched_rows_total").increment(written as u64);
}

/// Inserts `rows`, retrying while the database is away; fails only on an
/// error retrying cannot mend.
async fn insert_retrying(store: &Store, replica: &str, rows: &[AuditEntry]) -> Result<(), sqlx::Error> {
    retrying(Duration::from_millis(100), || async move {
        store.insert_by(rows, Some(replica)).await.map(|_| ())
    })
    .await
}

/// Runs `write` until it succeeds or fails permanently, pausing with a
/// doubling backoff (from `first`, at most 10 s) after transient errors.
async fn retrying<F, Fut>(first: Duration, mut write: F) -> Result<(), sqlx::Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<(), sqlx::Error>>,
{
    let mut backoff = first;
    loop {
        match write().await {
            Err(e) if !is_permanent(&e) => {
                tracing::warn!(error = %e, "audit rows not written; retrying");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(10));
            }
            done => return done,
        }
    }
}

/// Whether retrying `e` cannot help: the row itself is refused, not the
/// database away.
fn is_permanent(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Database(db) => refuses_the_row(&db.kind(), db.code().as_deref()),
        _ => false,
    }
}

/// A constraint, or (Postgres SQLSTATE class 22 or 54) a data exception or
/// a program limit such as an oversized index entry, or (SQLite primary
/// code) TOOBIG, CONSTRAINT, MISMATCH or RANGE. Connection, resource,
/// operator-intervention (a stopping server), busy and lock errors are
/// transient.
fn refuses_the_row(kind: &sqlx::error::ErrorKind, code: Option<&str>) -> bool {
    if !matches!(kind, sqlx::error::ErrorKind::Other) {
        return true;
    }
    match code {
        // SQLSTATE: five characters, the first two the class.
        Some(sqlstate) if sqlstate.len() == 5 => matches!(&sqlstate[..2], "22" | "54"),
        // SQLite: an extended result code in decimal; its low byte is the
        // primary code.
        Some(sqlite) => sqlite
            .parse::<u32>()
            .is_ok_and(|c| matches!(c & 0xff, 18 | 19 | 20 | 25)),
        None => false,
    }
}

/// Retries outcomes until they are written.
async fn retry_outcomes(store: Store, mut rx: mpsc::Receiver<Queued>) {
    while let Some(queued) = rx.recv().await {
        let entry = match queued {
            Queued::Row(e) => e,
            Queued::Flush(done) => {
                let _ = done.send(());
                continue;
            }
        };
        match retrying(Duration::from_millis(200), || store.finish(&entry)).await {
            Ok(()) => tracing::info!(id = %entry.id, "audit outcome written after retrying"),
            Err(e) => {
                metrics::counter!("krayne_audit_dropped_total", "queue" => "rejected").increment(1);
                tracing::error!(id = %entry.id, error = %e,
                    "the database refused an audit outcome; the sweeper will resolve the row");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use sqlx::error::ErrorKind;

    use super::refuses_the_row;

    #[test]
    fn only_errors_about_the_row_itself_are_permanent() {
        for (kind, code) in [
            (ErrorKind::Other, "22021"), // NUL in text
            (ErrorKind::Other, "22P02"), // not a UUID
            (ErrorKind::Other, "54000"), // index entry too large
            (ErrorKind::UniqueViolation, "23505"),
            (ErrorKind::CheckViolation, "23514"),
            (ErrorKind::Other, "18"),   // SQLITE_TOOBIG
            (ErrorKind::Other, "3091"), // SQLITE_CONSTRAINT_DATATYPE
        ] {
            assert!(refuses_the_row(&kind, Some(code)), "{code}");
        }
        for code in [
            "08006", // connection failure
            "57P01", // the server is shutting down (pg_ctl stop -m fast)
            "57P03", // the server is starting up
            "57014", // statement timeout
            "53300", // too many connections
            "40001", // serialization failure
            "5",     // SQLITE_BUSY
            "517",   // SQLITE_BUSY_SNAPSHOT
            "6",     // SQLITE_LOCKED
            "22",    // SQLITE_NOLFS, not a SQLSTATE class
        ] {
            assert!(!refuses_the_row(&ErrorKind::Other, Some(code)), "{code}");
        }
        assert!(!refuses_the_row(&ErrorKind::Other, None));
    }
}
