//! The SQL audit sink: mutations write their row before they act (fail
//! closed); outcomes that cannot be written are retried from a bounded
//! queue; other rows are batched; rows a crash left `pending` are resolved
//! by a sweeper at start-up.

use std::{sync::Arc, time::Duration};

use tokio::sync::mpsc;

use super::store::Store;
use crate::domain::{
    AuditSink, Error,
    audit::{AuditEntry, AuditFilter, Outcome},
};

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

/// The audit log in Postgres or SQLite.
pub struct SqlAuditSink {
    store: Store,
    batch: mpsc::Sender<AuditEntry>,
    retry: mpsc::Sender<AuditEntry>,
}

fn unavailable(e: &sqlx::Error) -> Error {
    tracing::warn!(error = %e, "audit database error");
    Error::Unavailable("the audit log cannot be written".into())
}

impl SqlAuditSink {
    /// A sink over `store`, with its background writers started.
    pub fn start(store: Store, q: &QueueOptions) -> Arc<Self> {
        let (batch, batch_rx) = mpsc::channel(q.batch_queue.max(1));
        let (retry, retry_rx) = mpsc::channel(q.retry_queue.max(1));
        tokio::spawn(write_batches(
            store.clone(),
            batch_rx,
            q.batch_size.max(1),
            q.batch_delay,
        ));
        tokio::spawn(retry_outcomes(store.clone(), retry_rx));
        Arc::new(Self { store, batch, retry })
    }

    /// Resolves rows left `pending` by a crash before `cutoff`: their
    /// mutation may or may not have reached Kubernetes, so they become
    /// `unknown`, saying so. Returns how many.
    pub async fn sweep(&self, cutoff: &str) -> Result<usize, String> {
        let stuck = self.store.pending_before(cutoff).await.map_err(|e| e.to_string())?;
        for mut e in stuck.iter().cloned() {
            e.outcome = Outcome::Unknown;
            e.completed_at = Some(jiff::Timestamp::now().to_string());
            e.error = Some("the server stopped before recording the outcome; check the cluster".into());
            self.store.finish(&e).await.map_err(|err| err.to_string())?;
            tracing::warn!(id = %e.id, request_id = %e.meta.request_id, action = %e.action, "resolved a pending audit row as unknown");
        }
        Ok(stuck.len())
    }
}

#[async_trait::async_trait]
impl AuditSink for SqlAuditSink {
    async fn begin(&self, entry: &AuditEntry) -> Result<(), Error> {
        let started = std::time::Instant::now();
        let written = self.store.insert(std::slice::from_ref(entry)).await;
        metrics::histogram!("krayne_audit_insert_seconds").record(started.elapsed().as_secs_f64());
        written.map_err(|e| unavailable(&e))
    }

    async fn finish(&self, entry: &AuditEntry) {
        match self.store.finish(entry).await {
            Ok(()) => {}
            Err(e) => {
                tracing::warn!(id = %entry.id, error = %e, "audit outcome not written; queued for retry");
                if self.retry.try_send(entry.clone()).is_err() {
                    metrics::counter!("krayne_audit_dropped_total", "queue" => "retry").increment(1);
                    tracing::error!(id = %entry.id, "audit retry queue full; the sweeper will resolve this row");
                }
            }
        }
    }

    async fn record(&self, entry: &AuditEntry) {
        if self.batch.try_send(entry.clone()).is_err() {
            metrics::counter!("krayne_audit_dropped_total", "queue" => "batch").increment(1);
        }
    }

    async fn ping(&self) -> Result<(), Error> {
        self.store.ping().await.map_err(|e| unavailable(&e))
    }

    async fn query(&self, filter: &AuditFilter, limit: usize, before: Option<&str>) -> Result<Vec<AuditEntry>, Error> {
        self.store
            .query(filter, limit, before)
            .await
            .map_err(|e| unavailable(&e))
    }
}

/// Batches rows until `size` or `delay`, then inserts them in one
/// statement; a failed batch is retried with backoff, never dropped.
async fn write_batches(store: Store, mut rx: mpsc::Receiver<AuditEntry>, size: usize, delay: Duration) {
    while let Some(first) = rx.recv().await {
        let mut batch = vec![first];
        let deadline = tokio::time::sleep(delay);
        tokio::pin!(deadline);
        while batch.len() < size {
            tokio::select! {
                next = rx.recv() => match next {
                    Some(e) => batch.push(e),
                    None => break,
                },
                () = &mut deadline => break,
            }
        }
        let mut backoff = Duration::from_millis(100);
        loop {
            match store.insert(&batch).await {
                Ok(()) => {
                    metrics::counter!("krayne_audit_batched_rows_total").increment(batch.len() as u64);
                    break;
                }
                Err(e) => {
                    tracing::warn!(rows = batch.len(), error = %e, "audit batch not written; retrying");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(10));
                }
            }
        }
    }
}

/// Retries outcomes until they are written.
async fn retry_outcomes(store: Store, mut rx: mpsc::Receiver<AuditEntry>) {
    while let Some(entry) = rx.recv().await {
        let mut backoff = Duration::from_millis(200);
        while store.finish(&entry).await.is_err() {
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_secs(10));
        }
        tracing::info!(id = %entry.id, "audit outcome written after retrying");
    }
}
