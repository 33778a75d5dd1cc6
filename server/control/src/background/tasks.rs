//! What runs in the background, and how often: the one list of a
//! replica's periodic and leader-elected work.

use std::{sync::Arc, time::Duration};

use futures::future::BoxFuture;

use super::Task;
use crate::{ControlPlane, KeptClusters, LifecycleMode, domain::Leadership};

/// How often `krayne_quota_used`/`krayne_quota_limit` are refreshed.
const QUOTA_GAUGES_EVERY: Duration = Duration::from_secs(15);

/// How often Kubernetes and the audit database are probed for readiness
/// and `krayne_dependency_up`.
const DEPENDENCY_PROBES_EVERY: Duration = Duration::from_secs(10);

/// How often the usage recorder runs when nothing changes (its counters
/// move then).
const USAGE_EVERY: Duration = Duration::from_secs(15);

/// The least time between two rounds of the usage recorder: changes that
/// come together are recorded together, each end within a moment of it.
const USAGE_PAUSE: Duration = Duration::from_millis(200);

/// How often the admitter serves the lines when nothing changes.
const QUEUE_EVERY: Duration = Duration::from_secs(1);

/// The least time between two rounds of the admitter: changes that come
/// together are served together.
const QUEUE_PAUSE: Duration = Duration::from_millis(100);

/// A task (`name`) that notifies the returned `Notify` on each change the
/// watch cache sees: what wakes a round that follows changes.
fn changes_of(feed: Arc<dyn crate::domain::ClusterFeed>, name: &'static str) -> (Task, Arc<tokio::sync::Notify>) {
    let changed = Arc::new(tokio::sync::Notify::new());
    let woken = changed.clone();
    let listen = Task::forever(
        name,
        Box::pin(async move {
            use futures::StreamExt as _;
            let mut changes = feed.changes();
            while changes.next().await.is_some() {
                woken.notify_one();
            }
        }),
    );
    (listen, changed)
}

/// What a replica runs beyond the work every server runs.
#[derive(Default)]
pub struct BackgroundWork {
    /// The lifecycle reaper (`None`: off).
    pub reaper: Option<ReaperWork>,
    /// The election the companion keeper runs under, so replicas do not
    /// all make the same calls (`None`: every replica keeps).
    pub keeper_leadership: Option<Arc<dyn Leadership>>,
    /// Keeping the team mapping current from its file.
    pub mapping_reload: Option<MappingReload>,
    /// The usage recorder's election (the reaper's Lease; `None`: no
    /// usage is recorded).
    pub usage_leadership: Option<Arc<dyn Leadership>>,
}

/// The election of a server that runs alone (the sandbox): it always
/// leads.
#[derive(Debug, Clone, Copy, Default)]
pub struct SoleReplica;

#[async_trait::async_trait]
impl Leadership for SoleReplica {
    async fn leading(&self) {}

    async fn holds(&self) -> bool {
        true
    }
}

/// The lifecycle reaper's schedule.
pub struct ReaperWork {
    /// `report` or `act` (`off` runs nothing).
    pub mode: LifecycleMode,
    /// The election it acts under (and reads its clock from).
    pub leadership: Arc<dyn Leadership>,
    /// Time between passes.
    pub every: Duration,
}

/// The team mapping's reload loop, made ready (file watch and signal
/// handler installed) by [`crate::auth::watch_mapping`]; the driver runs it.
pub struct MappingReload(pub(crate) BoxFuture<'static, ()>);

impl std::fmt::Debug for MappingReload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MappingReload")
    }
}

impl ControlPlane {
    /// Every task `work` asks for, besides those every server runs.
    pub(super) fn background_tasks(&self, work: BackgroundWork) -> Vec<Task> {
        let mut tasks = vec![
            self.quota_gauges_task(),
            self.dependency_probes_task(),
            self.denial_windows_task(),
        ];
        tasks.extend(self.activity_recorder_task());
        tasks.extend(self.rayjob_runner_task(work.keeper_leadership.clone()));
        // The lifecycle reaper's election, else usage accounting's (the
        // same Lease); with neither, every replica serves, safely.
        let queue_leadership = work.keeper_leadership.clone().or_else(|| work.usage_leadership.clone());
        tasks.extend(self.queue_admitter_tasks(queue_leadership));
        tasks.extend(self.companion_keeper_task(work.keeper_leadership));
        tasks.extend(work.reaper.and_then(|r| self.reaper_task(r)));
        tasks.extend(self.usage_recorder_tasks(work.usage_leadership));
        tasks.extend(
            work.mapping_reload
                .map(|MappingReload(run)| Task::forever("team-mapping-reload", run)),
        );
        tasks
    }

    /// `run` on a clone of the plane, boxed, as a task's body.
    fn body<F, Fut>(&self, run: F) -> impl FnMut() -> BoxFuture<'static, ()> + Send + 'static
    where
        F: Fn(Self) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let plane = self.clone();
        move || Box::pin(run(plane.clone()))
    }

    fn quota_gauges_task(&self) -> Task {
        Task::every(
            "quota-gauges",
            QUOTA_GAUGES_EVERY,
            self.body(|plane| async move { plane.quota_gauges().await }),
        )
        .until(self.stopping.clone())
    }

    /// Until the tunnels close: readiness is reported through the drain.
    fn dependency_probes_task(&self) -> Task {
        Task::every(
            "dependency-probes",
            DEPENDENCY_PROBES_EVERY,
            self.body(|plane| async move { plane.probe_dependencies_now().await }),
        )
        .until(self.lifecycle.closing.clone())
    }

    /// Summary rows of denial windows that have closed, every quarter
    /// window (the rest are written at shutdown, by `flush_audit`).
    fn denial_windows_task(&self) -> Task {
        let every = (self.denials.window() / 4).max(Duration::from_secs(1));
        Task::every(
            "denial-windows",
            every,
            self.body(|plane| async move { plane.close_denial_windows().await }),
        )
    }

    /// This replica's uses of clusters, written to the shared ledger every
    /// period and soon after a cluster's first use, once more at the end.
    fn activity_recorder_task(&self) -> Option<Task> {
        let (_, every) = self.activity_ledger.as_ref()?;
        let task = Task::every(
            "activity-recorder",
            *every,
            self.body(|plane| async move { plane.record_uses().await }),
        );
        Some(
            task.woken_by(self.uses.first_use())
                .pause_after(crate::activity::MIN_GAP)
                .final_run()
                .until(self.stopping.clone()),
        )
    }

    /// The companion keeper, when krayne makes NetworkPolicies or Ray
    /// tokens.
    fn companion_keeper_task(&self, leadership: Option<Arc<dyn Leadership>>) -> Option<Task> {
        if self.settings.network_policy.is_none() && self.settings.ray_auth.is_none() {
            return None;
        }
        let seen = Arc::new(tokio::sync::Mutex::new(KeptClusters::default()));
        let task = Task::every(
            "companion-keeper",
            self.settings.companions_every,
            self.body(move |plane| {
                let seen = seen.clone();
                async move { plane.keep_companions_round(&mut *seen.lock().await).await }
            }),
        );
        Some(task.while_leading(leadership))
    }

    /// The RayJob runner, when the server runs RayJobs: under the
    /// companion keeper's election (Ray answers a job submitted twice with
    /// the first, so replicas that overlap do no harm).
    fn rayjob_runner_task(&self, leadership: Option<Arc<dyn Leadership>>) -> Option<Task> {
        self.rayjobs.as_ref()?;
        let kept = Arc::new(tokio::sync::Mutex::new(crate::rayjob_runner::KeptRuns::default()));
        let task = Task::every(
            "rayjob-runner",
            self.settings.rayjobs_every,
            self.body(move |plane| {
                let kept = kept.clone();
                async move { plane.rayjobs_round(&mut *kept.lock().await).await }
            }),
        );
        Some(task.while_leading(leadership).until(self.stopping.clone()))
    }

    /// The admitter (docs/quotas.md), under `leadership`: a round every
    /// [`QUEUE_EVERY`] and soon after every change
    /// the watch cache sees, so a freed quota admits within a moment.
    fn queue_admitter_tasks(&self, leadership: Option<Arc<dyn Leadership>>) -> Vec<Task> {
        let fence = leadership.clone();
        let mut admitter = Task::every(
            "queue-admitter",
            QUEUE_EVERY,
            self.body(move |plane| {
                let fence = fence.clone();
                async move { plane.serve_lines(fence.as_deref()).await }
            }),
        );
        let mut tasks = Vec::new();
        if let Some(feed) = self.store.feed() {
            let (listen, changed) = changes_of(feed, "queue-changes");
            tasks.push(listen);
            admitter = admitter.woken_by(changed).pause_after(QUEUE_PAUSE);
        }
        tasks.push(admitter.while_leading(leadership).until(self.stopping.clone()));
        tasks
    }

    /// The usage recorder, while this replica leads: a round every
    /// [`USAGE_EVERY`] and soon after every change the watch cache sees
    /// (the feed's changes wake it), so an end is recorded within a moment.
    fn usage_recorder_tasks(&self, leadership: Option<Arc<dyn Leadership>>) -> Vec<Task> {
        let (Some(leadership), Some(_), Some(feed)) = (leadership, &self.usage_ledger, self.store.feed()) else {
            return Vec::new();
        };
        let (listen, changed) = changes_of(feed, "usage-changes");
        let recorder = Arc::new(tokio::sync::Mutex::new(crate::UsageRecorder::default()));
        let record = Task::every(
            "usage-recorder",
            USAGE_EVERY,
            self.body(move |plane| {
                let recorder = recorder.clone();
                async move {
                    plane
                        .record_usage_round(&mut *recorder.lock().await, jiff::Timestamp::now())
                        .await;
                }
            }),
        )
        .woken_by(changed)
        .pause_after(USAGE_PAUSE)
        .while_leading(Some(leadership));
        vec![listen, record]
    }

    /// The lifecycle reaper, while this replica leads.
    fn reaper_task(&self, work: ReaperWork) -> Option<Task> {
        if work.mode == LifecycleMode::Off {
            return None;
        }
        let (mode, leadership) = (work.mode, work.leadership);
        let elected = leadership.clone();
        let task = Task::every(
            "lifecycle-reaper",
            work.every,
            self.body(move |plane| {
                let leadership = leadership.clone();
                async move {
                    plane.cache_listed_within(work.every).await;
                    plane.reap(mode, leadership.as_ref(), leadership.now()).await;
                }
            }),
        );
        Some(task.while_leading(Some(elected)))
    }
}
