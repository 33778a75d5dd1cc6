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

use super::{Context, ControlPlane};
use crate::{
    authz::krayne_acts_on,
    domain::{
        AdmissionGuard, Error, Leadership, ObservedCluster, Preconditions,
        audit::AuditAction,
        kueue,
        queue::{self, LineDecision, OnMaxWait, QueuePolicy, Waiting},
        quota,
    },
    manifest::{
        ANNOTATION_ADMITTED_AT, ANNOTATION_QUEUE_POSITION, ANNOTATION_QUEUE_REASON, ANNOTATION_QUEUE_STATE,
        ANNOTATION_QUEUED_SINCE, admit_patch, annotations_patch, leave_line_patch, lifecycle_event, place_patch,
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
    /// The summary an audit row keeps of it.
    pub(super) fn summary(&self) -> serde_json::Value {
        json!({"queued": true, "queue_position": self.position, "queued_since": self.since.to_string(),
               "queue_reason": self.reason})
    }
}

/// The clusters of `clusters` waiting in line, in its order; `except`
/// (the one asking) left out.
pub(super) fn line_of(clusters: &[Arc<ObservedCluster>], except: &str) -> Vec<Waiting> {
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
        let namespaces: BTreeSet<String> = clusters
            .iter()
            .filter(|c| c.queued_since().is_some() && c.kueue_queue().is_none())
            .map(|c| c.metadata.namespace.to_string())
            .collect();
        for namespace in namespaces {
            if let Err(e) = self.serve_line(&cx, &namespace, leadership).await {
                tracing::warn!(%namespace, error = %e, "the admitter could not serve a line; trying again next round");
            }
        }
        // Kueue's lines: those with a cluster that waits, or did.
        let kueue: BTreeSet<String> = clusters
            .iter()
            .filter(|c| c.kueue_queue().is_some() && c.metadata.deletion_timestamp.is_none())
            .filter(|c| c.spec.suspend == Some(true) || c.metadata.annotations.get(ANNOTATION_QUEUED_SINCE).is_some())
            .map(|c| c.metadata.namespace.to_string())
            .collect();
        for namespace in kueue {
            let of_namespace: Vec<&Arc<ObservedCluster>> = clusters
                .iter()
                .filter(|c| c.metadata.namespace.as_str() == namespace && c.kueue_queue().is_some())
                .collect();
            if let Err(e) = self.mirror_kueue(&cx, &namespace, &of_namespace, leadership).await {
                tracing::warn!(%namespace, error = %e, "Kueue's Workloads could not be read; trying again next round");
            }
        }
    }

    /// Shows what Kueue says of `namespace`'s clusters as krayne's own
    /// line does (docs/kueue.md): on each that waits, when it started, its
    /// place in its LocalQueue (when the visibility API answers), Kueue's
    /// reason, and whether Kueue took it back (`preempted`, `evicted`); on
    /// each admitted, nothing but when (its lifetime counts from then).
    async fn mirror_kueue(
        &self,
        cx: &Context,
        namespace: &str,
        clusters: &[&Arc<ObservedCluster>],
        leadership: Option<&dyn Leadership>,
    ) -> Result<(), Error> {
        let Some(kueue) = &self.kueue else {
            return Ok(());
        };
        let rid = &cx.meta.request_id;
        let uid_of = |c: &ObservedCluster| c.metadata.uid.as_ref().map(ToString::to_string).unwrap_or_default();
        // Only the Workloads of these clusters (Kueue labels each with its
        // job's uid), a bounded selector at a time.
        let uids: Vec<String> = clusters.iter().map(|c| uid_of(c)).filter(|u| !u.is_empty()).collect();
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
        for cluster in clusters {
            let uid = uid_of(cluster);
            let workload = workloads.iter().find(|w| w.owner_uid.as_deref() == Some(uid.as_str()));
            let suspended = cluster.spec.suspend == Some(true);
            // Kueue admits the Workload before it un-suspends the cluster:
            // until then, what is on the cluster stays.
            if suspended && workload.is_some_and(|w| w.admitted) {
                continue;
            }
            let annotation = |key: &str| cluster.metadata.annotations.get(key).map(|a| a.to_string());
            let created = cluster.metadata.creation_timestamp.as_deref().unwrap_or_default();
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
            if let Some(patch) = annotations_patch(cluster, &wanted) {
                let target = krayne_acts_on(cluster, AuditAction::QueueAdmit);
                // A conflict (Kueue wrote meanwhile) is tried again next round.
                if let Err(e) = self.store.patch(&target, &patch, rid).await {
                    tracing::debug!(%namespace, cluster = %cluster.metadata.name, error = %e, "Kueue's view not recorded this round");
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
        let (clusters, used) = self.standing_now(namespace, rid).await?;
        let line = line_of(&clusters, "");
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
        let find = |name: &str| clusters.iter().find(|c| c.metadata.name.as_str() == name);
        for name in &decision.admit {
            if let Some(cluster) = find(name) {
                admission.held()?;
                self.admit_waiting(cx, cluster, now).await?;
            }
        }
        let expired = expired(&decision, &line, &policy, now);
        for name in &expired {
            if let Some(cluster) = find(name) {
                self.end_wait(cx, cluster, &policy, now).await?;
            }
        }
        let still = decision.waiting.iter().filter(|(name, ..)| !expired.contains(name));
        for (position, (name, _, reason)) in (1u32..).zip(still) {
            let Some(cluster) = find(name) else {
                continue;
            };
            if let Some(patch) = place_patch(cluster, position, reason) {
                let target = krayne_acts_on(cluster, AuditAction::QueueAdmit);
                self.store.patch(&target, &patch, rid).await?;
            }
        }
        Ok(())
    }

    /// Admits one waiting cluster: resumed, audited `queue.admit`, an Event
    /// on it.
    async fn admit_waiting(&self, cx: &Context, cluster: &ObservedCluster, now: Timestamp) -> Result<(), Error> {
        let (namespace, name) = (cluster.metadata.namespace.as_str(), cluster.metadata.name.as_str());
        let waited = cluster.queued_since().map(|since| now.duration_since(since));
        let waited_text = waited.map(|d| crate::domain::lifecycle::Span(d).to_string());
        let summary = json!({"queued_since": cluster.queued_since().map(|t| t.to_string()), "waited": waited_text});
        let patch = admit_patch(cluster, &now.to_string());
        let target = krayne_acts_on(cluster, AuditAction::QueueAdmit);
        let rid = &cx.meta.request_id;
        self.audited(cx, AuditAction::QueueAdmit, namespace, name, summary, || {
            self.store.patch(&target, &patch, rid)
        })
        .await?;
        metrics::counter!("krayne_queue_admissions_total").increment(1);
        tracing::info!(%namespace, cluster = %name, waited = ?waited_text, "queue: admitted");
        let message = match waited_text {
            Some(waited) => format!("admitted by krayne after waiting {waited} in its namespace's line"),
            None => "admitted by krayne from its namespace's line".to_owned(),
        };
        self.post_queue_event(cx, cluster, "Normal", "QueueAdmitted", &message, now)
            .await;
        Ok(())
    }

    /// Ends a wait past the policy's `max_wait`: the cluster leaves the
    /// line, kept suspended or deleted as the policy says; audited
    /// `queue.expire`, an Event on it.
    async fn end_wait(
        &self,
        cx: &Context,
        cluster: &ObservedCluster,
        policy: &QueuePolicy,
        now: Timestamp,
    ) -> Result<(), Error> {
        let (namespace, name) = (cluster.metadata.namespace.as_str(), cluster.metadata.name.as_str());
        let max_wait = policy
            .max_wait
            .map(|d| crate::domain::lifecycle::Span(d.0).to_string())
            .unwrap_or_default();
        let rid = &cx.meta.request_id;
        let target = krayne_acts_on(cluster, AuditAction::QueueExpire);
        let (outcome, message) = match policy.on_max_wait {
            OnMaxWait::Keep => (
                "kept suspended",
                format!(
                    "waited longer than its namespace's max_wait ({max_wait}): left the line, kept suspended; \
                     `krayne resume {name} --queue` waits again"
                ),
            ),
            OnMaxWait::Delete => (
                "deleted",
                format!("waited longer than its namespace's max_wait ({max_wait}): deleted by krayne"),
            ),
        };
        let summary = json!({"max_wait": max_wait, "outcome": outcome,
                             "queued_since": cluster.queued_since().map(|t| t.to_string())});
        match policy.on_max_wait {
            OnMaxWait::Keep => {
                let patch = leave_line_patch(cluster);
                self.audited(cx, AuditAction::QueueExpire, namespace, name, summary, || {
                    self.store.patch(&target, &patch, rid)
                })
                .await?;
            }
            OnMaxWait::Delete => {
                let Some(only_if) = Preconditions::of(cluster) else {
                    return Ok(());
                };
                self.audited(cx, AuditAction::QueueExpire, namespace, name, summary, || {
                    self.store.delete(&target, Some(&only_if), rid)
                })
                .await?;
            }
        }
        metrics::counter!("krayne_queue_expired_total", "outcome" => outcome).increment(1);
        tracing::info!(%namespace, cluster = %name, outcome, "queue: a wait past max_wait ended");
        self.post_queue_event(cx, cluster, "Warning", "QueueWaitExpired", &message, now)
            .await;
        Ok(())
    }

    /// Posts an Event on the RayCluster. Best effort: the audit row is the
    /// record.
    async fn post_queue_event(
        &self,
        cx: &Context,
        cluster: &ObservedCluster,
        kind: &str,
        reason: &str,
        message: &str,
        now: Timestamp,
    ) {
        let event = lifecycle_event(cluster, kind, reason, message, &now.to_string());
        let about = krayne_acts_on(cluster, AuditAction::QueueAdmit);
        if let Err(e) = self.store.create_event(&about, &event, &cx.meta.request_id).await {
            tracing::warn!(namespace = %cluster.metadata.namespace, cluster = %cluster.metadata.name, error = %e,
                "queue: its event not posted");
        }
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
