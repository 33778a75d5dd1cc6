//! The lifecycle reaper: carries out each namespace's lifecycle policy
//! (`lifecycle:` in the team mapping; the decisions are
//! [`crate::domain::lifecycle::step`]'s). One replica at a time acts —
//! the holder of a Kubernetes Lease — and each write is fenced by a fresh
//! read of that lease. Every warning and every action is audited as the
//! system principal `system:krayne-lifecycle`, with its reason, and
//! counted in `krayne_lifecycle_actions_total{action, reason, mode}`.
//!
//! Idle detection is not in this version: no cluster is ever seen idle (the
//! fail-safe reading of "its use cannot be told"), so `idle_after` waits
//! for it; `max_lifetime` is carried out.

use std::time::Duration;

use jiff::Timestamp;
use serde_json::json;

use super::{Context, ControlPlane};
use crate::{
    domain::{
        ClusterRef, Error, Leadership, ObservedCluster, Principal,
        audit::{AuditAction, RequestMeta, Transport},
        lifecycle::{LifecycleAction, LifecyclePolicy, Plan, Signals, Step, step},
    },
    manifest::{
        ANNOTATION_KEEP_UNTIL, ANNOTATION_WARNED_AT, lifecycle_clear_patch, lifecycle_warning_patch, suspend_patch,
    },
};

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

/// One thing a pass did (or, in `report` mode, would have done).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reaped {
    /// The cluster.
    pub cluster: ClusterRef,
    /// `warn`, `suspend`, `delete` or `clear` (a warning taken back).
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
                return Vec::new();
            }
        };
        let mut done = Vec::new();
        for cluster in clusters {
            // One on its way out is left to go.
            if cluster.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let Some(policy) = self.lifecycle_of(&cluster.metadata.namespace) else {
                continue;
            };
            // Each cluster's writes have a request id of their own.
            let cx = system_context();
            match self.reap_one(&cx, mode, leadership, &policy, &cluster, now).await {
                Ok(Some(reaped)) => done.push(reaped),
                Ok(None) => {}
                Err(e) => tracing::warn!(
                    namespace = %cluster.metadata.namespace, cluster = %cluster.metadata.name, error = %e,
                    "lifecycle: not carried out this pass"
                ),
            }
        }
        done
    }

    fn lifecycle_of(&self, namespace: &str) -> Option<LifecyclePolicy> {
        self.authenticator.as_ref()?.lifecycle(namespace)
    }

    async fn reap_one(
        &self,
        cx: &Context,
        mode: LifecycleMode,
        leadership: &dyn Leadership,
        policy: &LifecyclePolicy,
        cluster: &ObservedCluster,
        now: Timestamp,
    ) -> Result<Option<Reaped>, Error> {
        let signals = signals(cluster)?;
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
            // A warning that no longer holds is taken back.
            Step::Wait(plan) if warned_for(&plan) => return Ok(None),
            Step::Wait(_) | Step::Nothing => {
                if mode != LifecycleMode::Act {
                    return Ok(None);
                }
                let Some(patch) = lifecycle_clear_patch(cluster) else {
                    return Ok(None);
                };
                if !leadership.holds().await {
                    return Ok(None);
                }
                self.audited(
                    cx,
                    AuditAction::LifecycleWarn,
                    namespace,
                    name,
                    json!({"cleared": true}),
                    || self.store.patch(namespace, name, &patch, &cx.meta.request_id),
                )
                .await?;
                return Ok(Some(reaped("clear", "the warning no longer holds".into())));
            }
        };
        let reason = plan.reason.to_string();
        if mode != LifecycleMode::Act {
            // Nothing is written, so no warning is ever on record: report
            // the action itself once it is due.
            let would = if now >= plan.at { plan.action.as_str() } else { "warn" };
            metrics::counter!("krayne_lifecycle_actions_total", "action" => would, "reason" => plan.reason.kind(), "mode" => mode.as_str())
                .increment(1);
            tracing::info!(%namespace, cluster = %name, action = would, %reason, at = %plan.at, "lifecycle (report): would act");
            return Ok(Some(reaped(would, reason)));
        }
        // The fence: only while this replica holds the lease, as Kubernetes
        // has it now.
        if !leadership.holds().await {
            return Ok(None);
        }
        let summary = json!({"action": plan.action.as_str(), "at": plan.at.to_string(), "reason": reason});
        let rid = cx.meta.request_id.as_str();
        match action {
            "warn" => {
                let text = format!("{} at {}: {reason}", plan.action.as_str(), plan.at);
                let Some(patch) = lifecycle_warning_patch(cluster, &now.to_string(), &text) else {
                    tracing::debug!(%namespace, cluster = %name, "lifecycle: a cluster without annotations is not warned, so not acted on");
                    return Ok(None);
                };
                self.audited(cx, AuditAction::LifecycleWarn, namespace, name, summary, || {
                    self.store.patch(namespace, name, &patch, rid)
                })
                .await?;
            }
            _ if plan.action == LifecycleAction::Delete => {
                self.audited(cx, AuditAction::ClusterDelete, namespace, name, summary, || {
                    self.store.delete(namespace, name, rid)
                })
                .await?;
            }
            _ => {
                let patch = suspend_patch(cluster, true);
                self.audited(cx, AuditAction::ClusterSuspend, namespace, name, summary, || {
                    self.store.patch(namespace, name, &patch, rid)
                })
                .await?;
            }
        }
        metrics::counter!("krayne_lifecycle_actions_total", "action" => action, "reason" => plan.reason.kind(), "mode" => mode.as_str())
            .increment(1);
        tracing::info!(%namespace, cluster = %name, action, %reason, "lifecycle: done");
        Ok(Some(reaped(action, reason)))
    }

    /// Runs the reaper every `every` while this replica leads, until the
    /// service stops.
    pub fn spawn_reaper(&self, mode: LifecycleMode, leadership: std::sync::Arc<dyn Leadership>, every: Duration) {
        if mode == LifecycleMode::Off {
            return;
        }
        let plane = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                leadership.leading().await;
                tick.tick().await;
                plane.reap(mode, leadership.as_ref(), Timestamp::now()).await;
            }
        });
    }
}

/// The reaper's own context: no request, a principal of its own.
fn system_context() -> Context {
    Context {
        principal: Principal {
            subject: LIFECYCLE_SUBJECT.to_owned(),
            email: None,
            groups: Vec::new(),
            teams: Vec::new(),
            global_admin: true,
            grants: Vec::new(),
            expires_at: None,
        },
        meta: RequestMeta {
            request_id: uuid::Uuid::now_v7().to_string(),
            correlation_id: None,
            transport: Transport::System,
            source_ip: None,
            user_agent: None,
        },
    }
}

/// What the reaper knows of a cluster from the cluster itself.
fn signals(cluster: &ObservedCluster) -> Result<Signals, Error> {
    let time = |key: &str| {
        cluster
            .metadata
            .annotations
            .get(key)
            .and_then(|t| t.as_str().parse::<Timestamp>().ok())
    };
    let created_at = cluster
        .metadata
        .creation_timestamp
        .as_ref()
        .and_then(|t| t.as_str().parse::<Timestamp>().ok())
        .ok_or_else(|| Error::Internal("a cluster without a creation time".into()))?;
    Ok(Signals {
        created_at,
        idle_since: None,
        kept_until: time(ANNOTATION_KEEP_UNTIL),
        warned_at: time(ANNOTATION_WARNED_AT),
        suspended: cluster.spec.suspend == Some(true),
    })
}
