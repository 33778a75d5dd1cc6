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
    time::Duration,
};

use jiff::Timestamp;

use crate::{
    ControlPlane,
    domain::{ObservedCluster, PodCharge, UsageClose, UsageInterval, UsageKind},
    manifest::{ANNOTATION_CREATED_BY, LABEL_GROUP},
};

/// Open intervals and writes not yet made, kept between rounds.
#[derive(Debug, Default)]
pub struct UsageRecorder {
    /// Keys of the intervals open, with the namespace and teams of each
    /// and what it charges (for the counters).
    open: HashMap<String, Charged>,
    /// When the last round ran (`None`: the open intervals are to be
    /// read back from the ledger first).
    last_round: Option<Timestamp>,
    opens: Vec<UsageInterval>,
    closes: Vec<UsageClose>,
    /// What the counters have counted, by namespace and team: CPU
    /// seconds, memory byte-seconds, GPU seconds.
    counted: HashMap<(String, String), [f64; 3]>,
}

/// What a round finds live (see `live_usage`).
#[derive(Default)]
struct Live<'o> {
    /// Keys of intervals open and known, borrowed from the open map.
    kept: HashSet<&'o str>,
    /// Whole intervals for the rest: new, or read back without a charge.
    fresh: Vec<UsageInterval>,
    /// The end Kubernetes shows of each pod that ended, by key.
    finished: HashMap<String, Timestamp>,
}

/// What an open interval charges, for the counters.
#[derive(Debug, Clone, Default)]
struct Charged {
    namespace: String,
    teams: Vec<String>,
    charge: PodCharge,
}

/// A round longer ago than this means the recorder did not run (it did not
/// lead): what it holds is read back from the ledger.
const STALE_AFTER: Duration = Duration::from_secs(45);
/// The most writes kept while the ledger cannot be written.
const MAX_PENDING: usize = 1_000_000;

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
            let pending: HashSet<&str> = recorder.opens.iter().map(|i| i.key.as_str()).collect();
            recorder.open.retain(|k, _| pending.contains(k.as_str()));
            for key in keys {
                recorder.open.entry(key).or_default();
            }
            estimate_at = Some(seen.unwrap_or(now).min(now));
        }
        if let Some(last) = recorder.last_round {
            Self::count_usage(recorder, now.duration_since(last).as_secs_f64().max(0.0));
        }
        let Live { kept, fresh, finished } = self.live_usage(feed.as_ref(), &recorder.open, now);
        let fresh_keys: HashSet<&str> = fresh.iter().map(|i| i.key.as_str()).collect();
        let ended: Vec<String> = recorder
            .open
            .keys()
            .filter(|k| !kept.contains(k.as_str()) && !fresh_keys.contains(k.as_str()))
            .cloned()
            .collect();
        drop((kept, fresh_keys));
        for interval in fresh {
            let charged = Charged {
                namespace: interval.namespace.clone(),
                teams: interval.teams.clone(),
                charge: interval.charge.clone(),
            };
            match recorder.open.get_mut(&interval.key) {
                // Read back from the ledger: what it charges is known now.
                Some(known) => *known = charged,
                None => {
                    recorder.open.insert(interval.key.clone(), charged);
                    recorder.opens.push(interval);
                }
            }
        }
        for key in ended {
            recorder.open.remove(&key);
            let (ended_at, estimated) = match (finished.get(&key).copied(), estimate_at) {
                (Some(at), _) => (at, false),
                (None, Some(at)) => (at, true),
                (None, None) => (now, false),
            };
            recorder.closes.push(UsageClose {
                key,
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

    /// What is live now: the keys of intervals already open and known
    /// (borrowed from `open`: a round allocates nothing for them), whole
    /// intervals only for the rest (new, or read back from the ledger
    /// without their charge), and the end of each pod Kubernetes still
    /// shows ended (its containers' last end), by key.
    fn live_usage<'o>(
        &self,
        feed: &dyn crate::domain::ClusterFeed,
        open: &'o HashMap<String, Charged>,
        now: Timestamp,
    ) -> Live<'o> {
        let suspensions: HashMap<&str, &str> = open
            .keys()
            .filter_map(|k| {
                let rest = k.strip_prefix("suspended/")?;
                Some((rest.split('/').next()?, k.as_str()))
            })
            .collect();
        let mut live = Live::default();
        // An interval open and known needs no more than its key noted.
        let known = move |key: &str| -> Option<&'o str> {
            open.get_key_value(key)
                .filter(|(_, c)| !c.namespace.is_empty())
                .map(|(k, _)| k.as_str())
        };
        let mut teams_of: HashMap<String, Vec<String>> = HashMap::new();
        for cluster in feed.clusters(None) {
            let Some(uid) = cluster.metadata.uid.as_deref() else {
                continue;
            };
            let namespace = cluster.metadata.namespace.as_str();
            let teams = teams_of
                .entry(namespace.to_owned())
                .or_insert_with(|| {
                    self.authenticator
                        .as_ref()
                        .map(|a| a.editors_of(namespace))
                        .unwrap_or_default()
                })
                .clone();
            let base = |kind: UsageKind, key: String, started_at: Timestamp| UsageInterval {
                key,
                kind,
                namespace: namespace.to_owned(),
                cluster: cluster.metadata.name.as_str().to_owned(),
                worker_group: None,
                creator: creator(&cluster),
                teams: teams.clone(),
                charge: PodCharge::default(),
                started_at,
                ended_at: None,
                estimated: false,
            };
            let created = time(cluster.metadata.creation_timestamp.as_deref()).unwrap_or(now);
            let key = format!("cluster/{uid}");
            match known(&key) {
                Some(k) => _ = live.kept.insert(k),
                None => live.fresh.push(base(UsageKind::Cluster, key, created)),
            }
            if cluster.spec.suspend == Some(true) {
                // One interval per suspension: its key names when it began.
                let key = suspensions.get(uid).map_or_else(
                    || format!("suspended/{uid}/{}", now.as_millisecond()),
                    |k| (*k).to_owned(),
                );
                match known(&key) {
                    Some(k) => _ = live.kept.insert(k),
                    None => live.fresh.push(base(UsageKind::Suspended, key, now)),
                }
            }
            for pod in feed.pods(namespace, cluster.metadata.name.as_str()) {
                let Some(pod_uid) = pod.metadata.uid.as_deref() else {
                    continue;
                };
                let key = format!("pod/{pod_uid}");
                if pod.status.phase.as_deref() != Some("Running") {
                    if let Some(at) = time(pod.status.finished_at()) {
                        live.finished.insert(key, at);
                    }
                    continue;
                }
                if let Some(k) = known(&key) {
                    live.kept.insert(k);
                    continue;
                }
                let started = time(pod.status.running_since()).unwrap_or(now);
                let mut interval = base(UsageKind::Pod, key, started);
                interval.worker_group = pod.metadata.labels.get(LABEL_GROUP).map(|g| g.as_str().to_owned());
                interval.charge = pod.spec.charge.clone();
                live.fresh.push(interval);
            }
        }
        live
    }

    /// Adds `seconds` of every open pod interval's charge to the
    /// counters (which only go up; a new leader's start from zero, as a
    /// restarted process's do).
    fn count_usage(recorder: &mut UsageRecorder, seconds: f64) {
        for charged in recorder.open.values() {
            let c = &charged.charge;
            if c.cpu_millis == 0 && c.memory_bytes == 0 && c.gpus == 0 {
                continue;
            }
            let teams: Vec<&str> = if charged.teams.is_empty() {
                vec![""]
            } else {
                charged.teams.iter().map(String::as_str).collect()
            };
            for team in teams {
                let sum = recorder
                    .counted
                    .entry((charged.namespace.clone(), team.to_owned()))
                    .or_default();
                sum[0] += c.cpu_millis as f64 / 1000.0 * seconds;
                sum[1] += c.memory_bytes as f64 * seconds;
                sum[2] += c.gpus as f64 * seconds;
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
