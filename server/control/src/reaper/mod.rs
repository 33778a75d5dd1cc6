//! The lifecycle reaper: carries out each namespace's lifecycle policy
//! (`lifecycle:` in the team mapping; the decisions are
//! [`crate::domain::lifecycle::step`]'s). One replica at a time acts —
//! the holder of a Kubernetes Lease — and each write is fenced by a fresh
//! read of that lease. Every warning and every action is audited as the
//! system principal `system:krayne-lifecycle`, with its reason, and
//! counted in `krayne_lifecycle_actions_total{action, reason, mode}`.
//!
//! What it plans, and since when a cluster is idle ([`crate::idleness`]),
//! it records on the cluster as annotations (audited `lifecycle.plan`),
//! so every replica's reads show them.

mod limits;
mod schedule;

use std::{collections::HashMap, sync::Arc, time::Duration};

pub use limits::ReaperLimits;
use limits::{PassBudget, Settling};
pub(crate) use schedule::HeadSchedule;

use futures::StreamExt as _;
use jiff::{SignedDuration, Timestamp};
use serde_json::json;

use super::{
    Context, ControlPlane,
    idleness::{Asked, HEAD_CONCURRENCY, LastUses},
};
use crate::{
    authz::krayne_acts_on,
    domain::{
        ClusterRef, Error, Leadership, ObservedCluster, Preconditions, Principal,
        audit::{AuditAction, RequestMeta, Transport},
        lifecycle::{LifecycleAction, LifecyclePolicy, LifecycleReason, Plan, Signals, Step, step},
        quota,
    },
    manifest::{
        ANNOTATION_ADMITTED_AT, ANNOTATION_IDLE_SINCE, ANNOTATION_KEEP_UNTIL, ANNOTATION_LIFECYCLE,
        ANNOTATION_WARNED_AT, annotations_patch, lifecycle_event, suspend_patch,
    },
};

/// How far a fresh idle time may stray from the one recorded before it is
/// written again (a head's idle seconds are whole, and asked a moment
/// apart).
const IDLE_TOLERANCE: SignedDuration = SignedDuration::from_secs(3);
/// Longest one pass spends asking heads whether their clusters are idle.
const PASS_HEAD_DEADLINE: Duration = Duration::from_secs(90);
/// Uses of clusters older than this are forgotten.
const USES_KEPT: SignedDuration = SignedDuration::from_hours(24 * 30);

/// The subject the reaper's audit rows name.
pub const LIFECYCLE_SUBJECT: &str = "system:krayne-lifecycle";

/// What the reaper does (`--lifecycle`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum LifecycleMode {
    /// Nothing.
    #[default]
    Off,
    /// Logs and counts what it would do; changes nothing.
    Report,
    /// Warns and acts.
    Act,
}

impl LifecycleMode {
    /// `off`, `report`, `act`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Off => "off",
            Self::Report => "report",
            Self::Act => "act",
        }
    }
}

/// One pass, as its clusters see it.
struct Pass<'a> {
    mode: LifecycleMode,
    leadership: &'a dyn Leadership,
    /// The time by the shared clock.
    now: Timestamp,
    /// Named in each action's audit row, so a pass's actions can be told.
    id: String,
    budget: PassBudget,
    /// Namespaces whose policy is new or changed.
    settling: HashMap<String, Settling>,
}

/// One thing a pass did (or, in `report` mode, would have done).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reaped {
    /// The cluster.
    pub cluster: ClusterRef,
    /// `warn`, `suspend`, `delete`, `plan` (a plan or idle time recorded) or
    /// `report` (what a policy still settling would do).
    pub action: &'static str,
    /// Why (`lifetime 7d reached`).
    pub reason: String,
}

impl ControlPlane {
    /// One pass over every cluster whose namespace has a lifecycle policy.
    /// Errors of one cluster are logged and do not stop the others.
    pub async fn reap(&self, mode: LifecycleMode, leadership: &dyn Leadership, now: Timestamp) -> Vec<Reaped> {
        let clusters = match self.store.list(None, &system_context().meta.request_id).await {
            Ok(clusters) => clusters,
            Err(e) => {
                tracing::warn!(error = %e, "lifecycle: cannot list clusters; nothing done this pass");
                metrics::counter!("krayne_lifecycle_passes_total", "outcome" => "failed").increment(1);
                return Vec::new();
            }
        };
        // One on its way out is left to go; a RayJob's is KubeRay's to end
        // (its deadline is the team's lifetime, its TTL the policy's).
        let governed: Vec<(Arc<ObservedCluster>, LifecyclePolicy)> = clusters
            .into_iter()
            .filter(|c| c.metadata.deletion_timestamp.is_none() && c.metadata.rayjob().is_none())
            // One waiting in line is the admitter's (and its `max_wait`);
            // one Kueue admits is Kueue's to suspend and resume.
            .filter(|c| c.queued_since().is_none() && c.kueue_queue().is_none())
            .filter_map(|c| {
                let policy = self.lifecycle_of(&c.metadata.namespace)?;
                Some((c, policy))
            })
            .collect();
        let settling = match self.policies_settling(now).await {
            Ok(settling) => settling,
            Err(e) => {
                tracing::warn!(error = %e, "lifecycle: cannot tell new policies from settled ones; nothing done this pass");
                metrics::counter!("krayne_lifecycle_passes_total", "outcome" => "failed").increment(1);
                return Vec::new();
            }
        };
        let idle = self.idle_times(&governed, now).await;
        let mut pass = Pass {
            mode,
            leadership,
            now,
            id: uuid::Uuid::now_v7().to_string(),
            budget: PassBudget::new(&self.settings.reaper),
            settling,
        };
        let mut done = Vec::new();
        for (cluster, policy) in &governed {
            let key = (
                cluster.metadata.namespace.to_string(),
                cluster.metadata.name.to_string(),
            );
            let idle_since = idle.get(&key).copied().flatten();
            // Each cluster's writes have a request id of their own.
            let cx = system_context();
            match self.reap_one(&cx, &mut pass, policy, cluster, idle_since).await {
                Ok(Some(reaped)) => done.push(reaped),
                Ok(None) => {}
                Err(e) => tracing::warn!(
                    namespace = %cluster.metadata.namespace, cluster = %cluster.metadata.name, error = %e,
                    "lifecycle: not carried out this pass"
                ),
            }
        }
        report_caps(&pass);
        metrics::counter!("krayne_lifecycle_passes_total", "outcome" => "done").increment(1);
        if mode == LifecycleMode::Act
            && let Some((ledger, _)) = &self.activity_ledger
            && let Ok(before) = now.checked_sub(USES_KEPT)
            && let Err(e) = ledger.forget(before).await
        {
            tracing::debug!(error = %e, "lifecycle: old uses of clusters not forgotten");
        }
        done
    }

    /// Since when each running cluster under an `idle_after` policy is idle
    /// (`None`: in use, or cannot be told), its head asked by at most
    /// [`HEAD_CONCURRENCY`] at once; and the gauge of idle clusters with GPUs.
    async fn idle_times(
        &self,
        governed: &[(Arc<ObservedCluster>, LifecyclePolicy)],
        now: Timestamp,
    ) -> HashMap<(String, String), Option<Timestamp>> {
        let watched: Vec<Arc<ObservedCluster>> = governed
            .iter()
            .filter(|(c, p)| p.idle_after.is_some() && c.spec.suspend != Some(true))
            .map(|(c, _)| c.clone())
            .collect();
        if watched.is_empty() {
            metrics::gauge!("krayne_lifecycle_idle_gpu_clusters").set(0.0);
            return HashMap::new();
        }
        // Owned by each future: a borrowing closure makes the spawned
        // reaper's future not `Send` for every lifetime.
        let uses: Arc<Option<LastUses>> = Arc::new(self.last_uses().await);
        let planned = self.head_schedule.plan(watched);
        let pass = planned.pass;
        let started = std::time::Instant::now();
        let mut asking = futures::stream::iter(planned.ask)
            .map(|cluster| {
                let (plane, uses) = (self.clone(), uses.clone());
                async move {
                    // A head's idle seconds count from when it is asked,
                    // which in a long pass is well after the pass began.
                    let asked_at = SignedDuration::try_from(started.elapsed())
                        .ok()
                        .and_then(|d| now.checked_add(d).ok())
                        .unwrap_or(now);
                    let asked = match uses.as_ref() {
                        Some(uses) => plane.idle_since(&system_context(), &cluster, uses, asked_at).await,
                        None => Asked::Told(None),
                    };
                    let key = (
                        cluster.metadata.namespace.to_string(),
                        cluster.metadata.name.to_string(),
                    );
                    match asked {
                        Asked::Slow => plane.head_schedule.slow(&key, pass),
                        Asked::Told(_) => plane.head_schedule.answered(&key, pass),
                    }
                    let since = match asked {
                        Asked::Told(since) => since,
                        Asked::Slow => None,
                    };
                    (key, (since, quota::charge(&cluster).gpu_nanos > 0))
                }
            })
            .buffer_unordered(HEAD_CONCURRENCY);
        // Whatever heads do, a pass asks for no longer than this; those
        // left out are not idle this pass, and asked first by the next.
        let deadline = tokio::time::sleep(PASS_HEAD_DEADLINE);
        tokio::pin!(deadline);
        let mut found: HashMap<_, _> = HashMap::new();
        let mut cut = false;
        loop {
            tokio::select! {
                next = asking.next() => match next {
                    Some((key, value)) => { found.insert(key, value); }
                    None => break,
                },
                () = &mut deadline => { cut = true; break; }
            }
        }
        metrics::gauge!("krayne_lifecycle_heads_skipped").set(planned.skipped as f64);
        if cut {
            metrics::counter!("krayne_lifecycle_passes_cut_total").increment(1);
            tracing::warn!(asked = found.len(), deadline = ?PASS_HEAD_DEADLINE,
                "lifecycle: the pass's deadline for asking heads passed; the rest are asked first next pass");
        }
        let idle_gpu = found.values().filter(|(since, gpu)| since.is_some() && *gpu).count();
        #[expect(clippy::cast_precision_loss, reason = "a gauge")]
        metrics::gauge!("krayne_lifecycle_idle_gpu_clusters").set(idle_gpu as f64);
        found.into_iter().map(|(k, (since, _))| (k, since)).collect()
    }

    fn lifecycle_of(&self, namespace: &str) -> Option<LifecyclePolicy> {
        self.authenticator.as_ref()?.lifecycle(namespace)
    }

    /// The namespaces whose policy is new or changed (every namespace's
    /// policy recorded in the ledger first); none without a ledger.
    async fn policies_settling(&self, now: Timestamp) -> Result<HashMap<String, Settling>, Error> {
        let Some(ledger) = &self.policy_ledger else {
            return Ok(HashMap::new());
        };
        let namespaces = self.store.namespaces(&system_context().meta.request_id).await?;
        let policies: Vec<(String, String)> = namespaces
            .into_iter()
            .filter_map(|ns| {
                let policy = serde_json::to_string(&self.lifecycle_of(&ns)?).ok()?;
                Some((ns, policy))
            })
            .collect();
        let records = ledger.observe(&policies, now).await?;
        let settling = limits::settling(&records, self.settings.reaper.policy_settle, now);
        #[expect(clippy::cast_precision_loss, reason = "a gauge")]
        metrics::gauge!("krayne_lifecycle_policies_settling").set(settling.len() as f64);
        Ok(settling)
    }

    async fn reap_one(
        &self,
        cx: &Context,
        pass: &mut Pass<'_>,
        policy: &LifecyclePolicy,
        cluster: &ObservedCluster,
        idle_since: Option<Timestamp>,
    ) -> Result<Option<Reaped>, Error> {
        let (mode, leadership, now) = (pass.mode, pass.leadership, pass.now);
        let mut signals = signals(cluster)?;
        signals.idle_since = settled(idle_since, annotated(cluster, ANNOTATION_IDLE_SINCE));
        let (namespace, name) = (cluster.metadata.namespace.as_str(), cluster.metadata.name.as_str());
        let reaped = |action: &'static str, reason: String| Reaped {
            cluster: ClusterRef::new(namespace, name),
            action,
            reason,
        };
        let warned_for = |plan: &Plan| signals.warned_at.is_some_and(|w| w >= plan.warn_at);
        let (action, plan) = match step(policy, &signals, now) {
            Step::Warn(plan) => ("warn", plan),
            Step::Act(plan) => (plan.action.as_str(), plan),
            Step::Wait(plan) => {
                return self
                    .record_plan(cx, pass, cluster, &signals, Some(plan.text()), warned_for(&plan))
                    .await
                    .map(|r| r.map(|why| reaped("plan", why)));
            }
            Step::Nothing => {
                return self
                    .record_plan(cx, pass, cluster, &signals, None, false)
                    .await
                    .map(|r| r.map(|why| reaped("plan", why)));
            }
        };
        if let Some(settling) = pass.settling.get(namespace)
            && !limits::previous_would_too(settling, &signals, now)
        {
            // A new or changed policy: what it alone would do is
            // reported, on the cluster too, until it has settled.
            let text = format!(
                "would {} (a new policy, only reported until {})",
                plan.text(),
                settling.until
            );
            metrics::counter!("krayne_lifecycle_actions_total", "action" => action, "reason" => plan.reason.kind(), "mode" => "settling")
                .increment(1);
            tracing::info!(%namespace, cluster = %name, action, at = %plan.at, until = %settling.until,
                "lifecycle: a new policy would act; reported only until it has settled");
            return self
                .record_plan(cx, pass, cluster, &signals, Some(text), false)
                .await
                .map(|_| Some(reaped("report", plan.text())));
        }
        // An action says how long the cluster has really sat idle
        // (`idle 2h04m`); a warning, what the policy allows (`idle 2h`).
        let reason = match (action, plan.reason, signals.idle_since) {
            ("warn", why, _) | (_, why @ LifecycleReason::Lifetime(_), _) | (_, why, None) => why,
            (_, LifecycleReason::Idle(_), Some(since)) => LifecycleReason::Idle(now.duration_since(since)),
        }
        .to_string();
        if mode != LifecycleMode::Act {
            // Nothing is written, so no warning is ever on record: report
            // the action itself once it is due.
            let would = if now >= plan.at { plan.action.as_str() } else { "warn" };
            metrics::counter!("krayne_lifecycle_actions_total", "action" => would, "reason" => plan.reason.kind(), "mode" => mode.as_str())
                .increment(1);
            tracing::info!(%namespace, cluster = %name, action = would, %reason, at = %plan.at, "lifecycle (report): would act");
            return Ok(Some(reaped(would, reason)));
        }
        let summary =
            json!({"action": plan.action.as_str(), "at": plan.at.to_string(), "reason": reason, "pass": pass.id});
        let rid = &cx.meta.request_id;
        match action {
            "warn" => {
                let (idle, text, warned) = (signals.idle_since.map(|t| t.to_string()), plan.text(), now.to_string());
                let wanted = [
                    (ANNOTATION_IDLE_SINCE, idle.as_deref()),
                    (ANNOTATION_LIFECYCLE, Some(text.as_str())),
                    (ANNOTATION_WARNED_AT, Some(warned.as_str())),
                ];
                let Some(patch) = annotations_patch(cluster, &wanted) else {
                    tracing::debug!(%namespace, cluster = %name, "lifecycle: a cluster without annotations is not warned, so not acted on");
                    return Ok(None);
                };
                // The fence: only while this replica holds the lease, as
                // Kubernetes has it now.
                if !leadership.holds().await {
                    return Ok(None);
                }
                let target = krayne_acts_on(cluster, AuditAction::LifecycleWarn);
                self.audited(cx, AuditAction::LifecycleWarn, namespace, name, summary, || {
                    self.store.patch(&target, &patch, rid)
                })
                .await?;
            }
            _ if !leadership.holds().await => return Ok(None),
            _ if pass.budget.take(namespace).is_err() => {
                tracing::debug!(%namespace, cluster = %name, action, "lifecycle: a cap holds the action back to a later pass");
                return Ok(None);
            }
            _ if plan.action == LifecycleAction::Delete => {
                // Only the very cluster the plan was made on: not one
                // deleted and created again under its name since.
                let Some(only_if) = Preconditions::of(cluster) else {
                    return Ok(None);
                };
                let target = krayne_acts_on(cluster, AuditAction::ClusterDelete);
                self.audited(cx, AuditAction::ClusterDelete, namespace, name, summary, || {
                    self.store.delete(&target, Some(&only_if), rid)
                })
                .await?;
            }
            _ => {
                let patch = suspend_patch(cluster, true);
                let target = krayne_acts_on(cluster, AuditAction::ClusterSuspend);
                self.audited(cx, AuditAction::ClusterSuspend, namespace, name, summary, || {
                    self.store.patch(&target, &patch, rid)
                })
                .await?;
            }
        }
        metrics::counter!("krayne_lifecycle_actions_total", "action" => action, "reason" => plan.reason.kind(), "mode" => mode.as_str())
            .increment(1);
        tracing::info!(%namespace, cluster = %name, action, %reason, "lifecycle: done");
        self.post_event(cx, cluster, action, &plan, &reason, now).await;
        Ok(Some(reaped(action, reason)))
    }

    /// Posts what was done as a Kubernetes Event on the RayCluster, for
    /// `kubectl describe` and every tool reading events. Best effort: the
    /// audit row is the record, and an action stands without its event.
    async fn post_event(
        &self,
        cx: &Context,
        cluster: &ObservedCluster,
        action: &str,
        plan: &Plan,
        why: &str,
        now: Timestamp,
    ) {
        let name = cluster.metadata.name.as_str();
        let (kind, reason, message) = match action {
            "warn" => (
                "Warning",
                "LifecycleWarning",
                format!(
                    "krayne will {}; `krayne keep {name} --for 4h` postpones it",
                    plan.text()
                ),
            ),
            "delete" => ("Normal", "LifecycleDeleted", format!("deleted by krayne: {why}")),
            _ => (
                "Normal",
                "LifecycleSuspended",
                format!("suspended by krayne: {why}; `krayne resume {name}` brings it back"),
            ),
        };
        let event = lifecycle_event(cluster, kind, reason, &message, &now.to_string());
        let namespace = cluster.metadata.namespace.as_str();
        let about = krayne_acts_on(cluster, AuditAction::LifecycleWarn);
        if let Err(e) = self.store.create_event(&about, &event, &cx.meta.request_id).await {
            tracing::warn!(%namespace, cluster = %name, error = %e, "lifecycle: its event not posted");
        }
    }

    /// Records on the cluster what the reaper plans and since when it is
    /// idle, when either changed; a warning that no longer holds (the
    /// cluster was used again, kept, or the policy changed) is taken back.
    /// Returns what changed.
    async fn record_plan(
        &self,
        cx: &Context,
        pass: &Pass<'_>,
        cluster: &ObservedCluster,
        signals: &Signals,
        text: Option<String>,
        warning_holds: bool,
    ) -> Result<Option<String>, Error> {
        if pass.mode != LifecycleMode::Act {
            return Ok(None);
        }
        let (namespace, name) = (cluster.metadata.namespace.as_str(), cluster.metadata.name.as_str());
        let idle = signals.idle_since.map(|t| t.to_string());
        let warned = if warning_holds {
            cluster
                .metadata
                .annotations
                .get(ANNOTATION_WARNED_AT)
                .map(|w| w.as_str())
        } else {
            None
        };
        let wanted = [
            (ANNOTATION_IDLE_SINCE, idle.as_deref()),
            (ANNOTATION_LIFECYCLE, text.as_deref()),
            (ANNOTATION_WARNED_AT, warned),
        ];
        let Some(patch) = annotations_patch(cluster, &wanted) else {
            return Ok(None);
        };
        if !pass.leadership.holds().await {
            return Ok(None);
        }
        let cleared = warned.is_none() && signals.warned_at.is_some();
        let summary = json!({"idle_since": idle, "plan": text, "warning_taken_back": cleared});
        let rid = &cx.meta.request_id;
        let target = krayne_acts_on(cluster, AuditAction::LifecyclePlan);
        self.audited(cx, AuditAction::LifecyclePlan, namespace, name, summary, || {
            self.store.patch(&target, &patch, rid)
        })
        .await?;
        let why = match (&text, &idle) {
            (Some(text), _) => text.clone(),
            (None, Some(idle)) => format!("idle since {idle}"),
            (None, None) => "nothing planned".into(),
        };
        Ok(Some(why))
    }
}

/// Says what the caps held back this pass: the log, a gauge, a counter
/// per cap (which the alert watches).
fn report_caps(pass: &Pass<'_>) {
    let deferred = pass.budget.deferred_total();
    #[expect(clippy::cast_precision_loss, reason = "a gauge")]
    metrics::gauge!("krayne_lifecycle_deferred_actions").set(deferred as f64);
    if deferred == 0 {
        return;
    }
    for (cap, n) in &pass.budget.deferred {
        metrics::counter!("krayne_lifecycle_caps_reached_total", "cap" => *cap).increment(*n as u64);
    }
    tracing::warn!(deferred, by_cap = ?pass.budget.deferred, pass = %pass.id,
        "lifecycle: the caps on one pass's actions held some back; acting goes on next pass (warnings are not capped)");
}

/// The reaper's own context: no request, a principal of its own.
pub(crate) fn system_context() -> Context {
    Context {
        principal: Principal {
            subject: LIFECYCLE_SUBJECT.to_owned(),
            email: None,
            groups: Vec::new(),
            teams: Vec::new(),
            global_admin: true,
            grants: Vec::new(),
            expires_at: None,
            issuer: None,
        },
        meta: RequestMeta {
            request_id: uuid::Uuid::now_v7().to_string().into(),
            correlation_id: None,
            transport: Transport::System,
            source_ip: None,
            user_agent: None,
        },
    }
}

/// A time the cluster's annotation `key` holds.
fn annotated(cluster: &ObservedCluster, key: &str) -> Option<Timestamp> {
    cluster
        .metadata
        .annotations
        .get(key)
        .and_then(|t| t.as_str().parse::<Timestamp>().ok())
}

/// The idle time found now, or the one recorded when they differ by no
/// more than [`IDLE_TOLERANCE`] (so the plan, and its annotation, hold
/// still while nothing changes).
fn settled(found: Option<Timestamp>, recorded: Option<Timestamp>) -> Option<Timestamp> {
    match (found, recorded) {
        (Some(found), Some(recorded)) if found.duration_since(recorded).abs() <= IDLE_TOLERANCE => Some(recorded),
        (found, _) => found,
    }
}

/// What the reaper knows of a cluster from the cluster itself.
fn signals(cluster: &ObservedCluster) -> Result<Signals, Error> {
    let time = |key: &str| annotated(cluster, key);
    let created_at = cluster
        .metadata
        .creation_timestamp
        .as_ref()
        .and_then(|t| t.as_str().parse::<Timestamp>().ok())
        .ok_or_else(|| Error::Internal("a cluster without a creation time".into()))?;
    // One that waited in line lives from its admission.
    let created_at = time(ANNOTATION_ADMITTED_AT).map_or(created_at, |admitted| admitted.max(created_at));
    Ok(Signals {
        created_at,
        idle_since: None,
        kept_until: time(ANNOTATION_KEEP_UNTIL),
        warned_at: time(ANNOTATION_WARNED_AT),
        suspended: cluster.spec.suspend == Some(true),
    })
}
