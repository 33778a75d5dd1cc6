//! Audit sinks. For now the structured log (`target: "krayne::audit"`);
//! the SQL stores come with the audit issue and implement the same port.

use crate::domain::{AuditSink, Error, audit::AuditEntry};

/// Writes every audit row as one structured log line. It cannot fail, so it
/// never blocks a mutation: use it only where no durable trail is required.
#[derive(Debug, Clone, Default)]
pub struct LogAuditSink;

impl LogAuditSink {
    fn emit(entry: &AuditEntry) {
        tracing::info!(
            target: "krayne::audit",
            id = %entry.id,
            request_id = %entry.meta.request_id,
            transport = entry.meta.transport.as_str(),
            source_ip = entry.meta.source_ip.as_deref().unwrap_or(""),
            subject = %entry.subject,
            teams = ?entry.teams,
            action = %entry.action,
            namespace = entry.namespace.as_deref().unwrap_or(""),
            cluster = entry.cluster.as_deref().unwrap_or(""),
            outcome = entry.outcome.as_str(),
            error_code = entry.error_code.unwrap_or(""),
            duration_ms = entry.duration_ms.unwrap_or(0),
            summary = %entry.summary,
            "audit"
        );
    }
}

#[async_trait::async_trait]
impl AuditSink for LogAuditSink {
    async fn begin(&self, entry: &AuditEntry) -> Result<(), Error> {
        Self::emit(entry);
        Ok(())
    }

    async fn finish(&self, entry: &AuditEntry) {
        Self::emit(entry);
    }

    async fn record(&self, entry: &AuditEntry) {
        Self::emit(entry);
    }

    async fn ping(&self) -> Result<(), Error> {
        Ok(())
    }
}
