//! Queued admission (docs/quotas.md): the admitter, the background round
//! that serves each namespace's line — the clusters that wait, suspended,
//! for quota — in the order [`crate::domain::queue`] decides.
//!
//! Race-free across replicas: a round serves a namespace holding its
//! admission lock (the one creates, resumes and scales take, shared
//! through Postgres), counts from Kubernetes' own list, not the cache, and
//! writes each admission conditional on the version it decided on. One
//! replica serves (the companion keeper's election), fenced by a fresh
//! read of its lease before it writes; a place in line is the cluster's
//! own annotation, so a new leader finds the line as it was.

use std::{
    collections::{BTreeSet, HashMap},
    sync::Arc,
};

use jiff::Timestamp;
use serde_json::json;

use super::{Context, ControlPlane, quotas::Standing, rayjobs::charge_of_rayjob};
use crate::{
    authz::krayne_acts_on_object,
    domain::{
        AdmissionGuard, AdmissionHold, Authorized, ClusterPatch, ClusterRef, Error, Leadership, ObjectMeta,
        ObservedCluster, ObservedRayJob, Preconditions, RequestId,
        audit::AuditAction,
        kueue,
        queue::{self, LineDecision, OnMaxWait, QueuePolicy, Waiting},
        quota,
    },
    manifest::{
        ANNOTATION_ADMITTED_AT, ANNOTATION_QUEUE_POSITION, ANNOTATION_QUEUE_REASON, ANNOTATION_QUEUE_STATE,
        ANNOTATION_QUEUED_SINCE, Place, admit_patch, annotations_patch_of, leave_line_patch, lifecycle_event,
        place_patch, rayjob_event,
    },
};

/// The subject the admitter's audit rows name.
pub const QUEUE_SUBJECT: &str = "system:krayne-queue";

/// What an admission found for a request.
pub(super) enum Admission<T> {
    /// The namespace has no quota: nothing was counted.
    Unlimited,
    /// It fits: keep the guard until the write has landed.
    Fits(AdmissionGuard, T),
    /// It waits in line, at this place: keep the guard until it is there.
    Waits(AdmissionGuard, T, LinePlace),
}

impl<T> Admission<T> {
    /// What to check before the write: the held admission (none without
    /// a quota).
    pub(super) fn hold(&self) -> AdmissionHold {
        match self {
            Self::Fits(guard, _) | Self::Waits(guard, _, _) => guard.hold(),
            Self::Unlimited => AdmissionHold::default(),
        }
    }

    /// Its place in line, when it waits.
    pub(super) fn place(&self) -> Option<&LinePlace> {
        match self {
            Self::Waits(_, _, place) => Some(place),
            Self::Unlimited | Self::Fits(..) => None,
        }
    }
}

/// A place in a namespace's line.
#[derive(Debug, Clone)]
pub(super) struct LinePlace {
    /// When it joined.
    pub(super) since: Timestamp,
    /// Its place (1-based).
    pub(super) position: u32,
    /// Why it waits.
    pub(super) reason: String,
}

impl LinePlace {
    /// `what` (a cluster's or a RayJob's manifest) made to wait at this
    /// place by `queued`.
    pub(super) fn put<M>(&self, what: M, queued: impl FnOnce(M, Place<'_>) -> M) -> M {
        let since = self.since.to_string();
        let at = Place {
            since: &since,
            position: self.position,
            reason: &self.reason,
        };
        queued(what, at)
    }

    /// The summary an audit row keeps of it.
    pub(super) fn summary(&self) -> serde_json::Value {
        json!({"queued": true, "queue_position": self.position, "queued_since": self.since.to_string(),
               "queue_reason": self.reason})
    }
}

/// The clusters of `clusters` and the RayJobs of `rayjobs` waiting in
/// line, in its order; `except` (the one asking, by its name in line) left
/// out.
pub(super) fn line_of(clusters: &[Arc<ObservedCluster>], rayjobs: &[ObservedRayJob], except: &str) -> Vec<Waiting> {
    let jobs = rayjobs
        .iter()
        .filter(|j| j.metadata.deletion_timestamp.is_none() && j.kueue_queue().is_none())
        // One KubeRay refused waits for nothing: it would block the line.
        .filter(|j| !j.state().is_over())
        .filter_map(|j| {
            Some(Waiting {
                name: queue::rayjob_in_line(j.metadata.name.as_str()),
                since: j.queued_since()?,
                request: quota::Request::new_cluster(charge_of_rayjob(j)).at(Some(j.site.clone())),
            })
        })
        .filter(|w| w.name != except);
    let mut line: Vec<Waiting> = clusters
        .iter()
        .filter(|c| c.metadata.deletion_timestamp.is_none() && c.metadata.name.as_str() != except)
        .filter(|c| c.kueue_queue().is_none())
        .filter_map(|c| {
            Some(Waiting {
                name: c.metadata.name.to_string(),
                since: c.queued_since()?,
                request: quota::Request::admit(c),
            })
        })
        .chain(jobs)
        .collect();
    queue::order_line(&mut line);
    line
}

impl ControlPlane {
    /// The Kueue LocalQueue the team mapping gives `namespace`: its
    /// clusters are Kueue's to admit (docs/kueue.md).
    pub(super) fn kueue_queue(&self, namespace: &str) -> Option<String> {
        self.authenticator.as_ref()?.kueue_queue(namespace)
    }

    /// The queueing policy of `namespace` (the default without a mapping).
    pub(super) fn queue_policy(&self, namespace: &str) -> QueuePolicy {
        self.authenticator
            .as_ref()
            .map(|a| a.queueing(namespace))
            .unwrap_or_default()
    }

    /// One round of the admitter: every namespace with a line, served.
    /// Logged, never failing; a namespace that fails waits for the next.
    pub(crate) async fn serve_lines(&self, leadership: Option<&dyn Leadership>) {
        let cx = queue_context();
        let clusters = match self.store.feed() {
            Some(feed) if feed.ready() => feed.clusters(None),
            Some(_) => return,
            None => match self.store.list(None, &cx.meta.request_id).await {
                Ok(clusters) => clusters,
                Err(e) => {
                    tracing::warn!(error = %e, "the admitter could not list clusters; trying again next round");
                    return;
                }
            },
        };
        let waiting_jobs = match (self.store.feed(), &self.rayjobs) {
            (Some(feed), _) => feed.rayjobs(None),
            (None, Some(store)) => store
                .list_rayjobs(None, &cx.meta.request_id)
                .await
                .map(|jobs| jobs.into_iter().map(Arc::new).collect())
                .unwrap_or_default(),
            (None, None) => Vec::new(),
        };
        let namespaces: BTreeSet<String> = clusters
            .iter()
            .filter(|c| c.queued_since().is_some() && c.kueue_queue().is_none())
            .map(|c| c.metadata.namespace.to_string())
            .chain(
                waiting_jobs
                    .iter()
                    .filter(|j| j.queued_since().is_some() && j.kueue_queue().is_none())
                    .map(|j| j.metadata.namespace.to_string()),
            )
            .collect();
        for namespace in namespaces {
            if let Err(e) = self.serve_line(&cx, &namespace, leadership).await {
                tracing::warn!(%namespace, error = %e, "the admitter could not serve a line; trying again next round");
            }
        }
        // Kueue's lines: those with a cluster or RayJob that waits, or did
        // (a RayJob's cluster is not Kueue's workload: its RayJob is).
        let in_kueue: Vec<InLine<'_>> = clusters
            .iter()
            .filter(|c| c.kueue_queue().is_some() && c.metadata.rayjob().is_none())
            .map(|c| InLine::Cluster(c))
            .chain(
                waiting_jobs
                    .iter()
                    .filter(|j| j.kueue_queue().is_some())
                    .map(|j| InLine::RayJob(j)),
            )
            .collect();
        let kueue: BTreeSet<String> = in_kueue
            .iter()
            .filter(|w| w.meta().deletion_timestamp.is_none())
            .filter(|w| w.suspended() || w.meta().annotations.get(ANNOTATION_QUEUED_SINCE).is_some())
            .map(|w| w.meta().namespace.to_string())
            .collect();
        for namespace in kueue {
            let of_namespace: Vec<InLine<'_>> = in_kueue
                .iter()
                .filter(|w| w.meta().namespace.as_str() == namespace)
                .copied()
                .collect();
            if let Err(e) = self.mirror_kueue(&cx, &namespace, &of_namespace, leadership).await {
                tracing::warn!(%namespace, error = %e, "Kueue's Workloads could not be read; trying again next round");
            }
        }
    }

    /// Shows what Kueue says of `namespace`'s clusters and RayJobs as
    /// krayne's own line does (docs/kueue.md): on each that waits, when it started, its
    /// place in its LocalQueue (when the visibility API answers), Kueue's
    /// reason, and whether Kueue took it back (`preempted`, `evicted`); on
    /// each admitted, nothing but when (its lifetime counts from then).
    async fn mirror_kueue(
        &self,
        cx: &Context,
        namespace: &str,
        clusters: &[InLine<'_>],
        leadership: Option<&dyn Leadership>,
    ) -> Result<(), Error> {
        let Some(kueue) = &self.kueue else {
            return Ok(());
        };
        let rid = &cx.meta.request_id;
        let uid_of = |c: &InLine<'_>| c.meta().uid.as_ref().map(ToString::to_string).unwrap_or_default();
        // Only the Workloads of these (Kueue labels each with its job's
        // uid), a bounded selector at a time.
        let uids: Vec<String> = clusters.iter().map(uid_of).filter(|u| !u.is_empty()).collect();
        let mut workloads = Vec::new();
        for chunk in uids.chunks(kueue::UIDS_PER_READ) {
            workloads.extend(kueue.workloads(namespace, chunk, rid).await?);
        }
        let mut positions: HashMap<String, u32> = HashMap::new();
        let mut unanswered: BTreeSet<&str> = BTreeSet::new();
        let queues: BTreeSet<&str> = clusters.iter().filter_map(|c| c.kueue_queue()).collect();
        for queue in queues {
            match kueue.pending(namespace, queue, rid).await {
                Ok(pending) => positions.extend(pending.into_iter().map(|p| (p.owner_uid, p.position_in_local_queue))),
                Err(e) => {
                    tracing::debug!(%namespace, queue, error = %e, "Kueue's visibility API did not answer; places kept as they were");
                    unanswered.insert(queue);
                }
            }
        }
        if let Some(leadership) = leadership
            && !leadership.holds().await
        {
            return Ok(());
        }
        let now = leadership.map_or_else(Timestamp::now, |l| l.now()).to_string();
        for &cluster in clusters {
            let uid = uid_of(&cluster);
            let workload = workloads.iter().find(|w| w.owner_uid.as_deref() == Some(uid.as_str()));
            let suspended = cluster.suspended();
            // Kueue admits the Workload before it un-suspends the cluster:
            // until then, what is on the cluster stays.
            if suspended && workload.is_some_and(|w| w.admitted && w.evicted.is_none()) {
                continue;
            }
            let annotation = |key: &str| cluster.meta().annotations.get(key).map(|a| a.to_string());
            let created = cluster.meta().creation_timestamp.as_deref().unwrap_or_default();
            let position = match cluster.kueue_queue() {
                Some(queue) if unanswered.contains(queue) => annotation(ANNOTATION_QUEUE_POSITION)
                    .and_then(|p| p.parse::<u32>().ok())
                    .map(|p| p.saturating_sub(1)),
                _ => positions.get(&uid).copied(),
            };
            let place = if suspended {
                kueue::place(workload, created, position)
            } else {
                None
            };
            let was_waiting = annotation(ANNOTATION_QUEUED_SINCE).is_some();
            let wanted: [(&str, Option<String>); 5] = match place {
                Some(p) => [
                    (ANNOTATION_QUEUED_SINCE, Some(p.since)),
                    (ANNOTATION_QUEUE_POSITION, p.position.map(|n| n.to_string())),
                    (ANNOTATION_QUEUE_REASON, Some(p.reason)),
                    (ANNOTATION_QUEUE_STATE, p.state.map(str::to_owned)),
                    (ANNOTATION_ADMITTED_AT, annotation(ANNOTATION_ADMITTED_AT)),
                ],
                None => [
                    (ANNOTATION_QUEUED_SINCE, None),
                    (ANNOTATION_QUEUE_POSITION, None),
                    (ANNOTATION_QUEUE_REASON, None),
                    (ANNOTATION_QUEUE_STATE, None),
                    (
                        ANNOTATION_ADMITTED_AT,
                        if was_waiting {
                            Some(now.clone())
                        } else {
                            annotation(ANNOTATION_ADMITTED_AT)
                        },
                    ),
                ],
            };
            let wanted: Vec<(&str, Option<&str>)> = wanted.iter().map(|(k, v)| (*k, v.as_deref())).collect();
            if let Some(patch) = annotations_patch_of(cluster.meta(), &wanted) {
                // A conflict (Kueue wrote meanwhile) is tried again next round.
                if let Err(e) = self.patch_in_line(cluster, &patch, rid).await {
                    tracing::debug!(%namespace, name = %cluster.meta().name, error = %e, "Kueue's view not recorded this round");
                }
            }
        }
        Ok(())
    }

    /// Serves `namespace`'s line: admits what fits, in order; ends waits
    /// past `max_wait`; brings the others' places and reasons up to date.
    async fn serve_line(
        &self,
        cx: &Context,
        namespace: &str,
        leadership: Option<&dyn Leadership>,
    ) -> Result<(), Error> {
        let rid = &cx.meta.request_id;
        let admission = self.quota_lock.lock(namespace).await?;
        let Standing {
            clusters,
            rayjobs,
            used,
        } = self.standing_now(namespace, rid).await?;
        let mut line = line_of(&clusters, &rayjobs, "");
        // One waiting in a site that does not answer cannot be admitted
        // (the write would fail, ending the round for every site): it
        // keeps its place until its site is back, and the others go on.
        let down = self.sites_down_since();
        line.retain(|w| w.request.site.as_ref().is_none_or(|s| !down.contains_key(s)));
        if line.is_empty() {
            return Ok(());
        }
        let policy = self.queue_policy(namespace);
        let decision = queue::decide(self.quota_of(namespace).as_ref(), used, &line, policy.order);
        if let Some(leadership) = leadership
            && !leadership.holds().await
        {
            return Ok(());
        }
        let now = leadership.map_or_else(Timestamp::now, |l| l.now());
        let find = |name: &str| match queue::rayjob_of_line(name) {
            Some(job) => rayjobs
                .iter()
                .find(|j| j.metadata.name.as_str() == job)
                .map(InLine::RayJob),
            None => clusters
                .iter()
                .find(|c| c.metadata.name.as_str() == name)
                .map(|c| InLine::Cluster(c)),
        };
        for name in &decision.admit {
            if let Some(waiting) = find(name) {
                admission.held()?;
                self.admit_waiting(cx, waiting, now).await?;
            }
        }
        let expired = expired(&decision, &line, &policy, now);
        for name in &expired {
            if let Some(waiting) = find(name) {
                self.end_wait(cx, waiting, &policy, now).await?;
            }
        }
        let still = decision.waiting.iter().filter(|(name, ..)| !expired.contains(name));
        for (position, (name, _, reason)) in (1u32..).zip(still) {
            let Some(waiting) = find(name) else {
                continue;
            };
            if let Some(patch) = place_patch(waiting.meta(), position, reason) {
                self.patch_in_line(waiting, &patch, rid).await?;
            }
        }
        Ok(())
    }

    /// Writes `patch` to a cluster or RayJob in line, as the admitter.
    async fn patch_in_line(&self, waiting: InLine<'_>, patch: &ClusterPatch, rid: &RequestId) -> Result<(), Error> {
        let target = waiting.acted_on(AuditAction::QueueAdmit);
        match waiting {
            InLine::Cluster(_) => self.store.patch(&target, patch, rid).await.map(drop),
            InLine::RayJob(_) => self.rayjob_store()?.patch_rayjob(&target, patch, rid).await.map(drop),
        }
    }

    /// Admits one waiting cluster (or RayJob): resumed, audited
    /// `queue.admit`, an Event on it.
    async fn admit_waiting(&self, cx: &Context, waiting: InLine<'_>, now: Timestamp) -> Result<(), Error> {
        let meta = waiting.meta();
        let (namespace, name) = (meta.namespace.as_str(), meta.name.as_str());
        let since = waiting.queued_since();
        let waited = since.map(|since| now.duration_since(since));
        let waited_text = waited.map(|d| crate::domain::lifecycle::Span(d).to_string());
        let summary = json!({"queued_since": since.map(|t| t.to_string()), "waited": waited_text,
                             "kind": waiting.kind()});
        let patch = admit_patch(meta, &now.to_string());
        let rid = &cx.meta.request_id;
        self.audited(cx, AuditAction::QueueAdmit, namespace, name, summary, || {
            self.patch_in_line(waiting, &patch, rid)
        })
        .await?;
        metrics::counter!("krayne_queue_admissions_total").increment(1);
        tracing::info!(%namespace, name, kind = waiting.kind(), waited = ?waited_text, "queue: admitted");
        let message = match waited_text {
            Some(waited) => format!("admitted by krayne after waiting {waited} in its namespace's line"),
            None => "admitted by krayne from its namespace's line".to_owned(),
        };
        self.post_queue_event(cx, waiting, "Normal", "QueueAdmitted", &message, now)
            .await;
        Ok(())
    }

    /// Ends a wait past the policy's `max_wait`: the cluster (or RayJob)
    /// leaves the line, kept suspended or deleted as the policy says;
    /// audited `queue.expire`, an Event on it.
    async fn end_wait(
        &self,
        cx: &Context,
        waiting: InLine<'_>,
        policy: &QueuePolicy,
        now: Timestamp,
    ) -> Result<(), Error> {
        let meta = waiting.meta();
        let (namespace, name) = (meta.namespace.as_str(), meta.name.as_str());
        let max_wait = policy
            .max_wait
            .map(|d| crate::domain::lifecycle::Span(d.0).to_string())
            .unwrap_or_default();
        let rid = &cx.meta.request_id;
        let target = waiting.acted_on(AuditAction::QueueExpire);
        let again = match waiting {
            InLine::Cluster(_) => format!("`krayne resume {name} --queue` waits again"),
            InLine::RayJob(_) => "delete it, or run it again with `krayne run --queue`".to_owned(),
        };
        let (outcome, message) = match policy.on_max_wait {
            OnMaxWait::Keep => (
                "kept suspended",
                format!(
                    "waited longer than its namespace's max_wait ({max_wait}): left the line, kept suspended; {again}"
                ),
            ),
            OnMaxWait::Delete => (
                "deleted",
                format!("waited longer than its namespace's max_wait ({max_wait}): deleted by krayne"),
            ),
        };
        let summary = json!({"max_wait": max_wait, "outcome": outcome, "kind": waiting.kind(),
                             "queued_since": waiting.queued_since().map(|t| t.to_string())});
        match (policy.on_max_wait, waiting) {
            (OnMaxWait::Keep, _) => {
                let patch = leave_line_patch(meta);
                self.audited(cx, AuditAction::QueueExpire, namespace, name, summary, || {
                    self.patch_in_line(waiting, &patch, rid)
                })
                .await?;
            }
            (OnMaxWait::Delete, InLine::Cluster(cluster)) => {
                let Some(only_if) = Preconditions::of(cluster) else {
                    return Ok(());
                };
                self.audited(cx, AuditAction::QueueExpire, namespace, name, summary, || {
                    self.store.delete(&target, Some(&only_if), rid)
                })
                .await?;
            }
            (OnMaxWait::Delete, InLine::RayJob(job)) => {
                let Some(only_if) = Preconditions::of_object(&job.metadata) else {
                    return Ok(());
                };
                let store = self.rayjob_store()?;
                self.audited(cx, AuditAction::QueueExpire, namespace, name, summary, || {
                    store.delete_rayjob(&target, Some(&only_if), rid)
                })
                .await?;
            }
        }
        metrics::counter!("krayne_queue_expired_total", "outcome" => outcome).increment(1);
        tracing::info!(%namespace, name, kind = waiting.kind(), outcome, "queue: a wait past max_wait ended");
        self.post_queue_event(cx, waiting, "Warning", "QueueWaitExpired", &message, now)
            .await;
        Ok(())
    }

    /// Posts an Event on the RayCluster (or RayJob). Best effort: the
    /// audit row is the record.
    async fn post_queue_event(
        &self,
        cx: &Context,
        waiting: InLine<'_>,
        kind: &str,
        reason: &str,
        message: &str,
        now: Timestamp,
    ) {
        let now = now.to_string();
        let event = match waiting {
            InLine::Cluster(cluster) => lifecycle_event(cluster, kind, reason, message, &now),
            InLine::RayJob(job) => rayjob_event(job, kind, reason, message, &now),
        };
        let about = waiting.acted_on(AuditAction::QueueAdmit);
        if let Err(e) = self.store.create_event(&about, &event, &cx.meta.request_id).await {
            let meta = waiting.meta();
            tracing::warn!(namespace = %meta.namespace, name = %meta.name, error = %e,
                "queue: its event not posted");
        }
    }
}

/// What waits in a line: a suspended cluster, or a suspended RayJob whose
/// cluster is not made yet.
#[derive(Clone, Copy)]
enum InLine<'a> {
    Cluster(&'a ObservedCluster),
    RayJob(&'a ObservedRayJob),
}

impl InLine<'_> {
    fn meta(&self) -> &ObjectMeta {
        match self {
            Self::Cluster(c) => &c.metadata,
            Self::RayJob(j) => &j.metadata,
        }
    }

    fn suspended(&self) -> bool {
        match self {
            Self::Cluster(c) => c.spec.suspend == Some(true),
            Self::RayJob(j) => j.spec.suspend == Some(true),
        }
    }

    fn kueue_queue(&self) -> Option<&str> {
        self.meta().kueue_queue()
    }

    fn kind(&self) -> &'static str {
        match self {
            Self::Cluster(_) => "RayCluster",
            Self::RayJob(_) => "RayJob",
        }
    }

    fn queued_since(&self) -> Option<Timestamp> {
        match self {
            Self::Cluster(c) => c.queued_since(),
            Self::RayJob(j) => j.queued_since(),
        }
    }

    /// The admitter acting on it (fenced by its own rules: the lines it
    /// serves).
    fn acted_on(&self, action: AuditAction) -> Authorized<ClusterRef> {
        let site = match self {
            Self::Cluster(c) => &c.site,
            Self::RayJob(j) => &j.site,
        };
        krayne_acts_on_object(self.meta(), site, action)
    }
}

/// Those of `decision`'s waiting whose wait passed the policy's `max_wait`.
fn expired(decision: &LineDecision, line: &[Waiting], policy: &QueuePolicy, now: Timestamp) -> Vec<String> {
    let Some(max_wait) = policy.max_wait else {
        return Vec::new();
    };
    decision
        .waiting
        .iter()
        .filter(|(name, ..)| {
            line.iter()
                .find(|w| &w.name == name)
                .and_then(|w| w.since.checked_add(max_wait.0).ok())
                .is_some_and(|due| due <= now)
        })
        .map(|(name, ..)| name.clone())
        .collect()
}

/// The admitter's own context: no request, a principal of its own.
fn queue_context() -> Context {
    let mut cx = crate::reaper::system_context();
    cx.principal.subject = QUEUE_SUBJECT.to_owned();
    cx
}
