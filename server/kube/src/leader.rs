//! Leader election on a `coordination.k8s.io/v1` Lease, by
//! kube-lease-manager: candidates apply `holderIdentity` with server-side
//! apply, so two at once cannot both win; the holder renews it every few
//! seconds; a lease not renewed within its duration is taken by another.
//! Each action is fenced by a fresh read of the lease ([`Leadership::holds`]):
//! the manager's own view stays "leader" while the API server is out of
//! reach, so it is not trusted alone.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::{Api, Client};
use kube_lease_manager::{LeaseCreateMode, LeaseManagerBuilder};
use tokio::{sync::watch, task::JoinHandle};

use krayne_core::domain::{Error, Leadership};

/// This replica's candidacy for one Lease.
pub struct LeaseLeadership {
    api: Api<Lease>,
    name: String,
    identity: String,
    leader: watch::Receiver<bool>,
    task: JoinHandle<()>,
}

impl LeaseLeadership {
    /// Stands for `name` in `namespace` as `identity` (the pod's name): a
    /// lease of `duration` (at least 2 s), renewed well within it. The
    /// candidacy goes on in the background, standing again (with back-off)
    /// whenever the lease cannot be reached, so a replica serves whatever
    /// the lease's state; it leads only while it holds it.
    pub fn stand(
        client: Client,
        namespace: &str,
        name: &str,
        identity: &str,
        duration: Duration,
    ) -> Result<Self, Error> {
        let seconds = duration.as_secs();
        if seconds < 2 {
            return Err(Error::invalid("lease duration", "must be at least 2 seconds"));
        }
        let (leading, leader) = watch::channel(false);
        let candidate = Candidate {
            client: client.clone(),
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            identity: identity.to_owned(),
            seconds,
        };
        Ok(Self {
            api: Api::namespaced(client, namespace),
            name: name.to_owned(),
            identity: identity.to_owned(),
            leader,
            task: tokio::spawn(candidate.stand(leading)),
        })
    }
}

/// What standing for the lease needs.
struct Candidate {
    client: Client,
    namespace: String,
    name: String,
    identity: String,
    seconds: u64,
}

impl Candidate {
    /// Stands until dropped: builds kube-lease-manager's manager, passes
    /// on whether it leads, and stands again when it fails.
    async fn stand(self, leading: watch::Sender<bool>) {
        const FIRST_PAUSE: Duration = Duration::from_secs(1);
        let mut pause = FIRST_PAUSE;
        loop {
            // Renewed a third of the way in, so two missed renewals still hold.
            let built = LeaseManagerBuilder::new(self.client.clone(), self.name.as_str())
                .with_namespace(self.namespace.as_str())
                .with_identity(self.identity.as_str())
                .with_duration(self.seconds)
                .with_grace((self.seconds / 3).max(1))
                .with_create_mode(LeaseCreateMode::AutoCreate)
                .build()
                .await;
            match built {
                Ok(manager) => {
                    pause = FIRST_PAUSE;
                    let (mut leads, task) = manager.watch().await;
                    loop {
                        let _ = leading.send(*leads.borrow_and_update());
                        if leads.changed().await.is_err() {
                            break;
                        }
                    }
                    let _ = leading.send(false);
                    if let Ok(Err(e)) = task.await {
                        tracing::warn!(lease = %self.name, error = %e, "the leader lease's manager stopped; standing again");
                    }
                }
                Err(e) => tracing::warn!(
                    lease = %format!("{}/{}", self.namespace, self.name), error = %e, retry_in = ?pause,
                    "cannot stand for the leader lease (is `get`, `create` and `patch` on leases granted?)"
                ),
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_secs(30));
        }
    }
}

impl Drop for LeaseLeadership {
    fn drop(&mut self) {
        // The manager sees its watchers gone and gives the lease back.
        self.task.abort();
    }
}

#[async_trait::async_trait]
impl Leadership for LeaseLeadership {
    async fn leading(&self) {
        let mut leader = self.leader.clone();
        if leader.wait_for(|l| *l).await.is_err() {
            // The manager is gone: never leads again.
            std::future::pending::<()>().await;
        }
    }

    async fn holds(&self) -> bool {
        if !*self.leader.borrow() {
            return false;
        }
        let Ok(lease) = self.api.get(&self.name).await else {
            return false;
        };
        let Some(spec) = lease.spec else { return false };
        let (Some(holder), Some(renewed), Some(seconds)) =
            (spec.holder_identity, spec.renew_time, spec.lease_duration_seconds)
        else {
            return false;
        };
        let until = renewed
            .0
            .checked_add(jiff::SignedDuration::from_secs(i64::from(seconds)));
        holder == self.identity && until.is_ok_and(|until| until > jiff::Timestamp::now())
    }
}
