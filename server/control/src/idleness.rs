//! Whether a cluster is idle, for the lifecycle reaper: nothing uses it
//! through krayne on any replica (the usage ledger), its head reports no
//! resource in use (`GET /api/cluster_status`), and no job is pending or
//! running (`GET /api/jobs/`). Since when: the latest of its last use
//! through krayne, its head's `NodeIdleSeconds` and its last job's end.
//!
//! Fail safe: a cluster whose use cannot be told — not ready, no
//! dashboard, a head that does not answer (within [`HEAD_TIMEOUT`]) or
//! answers something unexpected, a ledger that cannot be read — is not
//! idle.

use std::{collections::HashMap, time::Duration};

use jiff::{SignedDuration, Timestamp};

use super::{Context, ControlPlane};
use crate::domain::{ClusterRef, Error, HeadUse, JobStatus, ObservedCluster, RayJobs};

/// Longest the reaper waits for one head's answers, all of them.
pub(crate) const HEAD_TIMEOUT: Duration = Duration::from_secs(5);
/// Heads asked at once. A head that hangs holds a connection and no
/// memory (the budget is taken as answers arrive, and the reaper's reads
/// wait for their half of it), so many can be asked at once.
pub(crate) const HEAD_CONCURRENCY: usize = 64;

/// What asking about one cluster's use told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Asked {
    /// Idle since then, or `None`: in use, or it cannot be told.
    Told(Option<Timestamp>),
    /// Its head did not answer within [`HEAD_TIMEOUT`]: asked less often.
    Slow,
}

/// Each cluster's last use through krayne, as every replica recorded it.
pub(crate) type LastUses = HashMap<(String, String), Timestamp>;

impl ControlPlane {
    /// Every replica's last uses of clusters; `None` when they cannot be
    /// read (then no cluster is idle).
    pub(crate) async fn last_uses(&self) -> Option<LastUses> {
        let (ledger, _) = self.activity_ledger.as_ref()?;
        match ledger.last_uses().await {
            Ok(uses) => Some(uses.into_iter().map(|u| ((u.namespace, u.name), u.at)).collect()),
            Err(e) => {
                tracing::warn!(error = %e, "lifecycle: uses of clusters cannot be read; no cluster is idle this pass");
                None
            }
        }
    }

    /// Since when nothing has used `cluster`, its head's answers waited
    /// for [`HEAD_TIMEOUT`] at most, all together.
    pub(crate) async fn idle_since(
        &self,
        cx: &Context,
        cluster: &ObservedCluster,
        uses: &LastUses,
        now: Timestamp,
    ) -> Asked {
        tokio::time::timeout(HEAD_TIMEOUT, self.idle_since_unbounded(cx, cluster, uses, now))
            .await
            .unwrap_or(Asked::Slow)
    }

    /// Since when nothing has used `cluster`; `None` while something does,
    /// or when that cannot be told.
    async fn idle_since_unbounded(
        &self,
        cx: &Context,
        cluster: &ObservedCluster,
        uses: &LastUses,
        now: Timestamp,
    ) -> Asked {
        let (namespace, name) = (cluster.metadata.namespace.as_str(), cluster.metadata.name.as_str());
        let Some((_, every)) = self.activity_ledger.as_ref() else {
            return Asked::Told(None);
        };
        let last_use = uses.get(&(namespace.to_owned(), name.to_owned())).copied();
        // A use open now is recorded at least every `every`.
        let Ok(in_use_window) = SignedDuration::try_from(*every * 2 + Duration::from_secs(1)) else {
            return Asked::Told(None);
        };
        if last_use.is_some_and(|at| now.duration_since(at) < in_use_window) {
            return Asked::Told(None);
        }
        let asked = async {
            let head = self.ray_head(cx, &ClusterRef::new(namespace, name)).await?;
            let ray = self.ray()?;
            let idle_for = match ask_head(ray.cluster_use(&head), "its cluster status").await? {
                HeadUse::IdleFor(seconds) => seconds,
                HeadUse::InUse => return Ok(None),
                HeadUse::Unknown => {
                    return Err(Error::Unavailable(
                        "its cluster status says nothing of idle time".into(),
                    ));
                }
            };
            let jobs: RayJobs = ask_head(ray.jobs(&head), "its jobs").await?;
            if jobs.truncated {
                return Err(Error::BadGateway("it lists more jobs than krayne reads".into()));
            }
            let mut last_end = None;
            for job in jobs.jobs {
                if matches!(job.status, JobStatus::Pending | JobStatus::Running) {
                    return Ok(None);
                }
                let ended = job.end_time.and_then(|t| t.parse::<Timestamp>().ok());
                last_end = last_end.max(ended);
            }
            let head_idle = now.checked_sub(SignedDuration::from_secs(i64::try_from(idle_for).unwrap_or(i64::MAX)));
            Ok::<_, Error>([head_idle.ok(), last_end, last_use].into_iter().flatten().max())
        };
        match asked.await {
            Ok(since) => Asked::Told(since.map(whole_seconds)),
            Err(Error::DeadlineExceeded(_)) => Asked::Slow,
            Err(e) => {
                tracing::debug!(%namespace, cluster = %name, error = %e, "lifecycle: its use cannot be told; not idle");
                Asked::Told(None)
            }
        }
    }
}

/// One question to a head, within [`HEAD_TIMEOUT`] (the caller's bound
/// is on both), counted by how it went.
async fn ask_head<T>(asked: impl Future<Output = Result<T, Error>>, what: &str) -> Result<T, Error> {
    // The caller's bound started first, so it may cut the question just
    // before this one's: a question cut unanswered counts as timed out.
    let mut unanswered = Unanswered(true);
    let (outcome, result) = match tokio::time::timeout(HEAD_TIMEOUT, asked).await {
        Err(_) => (
            "timeout",
            Err(Error::DeadlineExceeded(format!(
                "the head did not answer with {what} within {} s",
                HEAD_TIMEOUT.as_secs()
            ))),
        ),
        Ok(Ok(answer)) => ("answered", Ok(answer)),
        Ok(Err(e)) => (head_failure(&e), Err(e)),
    };
    unanswered.0 = false;
    count_head_request(outcome);
    result
}

/// A question to a head in flight: dropped before its answer (the
/// caller's bound cut it), it is counted `timeout`.
struct Unanswered(bool);

impl Drop for Unanswered {
    fn drop(&mut self) {
        if self.0 {
            count_head_request("timeout");
        }
    }
}

/// One question to a head, counted by how it went.
fn count_head_request(outcome: &'static str) {
    metrics::counter!("krayne_lifecycle_head_requests_total", "outcome" => outcome).increment(1);
}

/// How a head's failure is counted: `invalid` when it answered what Ray
/// would not, `unreachable` when it could not be reached or answered with
/// a server error, `refused` when it answered with an error of Ray's API.
fn head_failure(e: &Error) -> &'static str {
    match e {
        Error::BadGateway(_) => "invalid",
        Error::DeadlineExceeded(_) => "timeout",
        Error::Unavailable(_) | Error::RateLimited { .. } => "unreachable",
        _ => "refused",
    }
}

/// `t` to the second below: annotations and plans read in whole seconds.
fn whole_seconds(t: Timestamp) -> Timestamp {
    Timestamp::from_second(t.as_second()).unwrap_or(t)
}
