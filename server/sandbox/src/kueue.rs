//! Kueue v0.19.2, as far as KubeRay's RayClusters and RayJobs meet it
//! (`pkg/controller/jobs/raycluster`, `pkg/controller/jobs/rayjob`, the
//! scheduler, the visibility API), so krayne can be tested against a
//! platform that runs Kueue:
//!
//! - The webhook: a RayCluster or RayJob labelled
//!   `kueue.x-k8s.io/queue-name` is created suspended.
//! - The job reconcilers: each such RayCluster (but one a RayJob owns: its
//!   RayJob is the workload) and RayJob gets a Workload, owned by it,
//!   named `raycluster-<name>-<5 chars>` / `rayjob-<name>-<5 chars>`,
//!   `spec.queueName` its label, pod sets `head` (1) and one per worker
//!   group (its `replicas`), each with its pod template (a RayJob's from
//!   its `rayClusterSpec`; krayne's `InteractiveMode` has no submitter
//!   pod set). A RayJob that has ended (`Complete`, `Failed`) finishes its
//!   Workload (`Finished`), which then holds no quota.
//! - The scheduler, per ClusterQueue: pending Workloads of the LocalQueues
//!   that point at it, oldest first (`StrictFIFO`: none past the first that
//!   does not fit; `BestEffortFIFO`: the others try), each resource from
//!   the first flavor that has it; a ClusterQueue may borrow what others of
//!   its cohort (`spec.cohortName`) leave unused, up to its
//!   `borrowingLimit`. Admitted: `status.admission`, conditions
//!   `QuotaReserved` and `Admitted`, the RayCluster un-suspended. Not: a
//!   `QuotaReserved=False` (`Pending`) condition saying what is short.
//! - Reclaim within the cohort (`preemption.reclaimWithinCohort` other
//!   than `Never`): a Workload that fits its own ClusterQueue's nominal
//!   quota once others give back what they borrowed evicts the latest
//!   admitted borrowers (`Evicted`, reason `Preempted`; their RayClusters
//!   suspended again, their Workloads pending again).
//! - The visibility API: a LocalQueue's pending Workloads in order, with
//!   `positionInLocalQueue` and `positionInClusterQueue` (0-based).
//!
//! Priorities, fair sharing, admission checks, topology and partial
//! admission are not simulated.

use std::{
    collections::{BTreeMap, HashMap},
    sync::Arc,
    time::Duration,
};

use axum::{
    Json,
    extract::{Path, State},
};
use serde_json::{Value, json};
use tokio::sync::{broadcast::error::RecvError, watch};

use super::{
    ApiError, Resource,
    nodes::amount,
    state::Shared,
    store::{Store, WriteOpts, meta_str, now},
};

/// The label naming a RayCluster's LocalQueue.
pub(super) const QUEUE_LABEL: &str = "kueue.x-k8s.io/queue-name";

/// Kueue's webhook: a RayCluster or RayJob created for a queue starts
/// suspended, so none of its pods run before its Workload is admitted.
pub(super) fn default_on_create(r: Resource, object: &mut Value) {
    let for_queue = object["metadata"]["labels"][QUEUE_LABEL]
        .as_str()
        .is_some_and(|q| !q.is_empty());
    if matches!(r, Resource::RayCluster | Resource::RayJob)
        && for_queue
        && let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut)
    {
        spec.insert("suspend".into(), json!(true));
    }
}

/// Runs Kueue's controllers until `stop` changes: after every change to a
/// RayCluster or a Kueue object, and every `poll`.
pub(super) async fn run(store: Arc<Store>, poll: Duration, mut stop: watch::Receiver<bool>) {
    let mut changes = store.subscribe();
    let mut ticks = tokio::time::interval(poll.max(Duration::from_millis(20)));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            change = changes.recv() => match change {
                Ok(change) if concerns_kueue(change.resource) => reconcile(&store),
                Ok(_) => {}
                Err(RecvError::Lagged(_)) => reconcile(&store),
                Err(RecvError::Closed) => return,
            },
            _ = ticks.tick() => reconcile(&store),
            _ = stop.changed() => return,
        }
    }
}

fn concerns_kueue(r: Resource) -> bool {
    matches!(
        r,
        Resource::RayCluster
            | Resource::RayJob
            | Resource::ResourceFlavor
            | Resource::ClusterQueue
            | Resource::LocalQueue
            | Resource::Workload
    )
}

/// One pass: Workloads for RayClusters and RayJobs (those of ended
/// RayJobs finished), then each ClusterQueue scheduled. Writes only what
/// changes, so passes settle.
fn reconcile(store: &Store) {
    make_workloads(store);
    finish_workloads(store);
    let world = World::read(store);
    for cq in world.queues.keys() {
        schedule(store, &world, cq);
    }
}

/// A Workload for each queued RayCluster (not a RayJob's: the RayJob is
/// the workload) and RayJob that has none. The garbage collector removes
/// a Workload with its owner.
fn make_workloads(store: &Store) {
    let queued = |o: &Value| {
        o["metadata"]["labels"][QUEUE_LABEL]
            .as_str()
            .is_some_and(|q| !q.is_empty())
            && o["metadata"]["deletionTimestamp"].is_null()
    };
    let (clusters, _) = store.list(Resource::RayCluster, None, |c| {
        queued(c) && c["metadata"]["ownerReferences"][0]["kind"] != "RayJob"
    });
    let (jobs, _) = store.list(Resource::RayJob, None, queued);
    let (workloads, _) = store.list(Resource::Workload, None, |_| true);
    let owner_of = |w: &Value| w["metadata"]["ownerReferences"][0]["uid"].as_str().map(str::to_owned);
    let owners = clusters.iter().map(|c| (c, "RayCluster", &c["spec"]));
    let owners = owners.chain(jobs.iter().map(|j| (j, "RayJob", &j["spec"]["rayClusterSpec"])));
    for (owner, kind, cluster_spec) in owners {
        let uid = meta_str(owner, "uid");
        if workloads.iter().any(|w| owner_of(w).as_deref() == Some(uid)) {
            continue;
        }
        let ns = meta_str(owner, "namespace");
        let workload = workload_for(owner, kind, cluster_spec);
        let _ = store.create(Resource::Workload, ns, workload, WriteOpts::default());
    }
}

/// The Workload Kueue's RayCluster (or RayJob) integration makes for
/// `owner`, whose cluster is `spec`.
fn workload_for(owner: &Value, kind: &str, spec: &Value) -> Value {
    let (name, uid) = (meta_str(owner, "name"), meta_str(owner, "uid"));
    let mut pod_sets = vec![json!({"name": "head", "count": 1, "template": spec["headGroupSpec"]["template"]})];
    for group in spec["workerGroupSpecs"].as_array().into_iter().flatten() {
        pod_sets.push(json!({
            "name": group["groupName"].as_str().unwrap_or("workers").to_lowercase(),
            "count": group["replicas"].as_i64().unwrap_or(0).max(0),
            "template": group["template"],
        }));
    }
    let hash: String = uid.chars().filter(char::is_ascii_hexdigit).take(5).collect();
    json!({
        "metadata": {
            "name": format!("{}-{name}-{hash}", kind.to_lowercase()),
            "labels": {"kueue.x-k8s.io/job-uid": uid},
            "ownerReferences": [{"apiVersion": "ray.io/v1", "kind": kind, "name": name, "uid": uid,
                                 "controller": true, "blockOwnerDeletion": true}],
        },
        "spec": {
            "queueName": owner["metadata"]["labels"][QUEUE_LABEL],
            "podSets": pod_sets,
            "active": true,
        },
    })
}

/// The Workloads of RayJobs that have ended, `Finished` (as Kueue's
/// `Finished()` of a RayJob: deployment `Complete` or `Failed`).
fn finish_workloads(store: &Store) {
    let (workloads, _) = store.list(Resource::Workload, None, |w| {
        w["metadata"]["ownerReferences"][0]["kind"] == "RayJob" && !finished(w)
    });
    for w in workloads {
        let (ns, owner) = (meta_str(&w, "namespace"), &w["metadata"]["ownerReferences"][0]["name"]);
        let Some(job) = owner.as_str().and_then(|n| store.get(Resource::RayJob, ns, n).ok()) else {
            continue;
        };
        let status = &job["status"];
        if !matches!(status["jobDeploymentStatus"].as_str(), Some("Complete" | "Failed")) {
            continue;
        }
        let succeeded = status["jobStatus"] == "SUCCEEDED";
        let (reason, message) = if succeeded {
            ("Succeeded", "Job finished successfully".to_owned())
        } else {
            ("Failed", status["message"].as_str().unwrap_or("Job failed").to_owned())
        };
        let at = now();
        store.update(Resource::Workload, ns, meta_str(&w, "name"), |w| {
            set_condition(w, "Finished", "True", reason, &message, &at);
        });
    }
}

/// Whether a Workload has finished: it holds no quota and waits for
/// nothing.
fn finished(w: &Value) -> bool {
    w["status"]["conditions"]
        .as_array()
        .is_some_and(|cs| cs.iter().any(|c| c["type"] == "Finished" && c["status"] == "True"))
}

/// What one resource of one flavor allows a ClusterQueue.
#[derive(Debug, Clone, Copy, Default)]
struct Quota {
    nominal: u128,
    /// The most it may borrow from its cohort (`None`: as much as is
    /// unused).
    borrowing: Option<u128>,
}

/// A ClusterQueue as the scheduler reads it.
#[derive(Debug, Default)]
struct Queue {
    cohort: Option<String>,
    strict: bool,
    reclaims: bool,
    /// Resource name → (flavor, quota), the first flavor that has it.
    quotas: BTreeMap<String, (String, Quota)>,
    /// What its admitted Workloads hold, per resource.
    used: BTreeMap<String, u128>,
}

/// Everything the scheduler reads, at one moment.
struct World {
    queues: BTreeMap<String, Queue>,
    /// (namespace, LocalQueue) → its ClusterQueue.
    local_queues: HashMap<(String, String), String>,
    workloads: Vec<Arc<Value>>,
}

impl World {
    fn read(store: &Store) -> Self {
        let (cqs, _) = store.list(Resource::ClusterQueue, None, |_| true);
        let (lqs, _) = store.list(Resource::LocalQueue, None, |_| true);
        let (workloads, _) = store.list(Resource::Workload, None, |w| {
            w["metadata"]["deletionTimestamp"].is_null()
        });
        let local_queues = lqs
            .iter()
            .filter_map(|lq| {
                let cq = lq["spec"]["clusterQueue"].as_str()?;
                Some((
                    (meta_str(lq, "namespace").to_owned(), meta_str(lq, "name").to_owned()),
                    cq.to_owned(),
                ))
            })
            .collect();
        let mut queues: BTreeMap<String, Queue> = cqs
            .iter()
            .map(|cq| (meta_str(cq, "name").to_owned(), queue(cq)))
            .collect();
        for w in workloads.iter().filter(|w| admitted(w) && !finished(w)) {
            let Some(q) = w["status"]["admission"]["clusterQueue"]
                .as_str()
                .and_then(|cq| queues.get_mut(cq))
            else {
                continue;
            };
            for (resource, need) in requests(w) {
                *q.used.entry(resource).or_default() += need;
            }
        }
        Self {
            queues,
            local_queues,
            workloads,
        }
    }

    /// The ClusterQueue a Workload is queued in.
    fn queue_of(&self, w: &Value) -> Option<&str> {
        let key = (
            meta_str(w, "namespace").to_owned(),
            w["spec"]["queueName"].as_str()?.to_owned(),
        );
        self.local_queues.get(&key).map(String::as_str)
    }

    /// What `cq` may still take of `resource`: up to its nominal quota
    /// plus what it may borrow (its `borrowingLimit`, else any), and no
    /// more than its cohort has unused in all (quota a queue lent is in
    /// use until given back).
    fn room(&self, cq: &str, resource: &str, used: &BTreeMap<String, BTreeMap<String, u128>>) -> u128 {
        let Some(q) = self.queues.get(cq) else { return 0 };
        let Some((_, quota)) = q.quotas.get(resource) else {
            return 0;
        };
        let used_of = |name: &str| used.get(name).and_then(|u| u.get(resource)).copied().unwrap_or(0);
        let Some(cohort) = &q.cohort else {
            return quota.nominal.saturating_sub(used_of(cq));
        };
        let members = || {
            self.queues
                .iter()
                .filter(move |(_, other)| other.cohort.as_ref() == Some(cohort))
        };
        let capacity: u128 = members()
            .filter_map(|(_, o)| o.quotas.get(resource))
            .map(|(_, o)| o.nominal)
            .sum();
        let in_use: u128 = members().map(|(name, _)| used_of(name)).sum();
        let own_limit = quota.borrowing.map_or(u128::MAX, |b| quota.nominal + b);
        own_limit
            .saturating_sub(used_of(cq))
            .min(capacity.saturating_sub(in_use))
    }
}

fn queue(cq: &Value) -> Queue {
    let spec = &cq["spec"];
    let mut quotas = BTreeMap::new();
    for group in spec["resourceGroups"].as_array().into_iter().flatten() {
        for flavor in group["flavors"].as_array().into_iter().flatten() {
            let flavor_name = flavor["name"].as_str().unwrap_or_default();
            for r in flavor["resources"].as_array().into_iter().flatten() {
                let name = r["name"].as_str().unwrap_or_default().to_owned();
                let quota = Quota {
                    nominal: amount(&r["nominalQuota"]),
                    borrowing: (!r["borrowingLimit"].is_null()).then(|| amount(&r["borrowingLimit"])),
                };
                quotas.entry(name).or_insert((flavor_name.to_owned(), quota));
            }
        }
    }
    let reclaim = spec["preemption"]["reclaimWithinCohort"].as_str().unwrap_or("Never");
    Queue {
        cohort: spec["cohortName"].as_str().filter(|c| !c.is_empty()).map(str::to_owned),
        strict: spec["queueingStrategy"].as_str().unwrap_or("BestEffortFIFO") == "StrictFIFO",
        reclaims: reclaim != "Never",
        quotas,
        used: BTreeMap::new(),
    }
}

fn admitted(w: &Value) -> bool {
    !w["status"]["admission"].is_null()
}

/// A Workload's requests, per resource, in billionths: each pod set's
/// containers' requests (limits when none) times its count.
fn requests(w: &Value) -> BTreeMap<String, u128> {
    let mut total = BTreeMap::new();
    for set in w["spec"]["podSets"].as_array().into_iter().flatten() {
        let count = u128::try_from(set["count"].as_i64().unwrap_or(0).max(0)).unwrap_or(0);
        for c in set["template"]["spec"]["containers"].as_array().into_iter().flatten() {
            let resources = &c["resources"];
            let asked = if resources["requests"].is_object() {
                &resources["requests"]
            } else {
                &resources["limits"]
            };
            for (name, value) in asked.as_object().into_iter().flatten() {
                *total.entry(name.clone()).or_default() += amount(value) * count;
            }
        }
    }
    total.retain(|_, v| *v > 0);
    total
}

/// The pending Workloads of `cq`, in the order it serves them: oldest
/// first, then by name.
fn pending_of<'w>(world: &'w World, cq: &str) -> Vec<&'w Arc<Value>> {
    let mut pending: Vec<&Arc<Value>> = world
        .workloads
        .iter()
        .filter(|w| !admitted(w) && !finished(w) && w["spec"]["active"] != false && world.queue_of(w) == Some(cq))
        .collect();
    pending.sort_by(|a, b| {
        let key = |w: &Value| {
            (
                meta_str(w, "creationTimestamp").to_owned(),
                meta_str(w, "name").to_owned(),
            )
        };
        key(a).cmp(&key(b))
    });
    pending
}

/// Serves one ClusterQueue's pending Workloads.
fn schedule(store: &Store, world: &World, cq: &str) {
    let Some(queue) = world.queues.get(cq) else { return };
    let mut used: BTreeMap<String, BTreeMap<String, u128>> = world
        .queues
        .iter()
        .map(|(name, q)| (name.clone(), q.used.clone()))
        .collect();
    let mut blocked = false;
    for w in pending_of(world, cq) {
        let asked = requests(w);
        let short = shortage(world, cq, &asked, &used);
        match short {
            None if !blocked => {
                admit(store, w, cq, queue, &asked);
                let mine = used.entry(cq.to_owned()).or_default();
                for (resource, need) in &asked {
                    *mine.entry(resource.clone()).or_default() += need;
                }
            }
            None => set_pending(
                store,
                w,
                &format!("Workload is waiting for the workloads ahead of it in ClusterQueue {cq} (StrictFIFO)"),
            ),
            Some(_) if !blocked && queue.reclaims && reclaim(store, world, cq, &asked, &mut used, w) => {
                admit(store, w, cq, queue, &asked);
                let mine = used.entry(cq.to_owned()).or_default();
                for (resource, need) in &asked {
                    *mine.entry(resource.clone()).or_default() += need;
                }
            }
            Some(message) => {
                set_pending(store, w, &message);
                blocked |= queue.strict;
            }
        }
    }
}

/// Why `asked` does not fit `cq` now (Kueue's wording), if it does not.
fn shortage(
    world: &World,
    cq: &str,
    asked: &BTreeMap<String, u128>,
    used: &BTreeMap<String, BTreeMap<String, u128>>,
) -> Option<String> {
    let queue = world.queues.get(cq)?;
    asked.iter().find_map(|(resource, need)| match queue.quotas.get(resource) {
        None => Some(format!(
            "couldn't assign flavors to pod set head: resource {resource} unavailable in ClusterQueue"
        )),
        Some((flavor, _)) => {
            let room = world.room(cq, resource, used);
            (*need > room).then(|| {
                format!(
                    "couldn't assign flavors to pod set head: insufficient quota for {resource} in flavor {flavor}, {} more needed",
                    whole(need - room)
                )
            })
        }
    })
}

/// An amount in billionths as Kueue prints it (`4`, `1500m`).
fn whole(nanos: u128) -> String {
    if nanos.is_multiple_of(1_000_000_000) {
        (nanos / 1_000_000_000).to_string()
    } else {
        format!("{}m", nanos.div_ceil(1_000_000))
    }
}

/// Admits `w` into `cq`: its admission, its conditions, its RayCluster
/// un-suspended.
fn admit(store: &Store, w: &Value, cq: &str, queue: &Queue, asked: &BTreeMap<String, u128>) {
    let at = now();
    let assignments: Vec<Value> = w["spec"]["podSets"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|set| {
            let flavors: serde_json::Map<String, Value> = asked
                .keys()
                .filter_map(|r| queue.quotas.get(r).map(|(f, _)| (r.clone(), json!(f))))
                .collect();
            json!({"name": set["name"], "flavors": flavors, "count": set["count"]})
        })
        .collect();
    let updated = store.update(Resource::Workload, meta_str(w, "namespace"), meta_str(w, "name"), |w| {
        w["status"]["admission"] = json!({"clusterQueue": cq, "podSetAssignments": assignments});
        set_condition(
            w,
            "QuotaReserved",
            "True",
            "QuotaReserved",
            &format!("Quota reserved in ClusterQueue {cq}"),
            &at,
        );
        set_condition(w, "Admitted", "True", "Admitted", "The workload is admitted", &at);
        let was_evicted = w["status"]["conditions"]
            .as_array()
            .is_some_and(|cs| cs.iter().any(|c| c["type"] == "Evicted"));
        if was_evicted {
            set_condition(
                w,
                "Evicted",
                "False",
                "QuotaReserved",
                "The workload has a reservation again",
                &at,
            );
        }
    });
    if updated.is_some() {
        set_suspend(store, w, false);
    }
}

/// `w` pending, saying why (only when the reason changed).
fn set_pending(store: &Store, w: &Value, message: &str) {
    let at = now();
    store.update(Resource::Workload, meta_str(w, "namespace"), meta_str(w, "name"), |w| {
        set_condition(w, "QuotaReserved", "False", "Pending", message, &at);
    });
}

/// Reclaims quota `cq` lent: when `asked` fits `cq`'s own nominal quota
/// but the cohort's borrowers hold it, evicts the latest admitted of them
/// until it fits (their quota given back in `used`). Whether it fits now.
fn reclaim(
    store: &Store,
    world: &World,
    cq: &str,
    asked: &BTreeMap<String, u128>,
    used: &mut BTreeMap<String, BTreeMap<String, u128>>,
    preemptor: &Value,
) -> bool {
    let Some(queue) = world.queues.get(cq) else {
        return false;
    };
    let Some(cohort) = &queue.cohort else { return false };
    let mine = used.get(cq).cloned().unwrap_or_default();
    let within_own = asked.iter().all(|(r, need)| {
        queue
            .quotas
            .get(r)
            .is_some_and(|(_, q)| mine.get(r).copied().unwrap_or(0) + need <= q.nominal)
    });
    if !within_own {
        return false;
    }
    // Admitted Workloads of the cohort's other ClusterQueues, latest first.
    let mut others: Vec<&Arc<Value>> = world
        .workloads
        .iter()
        .filter(|w| admitted(w) && !finished(w))
        .filter(|w| {
            w["status"]["admission"]["clusterQueue"].as_str().is_some_and(|other| {
                other != cq
                    && world
                        .queues
                        .get(other)
                        .is_some_and(|o| o.cohort.as_ref() == Some(cohort))
            })
        })
        .collect();
    // The latest admitted first; of those admitted together, the newest.
    let order = |w: &Value| {
        (
            admitted_at(w),
            meta_str(w, "creationTimestamp").to_owned(),
            meta_str(w, "name").to_owned(),
        )
    };
    others.sort_by_key(|w| std::cmp::Reverse(order(w)));
    let message = format!(
        "Preempted to accommodate a workload (UID: {}) due to reclamation within the cohort",
        meta_str(preemptor, "uid")
    );
    for victim in others {
        if shortage(world, cq, asked, used).is_none() {
            return true;
        }
        let Some(other) = victim["status"]["admission"]["clusterQueue"].as_str() else {
            continue;
        };
        let Some(o) = world.queues.get(other) else { continue };
        // Only one that borrows what is asked for gives it back.
        let borrows = asked.keys().any(|r| {
            let held = used.get(other).and_then(|u| u.get(r)).copied().unwrap_or(0);
            o.quotas.get(r).is_some_and(|(_, q)| held > q.nominal)
        });
        if !borrows {
            continue;
        }
        let at = now();
        let evicted = store.update(
            Resource::Workload,
            meta_str(victim, "namespace"),
            meta_str(victim, "name"),
            |w| {
                if let Some(status) = w["status"].as_object_mut() {
                    status.remove("admission");
                }
                set_condition(w, "Evicted", "True", "Preempted", &message, &at);
                set_condition(w, "Preempted", "True", "InCohortReclamation", &message, &at);
                set_condition(w, "QuotaReserved", "False", "Preempted", &message, &at);
                set_condition(
                    w,
                    "Admitted",
                    "False",
                    "NoReservation",
                    "The workload has no reservation",
                    &at,
                );
            },
        );
        if evicted.is_some() {
            set_suspend(store, victim, true);
            let theirs = used.entry(other.to_owned()).or_default();
            for (resource, held) in requests(victim) {
                let left = theirs.get(&resource).copied().unwrap_or(0).saturating_sub(held);
                theirs.insert(resource, left);
            }
        }
    }
    shortage(world, cq, asked, used).is_none()
}

fn admitted_at(w: &Value) -> String {
    w["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "Admitted")
        .and_then(|c| c["lastTransitionTime"].as_str())
        .unwrap_or_default()
        .to_owned()
}

/// Sets the RayCluster (or RayJob) owning `w` suspended or not.
fn set_suspend(store: &Store, w: &Value, suspend: bool) {
    let owner = &w["metadata"]["ownerReferences"][0];
    let Some(name) = owner["name"].as_str() else {
        return;
    };
    let kind = if owner["kind"] == "RayJob" {
        Resource::RayJob
    } else {
        Resource::RayCluster
    };
    store.update(kind, meta_str(w, "namespace"), name, |o| {
        o["spec"]["suspend"] = json!(suspend);
    });
}

/// Sets a condition, moving its transition time only when its status
/// changes (and touching nothing when nothing changes).
fn set_condition(w: &mut Value, kind: &str, status: &str, reason: &str, message: &str, at: &str) {
    if !w["status"]["conditions"].is_array() {
        w["status"]["conditions"] = json!([]);
    }
    let Some(conditions) = w["status"]["conditions"].as_array_mut() else {
        return;
    };
    match conditions.iter_mut().find(|c| c["type"] == kind) {
        Some(c) => {
            if c["status"] != status {
                c["lastTransitionTime"] = json!(at);
            }
            c["status"] = json!(status);
            c["reason"] = json!(reason);
            c["message"] = json!(message);
        }
        None => conditions.push(
            json!({"type": kind, "status": status, "reason": reason, "message": message,
                                        "lastTransitionTime": at, "observedGeneration": 1}),
        ),
    }
}

/// `GET /apis/visibility.kueue.x-k8s.io/{v1beta1,v1beta2}/namespaces/{ns}/localqueues/{lq}/pendingworkloads`:
/// the LocalQueue's pending Workloads in the order its ClusterQueue serves
/// them (`PendingWorkloadsSummary`).
pub(super) async fn pending_workloads(
    State(s): State<Shared>,
    Path((version, ns, lq)): Path<(String, String, String)>,
) -> Result<Json<Value>, ApiError> {
    if version != "v1beta1" && version != "v1beta2" {
        return Err(ApiError::not_found_path());
    }
    let world = World::read(&s.store);
    let cq = world
        .local_queues
        .get(&(ns.clone(), lq.clone()))
        .ok_or_else(|| ApiError::not_found(Resource::LocalQueue, &lq))?;
    let mut in_local = 0;
    let mut items = Vec::new();
    for (in_cluster, w) in pending_of(&world, cq).into_iter().enumerate() {
        if meta_str(w, "namespace") != ns || w["spec"]["queueName"] != lq.as_str() {
            continue;
        }
        let meta = &w["metadata"];
        items.push(json!({
            "metadata": {"name": meta["name"], "namespace": meta["namespace"], "creationTimestamp": meta["creationTimestamp"],
                         "ownerReferences": meta["ownerReferences"]},
            "priority": 0,
            "localQueueName": lq,
            "positionInClusterQueue": in_cluster,
            "positionInLocalQueue": in_local,
        }));
        in_local += 1;
    }
    Ok(Json(json!({
        "kind": "PendingWorkloadsSummary",
        "apiVersion": format!("visibility.kueue.x-k8s.io/{version}"),
        "metadata": {"creationTimestamp": null},
        "items": items,
    })))
}
