//! Leader election on a `coordination.k8s.io/v1` Lease, judged as
//! client-go's leader election judges it: by **observed** time. A holder's
//! `renewTime` is another machine's clock, so it is never compared with
//! this one's; a record is expired once it has not changed for the lease's
//! duration as this replica saw it (a monotonic clock). Writes are
//! `update`s carrying the `resourceVersion` read, so of two candidates one
//! wins and the other gets a conflict.
//!
//! The API server's clock is the one all replicas share: each round reads
//! its `Date` beside the Lease, and a replica whose own clock strays from
//! it by more than the allowed skew refuses to lead (giving the lease back
//! if it holds it), says so in the log and in `krayne_clock_skew_seconds`.
//! While it leads, [`Leadership::now`] is the API server's time.
//!
//! Hand-written rather than kube-lease-manager's: that crate expires a
//! lease by comparing its `renewTime` with the local clock, so a replica a
//! minute ahead takes a live leader's lease at once.

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::{
    api::coordination::v1::{Lease, LeaseSpec},
    apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta},
};
use kube::{
    Api, Client,
    api::{GetParams, PostParams},
};
use tokio::{sync::watch, task::JoinHandle};

use krayne_core::domain::{Error, Leadership};

/// How this replica stands for the lease.
#[derive(Debug, Clone, Copy)]
pub struct LeaseTerms {
    /// How long the lease holds without renewal (at least 2 s).
    pub duration: Duration,
    /// The most this replica's clock may differ from the API server's
    /// while it leads (at least 2 s: the API server's `Date` is whole
    /// seconds).
    pub max_skew: Duration,
}

/// This replica's candidacy for one Lease.
pub struct LeaseLeadership {
    api: Api<Lease>,
    name: String,
    identity: String,
    terms: LeaseTerms,
    state: Arc<State>,
    task: JoinHandle<()>,
}

/// What the candidacy knows, shared with the fence.
struct State {
    leading: watch::Sender<bool>,
    /// When this replica's last renewal was sent (monotonic).
    renewed: Mutex<Option<Instant>>,
    /// This replica's clock minus the API server's, last measured.
    skew: Mutex<Option<SignedDuration>>,
    /// The skew is within the allowed one.
    clock_trusted: AtomicBool,
}

impl LeaseLeadership {
    /// Stands for `name` in `namespace` as `identity` (the pod's name).
    /// The candidacy goes on in the background, round after round a third
    /// of the lease's duration apart, so a replica serves whatever the
    /// lease's state; it leads only while it holds it.
    pub fn stand(
        client: Client,
        namespace: &str,
        name: &str,
        identity: &str,
        terms: LeaseTerms,
    ) -> Result<Self, Error> {
        if terms.duration < Duration::from_secs(2) {
            return Err(Error::invalid("lease duration", "must be at least 2 seconds"));
        }
        if terms.max_skew < Duration::from_secs(2) {
            return Err(Error::invalid("clock skew", "must be at least 2 seconds"));
        }
        let state = Arc::new(State {
            leading: watch::channel(false).0,
            renewed: Mutex::new(None),
            skew: Mutex::new(None),
            clock_trusted: AtomicBool::new(false),
        });
        let candidate = Candidate {
            client: client.clone(),
            api: Api::namespaced(client, namespace),
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            identity: identity.to_owned(),
            terms,
            state: state.clone(),
            observed: None,
        };
        Ok(Self {
            api: Api::namespaced(candidate.client.clone(), namespace),
            name: name.to_owned(),
            identity: identity.to_owned(),
            terms,
            state,
            task: tokio::spawn(candidate.stand()),
        })
    }
}

/// A lease's record as last seen, and when it was first seen so (by this
/// replica's monotonic clock).
struct Observed {
    record: (Option<String>, Option<MicroTime>, Option<i32>),
    since: Instant,
}

/// What standing for the lease needs.
struct Candidate {
    client: Client,
    api: Api<Lease>,
    namespace: String,
    name: String,
    identity: String,
    terms: LeaseTerms,
    state: Arc<State>,
    observed: Option<Observed>,
}

impl Candidate {
    /// Rounds until dropped.
    async fn stand(mut self) {
        let every = (self.terms.duration / 3).max(Duration::from_secs(1));
        loop {
            let leads = match self.round().await {
                Ok(leads) => leads,
                Err(e) => {
                    tracing::warn!(lease = %format!("{}/{}", self.namespace, self.name), error = %e,
                        "cannot stand for the leader lease (is `get`, `create` and `update` on leases granted?)");
                    false
                }
            };
            self.state
                .leading
                .send_if_modified(|l| std::mem::replace(l, leads) != leads);
            metrics::gauge!("krayne_lifecycle_leader").set(f64::from(u8::from(leads)));
            tokio::time::sleep(every).await;
        }
    }

    /// One round: reads the lease and the API server's time; takes or
    /// renews the lease when it may. Whether this replica leads now.
    async fn round(&mut self) -> Result<bool, String> {
        let sent = Instant::now();
        let (lease, shared_now) = self.read().await?;
        let trusted = self.state.clock_trusted.load(Ordering::Acquire);
        let Some(mut lease) = lease else {
            if !trusted {
                return Ok(false);
            }
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.name.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(self.spec(None, shared_now)),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(self.renewed(sent)),
                Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
                Err(e) => Err(e.to_string()),
            };
        };
        let spec = lease.spec.clone().unwrap_or_default();
        let record = (
            spec.holder_identity.clone().filter(|h| !h.is_empty()),
            spec.renew_time.clone(),
            spec.lease_transitions,
        );
        if self.observed.as_ref().is_none_or(|o| o.record != record) {
            self.observed = Some(Observed {
                record: record.clone(),
                since: Instant::now(),
            });
        }
        let mine = record.0.as_deref() == Some(self.identity.as_str());
        if !trusted {
            if mine {
                // Given back at once, so a replica whose clock is right
                // takes over without waiting for the lease to run out.
                give_back(&self.api, lease).await?;
                tracing::warn!(lease = %self.name, "gave the leader lease back: this replica's clock is not the API server's");
            }
            return Ok(false);
        }
        let held_for = Duration::from_secs(u64::try_from(spec.lease_duration_seconds.unwrap_or(0)).unwrap_or(0))
            .max(Duration::from_secs(1));
        let expired = record.0.is_none() || self.observed.as_ref().is_some_and(|o| o.since.elapsed() >= held_for);
        if !mine && !expired {
            return Ok(false);
        }
        lease.spec = Some(self.spec(Some(&spec), shared_now));
        match self.api.replace(&self.name, &PostParams::default(), &lease).await {
            Ok(_) => {
                if !mine {
                    tracing::info!(lease = %self.name, identity = %self.identity, "took the leader lease");
                }
                Ok(self.renewed(sent))
            }
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
            Err(e) => Err(e.to_string()),
        }
    }

    /// The lease as this replica holds it, renewed at `now` (the API
    /// server's time), after `before` (the record it replaces).
    fn spec(&self, before: Option<&LeaseSpec>, now: Timestamp) -> LeaseSpec {
        let seconds = i32::try_from(self.terms.duration.as_secs()).unwrap_or(i32::MAX);
        let mine = before.is_some_and(|b| b.holder_identity.as_deref() == Some(self.identity.as_str()));
        let transitions = before.and_then(|b| b.lease_transitions).unwrap_or(0);
        LeaseSpec {
            holder_identity: Some(self.identity.clone()),
            lease_duration_seconds: Some(seconds),
            acquire_time: match before {
                Some(b) if mine => b.acquire_time.clone(),
                _ => Some(MicroTime(now)),
            },
            renew_time: Some(MicroTime(now)),
            lease_transitions: Some(if mine || before.is_none() {
                transitions
            } else {
                transitions.saturating_add(1)
            }),
            ..LeaseSpec::default()
        }
    }

    fn renewed(&self, sent: Instant) -> bool {
        *lock(&self.state.renewed) = Some(sent);
        true
    }

    /// The lease (`None`: there is none) and the API server's time, from
    /// its `Date`; the skew between this replica's clock and it measured
    /// and judged on the way.
    async fn read(&self) -> Result<(Option<Lease>, Timestamp), String> {
        let request = kube::core::Request::new(format!(
            "/apis/coordination.k8s.io/v1/namespaces/{}/leases",
            self.namespace
        ))
        .get(&self.name, &GetParams::default())
        .map_err(|e| e.to_string())?;
        let before = Timestamp::now();
        let response = self
            .client
            .send(request.map(kube::client::Body::from))
            .await
            .map_err(|e| e.to_string())?;
        let after = Timestamp::now();
        let date = response
            .headers()
            .get(http::header::DATE)
            .and_then(|d| d.to_str().ok())
            .and_then(|d| jiff::fmt::rfc2822::DateTimeParser::new().parse_timestamp(d).ok())
            .ok_or("the API server's answer has no Date")?;
        let shared_now = self.judge_clock(before, after, date);
        let status = response.status();
        let body = response.into_body().collect_bytes().await.map_err(|e| e.to_string())?;
        match status.as_u16() {
            200 => serde_json::from_slice(&body)
                .map(|l| (Some(l), shared_now))
                .map_err(|e| format!("not a Lease: {e}")),
            404 => Ok((None, shared_now)),
            code => Err(format!(
                "the API server answered {code}: {}",
                String::from_utf8_lossy(&body[..body.len().min(512)])
            )),
        }
    }

    /// Measures this replica's clock against the API server's `date`
    /// (whole seconds, so its middle is taken) seen between `before` and
    /// `after`; records the verdict. The API server's time now.
    fn judge_clock(&self, before: Timestamp, after: Timestamp, date: Timestamp) -> Timestamp {
        let local = before.checked_add(after.duration_since(before) / 2).unwrap_or(before);
        let server = date.checked_add(SignedDuration::from_millis(500)).unwrap_or(date);
        let skew = local.duration_since(server);
        *lock(&self.state.skew) = Some(skew);
        metrics::gauge!("krayne_clock_skew_seconds").set(skew.as_secs_f64());
        let trusted = skew.unsigned_abs() <= self.terms.max_skew;
        let was = self.state.clock_trusted.swap(trusted, Ordering::AcqRel);
        metrics::gauge!("krayne_lifecycle_clock_trusted").set(f64::from(u8::from(trusted)));
        if was != trusted {
            if trusted {
                tracing::info!(skew = %format!("{:.1}s", skew.as_secs_f64()), "this replica's clock agrees with the API server's: it may lead");
            } else {
                tracing::warn!(skew = %format!("{:.1}s", skew.as_secs_f64()), allowed = ?self.terms.max_skew,
                    "this replica's clock differs from the API server's: it refuses to lead the lifecycle reaper (fix its clock: NTP)");
            }
        }
        shared(skew)
    }
}

/// This replica's time corrected by `skew`: the API server's.
fn shared(skew: SignedDuration) -> Timestamp {
    let now = Timestamp::now();
    now.checked_sub(skew).unwrap_or(now)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Gives `lease` (held by this replica, as read) back: no holder, so the
/// next candidate takes it at its next round.
async fn give_back(api: &Api<Lease>, mut lease: Lease) -> Result<(), String> {
    let name = lease.metadata.name.clone().unwrap_or_default();
    let spec = lease.spec.take().unwrap_or_default();
    lease.spec = Some(LeaseSpec {
        holder_identity: None,
        lease_duration_seconds: Some(1),
        ..spec
    });
    api.replace(&name, &PostParams::default(), &lease)
        .await
        .map(drop)
        .map_err(|e| e.to_string())
}

impl Drop for LeaseLeadership {
    /// Stops standing and, when leading, gives the lease back (best
    /// effort: a replica killed outright leaves it to lapse).
    fn drop(&mut self) {
        self.task.abort();
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        if !*self.state.leading.borrow() {
            return;
        }
        let (api, name, identity) = (self.api.clone(), self.name.clone(), self.identity.clone());
        runtime.spawn(async move {
            if let Ok(lease) = api.get(&name).await
                && lease.spec.as_ref().and_then(|s| s.holder_identity.as_deref()) == Some(identity.as_str())
                && let Err(e) = give_back(&api, lease).await
            {
                tracing::debug!(lease = %name, error = %e, "the leader lease not given back; it lapses");
            }
        });
    }
}

#[async_trait::async_trait]
impl Leadership for LeaseLeadership {
    async fn leading(&self) {
        let mut leading = self.state.leading.subscribe();
        if leading.wait_for(|l| *l).await.is_err() {
            std::future::pending::<()>().await;
        }
    }

    async fn holds(&self) -> bool {
        if !*self.state.leading.borrow() || !self.state.clock_trusted.load(Ordering::Acquire) {
            return false;
        }
        let renewed_lately = lock(&self.state.renewed).is_some_and(|at| at.elapsed() < self.terms.duration);
        let Ok(lease) = self.api.get(&self.name).await else {
            return false;
        };
        let holder = lease.spec.and_then(|s| s.holder_identity);
        renewed_lately && holder.as_deref() == Some(self.identity.as_str())
    }

    fn now(&self) -> Timestamp {
        shared(lock(&self.state.skew).unwrap_or(SignedDuration::ZERO))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_api_servers_date_parses() {
        let date = jiff::fmt::rfc2822::DateTimeParser::new()
            .parse_timestamp("Fri, 27 Nov 2026 10:10:53 GMT")
            .unwrap();
        assert_eq!(date.to_string(), "2026-11-27T10:10:53Z");
    }
}
