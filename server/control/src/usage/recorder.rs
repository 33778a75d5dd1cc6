//! The usage recorder: the leader's record of every Ray pod's running
//! life and every cluster's existence and suspensions, from the watch
//! cache, into the usage ledger. A round compares what runs now with the
//! intervals it holds open: what began is opened (a pod from its
//! containers' start, a cluster from its creation), what ended is closed
//! (a pod at its containers' end when Kubernetes says it, else when the
//! round saw it gone). Rounds run on every change the cache sees, so an
//! end is recorded within a moment of it.
//!
//! Nothing lost, nothing twice: an interval's key (kind and uid) is
//! written once; what a round could not write is kept and written by the
//! next; a recorder that starts (or leads again) reads the open intervals
//! back and closes those whose object is gone at the last time any
//! recorder saw every pod, marked estimated.

use std::{
    collections::{HashMap, HashSet},
    sync::Arc,
    time::Duration,
};

use jiff::Timestamp;

use super::key::IntervalKey;
use crate::{
    ControlPlane,
    domain::{ObservedCluster, PodCharge, Shared, UsageClose, UsageInterval, UsageKind},
    manifest::{ANNOTATION_CREATED_BY, LABEL_GROUP},
};

/// Open intervals and writes not yet made, kept between rounds.
///
/// At 200 000 pods the open map is the recorder's memory: an entry is its
/// key, the round that last saw it, what it charges and a pointer to its
/// namespace's [`Scope`], shared by every interval of that namespace.
#[derive(Debug, Default)]
pub struct UsageRecorder {
    /// The intervals open, by key.
    open: HashMap<IntervalKey, Charged>,
    /// Each namespace's scope as rounds last found it (a namespace whose
    /// teams change gets a new one; intervals keep the one they began
    /// with).
    scopes: HashMap<String, Arc<Scope>>,
    /// Rounds run, to mark what a round saw.
    round: u64,
    /// When the last round ran (`None`: the open intervals are to be
    /// read back from the ledger first).
    last_round: Option<Timestamp>,
    opens: Vec<UsageInterval>,
    closes: Vec<UsageClose>,
    /// What the counters have counted, by namespace and team: CPU
    /// seconds, memory byte-seconds, GPU seconds.
    counted: HashMap<(String, String), [f64; 3]>,
}

/// What a round finds live that is not yet open and known (see
/// `live_usage`); what is open and known is marked in the open map.
#[derive(Default)]
struct Live {
    /// Whole intervals, with their key and scope: new, or read back
    /// without a charge.
    fresh: Vec<(IntervalKey, UsageInterval, Arc<Scope>)>,
    /// The end Kubernetes shows of each pod that ended, by key.
    finished: HashMap<IntervalKey, Timestamp>,
}

/// One round, as its slices share it.
struct Round {
    number: u64,
    now: Timestamp,
    /// Suspension intervals open, by cluster uid.
    suspensions: HashMap<String, IntervalKey>,
    /// The namespaces seen so far.
    namespaces: HashSet<String>,
}

/// An open interval.
#[derive(Debug, Clone, Default)]
struct Charged {
    /// Its namespace and teams; `None` for an interval read back from
    /// the ledger and not yet seen by a round.
    scope: Option<Arc<Scope>>,
    /// What it charges, for the counters (shared: a group's pods charge
    /// alike).
    charge: Shared<PodCharge>,
    /// The last round that saw it live.
    seen: u64,
}

/// A namespace and the teams that edit it, one per namespace a round.
#[derive(Debug, Default)]
struct Scope {
    namespace: String,
    teams: Vec<String>,
}

/// A round longer ago than this means the recorder did not run (it did not
/// lead): what it holds is read back from the ledger.
const STALE_AFTER: Duration = Duration::from_secs(45);
/// The most writes kept while the ledger cannot be written.
const MAX_PENDING: usize = 1_000_000;
/// Clusters a round looks at before writing what it found new.
const CLUSTERS_A_SLICE: usize = 500;
/// New intervals held before they are written within a round.
const WRITE_AFTER: usize = 5_000;

impl ControlPlane {
    /// One round of the usage recorder at `now`.
    pub(crate) async fn record_usage_round(&self, recorder: &mut UsageRecorder, now: Timestamp) {
        let Some(ledger) = self.usage_ledger.clone() else {
            return;
        };
        let Some(feed) = self.store.feed().filter(|f| f.ready()) else {
            return;
        };
        let stale = recorder
            .last_round
            .is_none_or(|at| now.duration_since(at).as_secs_f64() > STALE_AFTER.as_secs_f64());
        let mut estimate_at = None;
        if stale {
            let (keys, seen) = match (ledger.open_keys().await, ledger.last_seen().await) {
                (Ok(keys), Ok(seen)) => (keys, seen),
                (Err(e), _) | (_, Err(e)) => {
                    tracing::warn!(error = %e, "usage: the open intervals cannot be read; recording waits");
                    return;
                }
            };
            let pending: HashSet<IntervalKey> = recorder.opens.iter().map(|i| IntervalKey::parse(&i.key)).collect();
            recorder.open.retain(|k, _| pending.contains(k));
            for key in keys {
                recorder.open.entry(IntervalKey::parse(&key)).or_default();
            }
            estimate_at = Some(seen.unwrap_or(now).min(now));
        }
        if let Some(last) = recorder.last_round {
            Self::count_usage(recorder, now.duration_since(last).as_secs_f64().max(0.0));
        }
        recorder.round += 1;
        let round = recorder.round;
        // A round goes over the clusters a slice at a time and writes what
        // is new as it goes: a first round at 200 000 pods would otherwise
        // hold an interval of owned strings for each of them, twice.
        let clusters = feed.clusters(None);
        let mut this = Round {
            number: round,
            now,
            suspensions: recorder
                .open
                .keys()
                .filter_map(|k| Some((k.suspended_cluster()?.to_owned(), k.clone())))
                .collect(),
            namespaces: HashSet::new(),
        };
        let mut finished = HashMap::new();
        let mut writable = true;
        for slice in clusters.chunks(CLUSTERS_A_SLICE) {
            let live = self.live_usage(slice, feed.as_ref(), recorder, &mut this);
            finished.extend(live.finished);
            for (key, interval, scope) in live.fresh {
                let charged = Charged {
                    scope: Some(scope),
                    charge: Shared::new(interval.charge.clone()),
                    seen: round,
                };
                match recorder.open.get_mut(&key) {
                    // Read back from the ledger: what it charges is known now.
                    Some(known) => *known = charged,
                    None => {
                        recorder.open.insert(key, charged);
                        recorder.opens.push(interval);
                    }
                }
            }
            if writable && recorder.opens.len() >= WRITE_AFTER {
                match ledger.open(&recorder.opens).await {
                    Ok(()) => recorder.opens.clear(),
                    Err(e) => {
                        tracing::warn!(error = %e, held = recorder.opens.len(), "usage: intervals cannot be written; kept for the end of the round");
                        writable = false;
                    }
                }
            }
        }
        drop(clusters);
        recorder
            .scopes
            .retain(|namespace, _| this.namespaces.contains(namespace));
        let ended: Vec<IntervalKey> = recorder
            .open
            .iter()
            .filter(|(_, c)| c.seen != round)
            .map(|(k, _)| k.clone())
            .collect();
        for key in ended {
            recorder.open.remove(&key);
            let (ended_at, estimated) = match (finished.get(&key).copied(), estimate_at) {
                (Some(at), _) => (at, false),
                (None, Some(at)) => (at, true),
                (None, None) => (now, false),
            };
            recorder.closes.push(UsageClose {
                key: key.to_string(),
                ended_at,
                estimated,
            });
        }
        recorder.last_round = Some(now);
        let written = async {
            ledger.open(&recorder.opens).await?;
            ledger.close(&recorder.closes).await?;
            ledger.mark_seen(now).await
        };
        match written.await {
            Ok(()) => {
                recorder.opens.clear();
                recorder.closes.clear();
            }
            Err(e) => {
                let held = recorder.opens.len() + recorder.closes.len();
                tracing::warn!(error = %e, held, "usage: intervals cannot be written; kept for the next round");
                if held > MAX_PENDING {
                    tracing::error!(held, "usage: too many unwritten intervals; the oldest are dropped");
                    let excess = recorder.closes.len().saturating_sub(MAX_PENDING / 2);
                    recorder.closes.drain(..excess);
                }
            }
        }
    }

    /// What is live now: intervals already open and known are marked
    /// seen by this `round` in `open` (a round allocates nothing for them);
    /// whole intervals only for the rest (new, or read back from the
    /// ledger without their charge), and the end of each pod Kubernetes
    /// still shows ended (its containers' last end), by key.
    fn live_usage(
        &self,
        clusters: &[Arc<ObservedCluster>],
        feed: &dyn crate::domain::ClusterFeed,
        recorder: &mut UsageRecorder,
        this: &mut Round,
    ) -> Live {
        let UsageRecorder { open, scopes, .. } = recorder;
        let (round, now) = (this.number, this.now);
        let mut live = Live::default();
        // An interval open and known needs no more than a mark.
        let mut known = |key: &IntervalKey| -> bool {
            match open.get_mut(key) {
                Some(c) if c.scope.is_some() => {
                    c.seen = round;
                    true
                }
                _ => false,
            }
        };
        for cluster in clusters {
            let Some(uid) = cluster.metadata.uid.as_ref() else {
                continue;
            };
            let namespace = cluster.metadata.namespace.as_str();
            if !this.namespaces.contains(namespace) {
                this.namespaces.insert(namespace.to_owned());
                let teams = self
                    .authenticator
                    .as_ref()
                    .map(|a| a.editors_of(namespace))
                    .unwrap_or_default();
                if scopes.get(namespace).is_none_or(|s| s.teams != teams) {
                    let namespace = namespace.to_owned();
                    scopes.insert(namespace.clone(), Arc::new(Scope { namespace, teams }));
                }
            }
            let Some(scope) = scopes.get(namespace).cloned() else {
                continue;
            };
            let base = |kind: UsageKind, key: &IntervalKey, started_at: Timestamp| UsageInterval {
                key: key.to_string(),
                kind,
                namespace: namespace.to_owned(),
                cluster: cluster.metadata.name.as_str().to_owned(),
                worker_group: None,
                creator: creator(cluster),
                teams: scope.teams.clone(),
                charge: PodCharge::default(),
                started_at,
                ended_at: None,
                estimated: false,
            };
            let created = time(cluster.metadata.creation_timestamp.as_deref()).unwrap_or(now);
            let key = IntervalKey::cluster(uid);
            if !known(&key) {
                live.fresh
                    .push((key.clone(), base(UsageKind::Cluster, &key, created), scope.clone()));
            }
            if cluster.spec.suspend == Some(true) {
                // One interval per suspension: its key names when it began.
                let key = match this.suspensions.get(&*uid.text()) {
                    Some(k) => k.clone(),
                    None => IntervalKey::suspension(uid, now.as_millisecond()),
                };
                if !known(&key) {
                    live.fresh
                        .push((key.clone(), base(UsageKind::Suspended, &key, now), scope.clone()));
                }
            }
            for pod in feed.pods(namespace, cluster.metadata.name.as_str()) {
                let Some(pod_uid) = pod.metadata.uid.as_ref() else {
                    continue;
                };
                let key = IntervalKey::pod(pod_uid);
                if pod.status.phase.as_deref() != Some("Running") {
                    if let Some(at) = time(pod.status.finished_at()) {
                        live.finished.insert(key, at);
                    }
                    continue;
                }
                if known(&key) {
                    continue;
                }
                let started = time(pod.status.running_since()).unwrap_or(now);
                let mut interval = base(UsageKind::Pod, &key, started);
                interval.worker_group = pod.metadata.labels.get(LABEL_GROUP).map(|g| g.as_str().to_owned());
                interval.charge = (*pod.spec.charge).clone();
                live.fresh.push((key, interval, scope.clone()));
            }
        }
        live
    }

    /// Adds `seconds` of every open pod interval's charge to the
    /// counters (which only go up; a new leader's start from zero, as a
    /// restarted process's do).
    fn count_usage(recorder: &mut UsageRecorder, seconds: f64) {
        // Summed by scope first: a few thousand namespaces, not an entry
        // (and its strings) per pod.
        let mut by_scope: HashMap<*const Scope, (&Arc<Scope>, [f64; 3])> = HashMap::new();
        for charged in recorder.open.values() {
            let (c, Some(scope)) = (&charged.charge, &charged.scope) else {
                continue;
            };
            if c.cpu_millis == 0 && c.memory_bytes == 0 && c.gpus == 0 {
                continue;
            }
            let sum = &mut by_scope.entry(Arc::as_ptr(scope)).or_insert((scope, [0.0; 3])).1;
            sum[0] += c.cpu_millis as f64 / 1000.0 * seconds;
            sum[1] += c.memory_bytes as f64 * seconds;
            sum[2] += c.gpus as f64 * seconds;
        }
        for (scope, [cpu, memory, gpus]) in by_scope.into_values() {
            let teams: Vec<&str> = if scope.teams.is_empty() {
                vec![""]
            } else {
                scope.teams.iter().map(String::as_str).collect()
            };
            for team in teams {
                let sum = recorder
                    .counted
                    .entry((scope.namespace.clone(), team.to_owned()))
                    .or_default();
                sum[0] += cpu;
                sum[1] += memory;
                sum[2] += gpus;
            }
        }
        for ((namespace, team), [cpu, memory, gpus]) in &recorder.counted {
            let labels = [("namespace", namespace.clone()), ("team", team.clone())];
            metrics::counter!("krayne_usage_cpu_seconds_total", &labels).absolute(cpu.floor() as u64);
            metrics::counter!("krayne_usage_memory_byte_seconds_total", &labels).absolute(memory.floor() as u64);
            metrics::counter!("krayne_usage_gpu_seconds_total", &labels).absolute(gpus.floor() as u64);
        }
    }
}

fn creator(cluster: &ObservedCluster) -> Option<String> {
    cluster
        .metadata
        .annotations
        .get(ANNOTATION_CREATED_BY)
        .map(|c| c.as_str().to_owned())
}

fn time(text: Option<&str>) -> Option<Timestamp> {
    text?.parse().ok()
}
