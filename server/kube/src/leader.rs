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
    task: JoinHandle<Result<kube_lease_manager::LeaseManager, kube_lease_manager::LeaseManagerError>>,
}

impl LeaseLeadership {
    /// Stands for `name` in `namespace` as `identity` (the pod's name):
    /// a lease of `duration` (at least 2 s), renewed well within it.
    pub async fn start(
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
        // Renewed a third of the way in, so two missed renewals still hold.
        let grace = (seconds / 3).max(1);
        let manager = LeaseManagerBuilder::new(client.clone(), name)
            .with_namespace(namespace)
            .with_identity(identity)
            .with_duration(seconds)
            .with_grace(grace)
            .with_create_mode(LeaseCreateMode::AutoCreate)
            .build()
            .await
            .map_err(|e| Error::Unavailable(format!("the leader lease {namespace}/{name}: {e}")))?;
        let (leader, task) = manager.watch().await;
        Ok(Self {
            api: Api::namespaced(client, namespace),
            name: name.to_owned(),
            identity: identity.to_owned(),
            leader,
            task,
        })
    }
}

impl Drop for LeaseLeadership {
    fn drop(&mut self) {
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
