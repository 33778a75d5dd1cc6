//! Quota admission serialized per namespace in the audit database, so it
//! holds across every replica that shares it: a lease row per namespace
//! (`quota_admissions`), taken with one short statement and given back
//! with another. No connection is held while Kubernetes is called, so
//! twenty namespaces admitting at once use no more of the pool than
//! twenty audit writes; a holder that dies leaves a lease that expires
//! within [`LEASE`] (a live holder renews it).
//! Admissions in this process queue on a lock of its own first (one
//! poller per namespace). With SQLite (one process by design) the lock in
//! this process serves.

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use crate::{
    domain::{AdmissionGuard, AdmissionLock, Error},
    store::Store,
};

/// How long a lease lasts unless renewed: what a holder that died (killed
/// mid-admission, or mid-round of the queue admitter, which serves each
/// namespace's line under this lock every second) keeps a namespace's
/// admissions waiting at most.
const LEASE: Duration = Duration::from_secs(10);

/// How often a live holder renews its lease: well within [`LEASE`], so an
/// admission however long (a Kubernetes call near its timeout) keeps it.
const RENEW_EVERY: Duration = Duration::from_secs(3);

/// Longest an admission waits for another replica's.
const WAIT: Duration = Duration::from_secs(30);

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

    /// Takes `namespace`'s lease as `holder`, polling while another holds it.
    async fn take(&self, namespace: &str, holder: &str) -> Result<(), Error> {
        let unavailable = |why: String| {
            tracing::warn!(namespace, why, "quota admission lock unavailable");
            Error::Unavailable(format!(
                "quota admission cannot be serialized now ({why}); nothing was created"
            ))
        };
        let deadline = tokio::time::Instant::now() + WAIT;
        let mut pause = Duration::from_millis(10);
        loop {
            let taken = self
                .store
                .take_lease(namespace, holder, LEASE)
                .await
                .map_err(|e| unavailable(format!("the audit database does not answer: {e}")))?;
            if taken {
                return Ok(());
            }
            if tokio::time::Instant::now() + pause > deadline {
                return Err(unavailable(format!(
                    "another replica's admission in this namespace took over {} s",
                    WAIT.as_secs()
                )));
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(200));
        }
    }
}

/// A lease asked for: given back on drop (if that fails, it expires).
/// It exists before the lease is taken, so an admission dropped while its
/// INSERT is in flight (the client went away) still gives it back.
struct Lease {
    store: Store,
    namespace: String,
    holder: String,
    taken: bool,
    /// Renews the lease while it is held.
    renewing: Option<tokio::task::JoinHandle<()>>,
}

impl Lease {
    /// Renews the lease every [`RENEW_EVERY`] until dropped; sets `lost`
    /// once it is another's, or could not be renewed for a whole
    /// [`LEASE`] (another replica may take it then).
    fn keep_renewed(&mut self, lost: Arc<AtomicBool>) {
        let (store, namespace, holder) = (self.store.clone(), self.namespace.clone(), self.holder.clone());
        self.renewing = Some(tokio::spawn(async move {
            let mut every = tokio::time::interval(RENEW_EVERY);
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            every.tick().await;
            let mut renewed = tokio::time::Instant::now();
            loop {
                every.tick().await;
                match store.renew_lease(&namespace, &holder, LEASE).await {
                    Ok(true) => renewed = tokio::time::Instant::now(),
                    Ok(false) => {
                        tracing::warn!(
                            namespace,
                            "admission lease taken by another replica; this admission stops"
                        );
                        lost.store(true, Ordering::Release);
                        return;
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, namespace, "admission lease not renewed; it lapses unless the next renewal lands");
                        // What the database grants counts from its clock;
                        // giving up a renewal early keeps this side safe.
                        if renewed.elapsed() + RENEW_EVERY >= LEASE {
                            lost.store(true, Ordering::Release);
                            return;
                        }
                    }
                }
            }
        }));
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if let Some(renewing) = self.renewing.take() {
            renewing.abort();
        }
        let (store, namespace, holder, taken) = (
            self.store.clone(),
            std::mem::take(&mut self.namespace),
            std::mem::take(&mut self.holder),
            self.taken,
        );
        let give_back = async move {
            match store.drop_lease(&namespace, &holder).await {
                Err(e) if taken => {
                    tracing::warn!(error = %e, namespace, "admission lease not given back; it lapses within 10 s");
                }
                Err(e) => {
                    tracing::debug!(error = %e, namespace, "an admission lease that was maybe taken not given back")
                }
                Ok(()) => {}
            }
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(give_back);
            }
            Err(_) => tracing::warn!("an admission lease outlived the runtime; it expires on its own"),
        }
    }
}

#[async_trait::async_trait]
impl AdmissionLock for SqlAdmissionLock {
    async fn lock(&self, namespace: &str) -> Result<AdmissionGuard, Error> {
        let local = self.local_lock(namespace).await;
        if matches!(self.store, Store::Sqlite(_)) {
            return Ok(AdmissionGuard::new(local));
        }
        let mut lease = Lease {
            store: self.store.clone(),
            namespace: namespace.to_owned(),
            holder: uuid::Uuid::now_v7().to_string(),
            taken: false,
            renewing: None,
        };
        self.take(namespace, &lease.holder).await?;
        lease.taken = true;
        let lost = Arc::new(AtomicBool::new(false));
        lease.keep_renewed(lost.clone());
        // Dropped in order: the lease, then the local lock.
        Ok(AdmissionGuard::with_lease((lease, local), lost))
    }
}
