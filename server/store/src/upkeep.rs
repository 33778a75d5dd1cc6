//! What a running replica does in the background with the audit database:
//! applies migrations once the database answers (when asked to), checks
//! that the schema is new enough for this binary, keeps the replica's
//! heartbeat, re-reads a rotated database URL, and resolves rows that
//! replicas which are gone left `pending`.

use std::{
    path::PathBuf,
    sync::{Arc, Mutex},
    time::Duration,
};

use tokio::time::Instant;

use crate::store::{Store, redact};

/// How the background upkeep behaves.
#[derive(Debug, Clone)]
pub struct Upkeep {
    /// Apply migrations (else only check that they were applied, by
    /// `krayne-server migrate`).
    pub migrate: bool,
    /// Rows pending for longer than this may be resolved (no request
    /// lives longer, but tunnels, which have heartbeats).
    pub sweep_after: Duration,
    /// How often the heartbeat is renewed (and the rest re-checked).
    pub every: Duration,
    /// A replica whose heartbeat is older than this is gone.
    pub stale_after: Duration,
    /// The database URL's file, re-read on every round (a rotated Secret).
    pub url_file: Option<PathBuf>,
    /// The CA the database's certificate is verified against.
    pub ca_file: Option<PathBuf>,
}

impl Default for Upkeep {
    fn default() -> Self {
        Self {
            migrate: true,
            sweep_after: Duration::from_secs(120),
            every: Duration::from_secs(10),
            stale_after: Duration::from_secs(60),
            url_file: None,
            ca_file: None,
        }
    }
}

/// What the upkeep last found wrong (for `/readyz`'s problems).
pub(crate) type Problems = Arc<Mutex<Vec<String>>>;

/// The database URL in `file` (its first line, trimmed).
///
/// # Errors
/// When the file cannot be read or holds no URL.
pub fn read_url(file: &std::path::Path) -> Result<String, String> {
    let text = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
    let url = text.lines().next().unwrap_or("").trim().to_owned();
    if url.is_empty() {
        return Err(format!("{}: no database URL in the file", file.display()));
    }
    Ok(url)
}

struct Round {
    store: Store,
    replica: String,
    options: Upkeep,
    problems: Problems,
    migrated: bool,
    url: Option<String>,
    /// Since when heartbeats have succeeded without a break.
    connected_since: Option<Instant>,
    /// Whether the first heartbeat failed: the database was away when
    /// this replica started.
    started_in_outage: Option<bool>,
    last_sweep: Option<Instant>,
}

impl Round {
    fn report(&self, problems: Vec<String>) {
        *self.problems.lock().unwrap_or_else(|p| p.into_inner()) = problems;
    }

    fn reread_url(&mut self, problems: &mut Vec<String>) {
        let Some(file) = &self.options.url_file else {
            return;
        };
        match read_url(file) {
            Ok(url) if self.url.as_deref() != Some(url.as_str()) => {
                match self.store.set_url(&url, self.options.ca_file.as_deref()) {
                    Ok(()) => {
                        if self.url.is_some() {
                            tracing::info!(database = %redact(&url), "database URL changed; new connections use it");
                        }
                        self.url = Some(url);
                    }
                    Err(e) => problems.push(format!("--database-url-file: {e}")),
                }
            }
            Ok(_) => {}
            Err(e) => problems.push(format!("--database-url-file: {e}; the last URL read is kept")),
        }
    }

    async fn run(&mut self) {
        let mut problems = Vec::new();
        self.reread_url(&mut problems);
        let mut missing = self.store.missing_migrations().await;
        // Only when something is missing: a role that may not create
        // tables (`migrate --grant-to`) cannot even run sqlx's
        // `CREATE TABLE IF NOT EXISTS` of its bookkeeping.
        if self.options.migrate && !self.migrated && missing.as_ref().is_ok_and(|m| !m.is_empty()) {
            match self.store.migrate().await {
                Ok(()) => {
                    self.migrated = true;
                    tracing::info!("audit database migrated");
                    missing = self.store.missing_migrations().await;
                }
                Err(e) => problems.push(format!("audit database: {e}")),
            }
        }
        // 1 while the schema is older than this binary needs (the alert
        // KrayneAuditSchemaBehind); unknown while the database is away.
        match missing {
            Ok(missing) if missing.is_empty() => metrics::gauge!("krayne_audit_schema_behind").set(0.0),
            Ok(missing) => {
                metrics::gauge!("krayne_audit_schema_behind").set(1.0);
                problems.push(format!(
                    "the audit database lacks migrations {missing:?} this server needs: run `krayne-server migrate`"
                ));
            }
            Err(e) => problems.push(format!("audit database: {e}")),
        }
        let beat = self.store.heartbeat(&self.replica).await;
        self.started_in_outage.get_or_insert(beat.is_err());
        match beat {
            Ok(()) => {
                self.connected_since.get_or_insert_with(Instant::now);
            }
            Err(_) => self.connected_since = None,
        }
        self.sweep().await;
        self.report(problems);
    }

    /// At start-up once the heartbeat is written (if the database answered
    /// the first one), then every `stale_after` once heartbeats have flowed
    /// that long without a break: after a database outage every heartbeat
    /// is old, and the live replicas need that long to renew theirs.
    async fn sweep(&mut self) {
        let Some(since) = self.connected_since else {
            return;
        };
        let stale = self.options.stale_after;
        let settled = since.elapsed() >= stale;
        let due = match self.last_sweep {
            None => settled || self.started_in_outage == Some(false),
            Some(at) => settled && at.elapsed() >= stale,
        };
        if !due {
            return;
        }
        let error = "the server stopped before recording the outcome; check the cluster";
        match self
            .store
            .resolve_abandoned(self.options.sweep_after, stale, error)
            .await
        {
            Ok(resolved) => {
                self.last_sweep = Some(Instant::now());
                for (id, request_id, action) in resolved {
                    tracing::warn!(%id, %request_id, %action, "resolved a pending audit row as unknown");
                }
                // Heartbeats of replicas gone for a day are of no use.
                let _ = self.store.forget("", Duration::from_secs(86_400)).await;
            }
            Err(e) => tracing::warn!(error = %e, "audit sweep failed; retrying"),
        }
    }
}

/// Starts the upkeep of `replica` over `store`; the first round runs
/// before this returns, for at most `first_within` (a database that is
/// down does not hold the server's start).
pub(crate) async fn start(
    store: Store,
    replica: String,
    options: Upkeep,
    problems: Problems,
    first_within: Duration,
    url: Option<String>,
) {
    let every = options.every;
    let mut round = Round {
        store,
        replica,
        options,
        problems,
        migrated: false,
        url,
        connected_since: None,
        started_in_outage: None,
        last_sweep: None,
    };
    let (first_done, first) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        round.run().await;
        let _ = first_done.send(());
        let mut ticks = tokio::time::interval(every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticks.tick().await;
        loop {
            ticks.tick().await;
            round.run().await;
        }
    });
    if tokio::time::timeout(first_within, first).await.is_err() {
        tracing::warn!("the audit database does not answer yet; serving, and retrying in the background");
    }
}

#[cfg(test)]
mod tests {
    use super::read_url;

    #[test]
    fn the_url_is_the_files_first_line_trimmed() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("url");
        std::fs::write(&file, "  postgres://u:p@db/krayne \n# a comment\n").unwrap();
        assert_eq!(read_url(&file).unwrap(), "postgres://u:p@db/krayne");
        std::fs::write(&file, "\n").unwrap();
        assert!(read_url(&file).unwrap_err().contains("no database URL"));
        assert!(read_url(&dir.path().join("missing")).is_err());
    }
}
