//! Kueue, where the platform runs it (docs/kueue.md): the parts of its
//! Workloads and of its visibility API krayne reads, parsed into bounded
//! types, and what they mean for a RayCluster's place in line. Pure.

use serde::Deserialize;

use super::text::{bounded, escape_controls};

/// `text` kept: controls escaped, cut to `max` bytes.
fn keep(text: &str, max: usize) -> String {
    bounded(&escape_controls(text), max).into_owned()
}

/// The most of a Kueue message krayne keeps (they name resources, flavors
/// and amounts: a few hundred bytes).
pub const MAX_KUEUE_MESSAGE: usize = 512;

/// A Workload, the parts krayne reads.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ObservedWorkload {
    /// The uid of the RayCluster (or RayJob) owning it.
    pub owner_uid: Option<String>,
    /// When Kueue made it (RFC 3339).
    pub created_at: Option<String>,
    /// Whether a ClusterQueue holds quota for it (`status.admission`).
    pub admitted: bool,
    /// Why it waits: `QuotaReserved=False`'s message.
    pub pending_message: Option<String>,
    /// Why it was last taken back, while it waits again: `Evicted=True`'s
    /// reason (`Preempted`, `InactiveWorkload`, …) and message, and when.
    pub evicted: Option<(String, String, Option<String>)>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawWorkload {
    #[serde(default)]
    metadata: RawMeta,
    #[serde(default)]
    status: RawStatus,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawMeta {
    #[serde(default)]
    creation_timestamp: Option<String>,
    #[serde(default)]
    owner_references: Vec<RawOwner>,
}

#[derive(Deserialize)]
struct RawOwner {
    #[serde(default)]
    kind: String,
    #[serde(default)]
    uid: String,
}

#[derive(Default, Deserialize)]
struct RawStatus {
    #[serde(default)]
    admission: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    conditions: Vec<RawCondition>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawCondition {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    status: String,
    #[serde(default)]
    reason: String,
    #[serde(default)]
    message: String,
    #[serde(default)]
    last_transition_time: Option<String>,
}

impl ObservedWorkload {
    /// Reads a Workload object (as Kubernetes sends it); `None` when it is
    /// not one.
    pub fn read(object: &serde_json::Value) -> Option<Self> {
        let raw = RawWorkload::deserialize(object).ok()?;
        let condition = |kind: &str, status: &str| {
            raw.status
                .conditions
                .iter()
                .find(|c| c.kind == kind && c.status == status)
        };
        Some(Self {
            owner_uid: raw
                .metadata
                .owner_references
                .iter()
                .find(|o| is_job(&o.kind))
                .map(|o| keep(&o.uid, 64)),
            created_at: raw.metadata.creation_timestamp.map(|t| keep(&t, 64)),
            admitted: raw.status.admission.is_some(),
            pending_message: condition("QuotaReserved", "False").map(|c| keep(&c.message, MAX_KUEUE_MESSAGE)),
            evicted: condition("Evicted", "True").map(|c| {
                (
                    keep(&c.reason, 64),
                    keep(&c.message, MAX_KUEUE_MESSAGE),
                    c.last_transition_time.as_deref().map(|t| keep(t, 64)),
                )
            }),
        })
    }
}

/// One pending Workload of a LocalQueue, as Kueue's visibility API lists
/// it: its owner's uid and its place (0-based).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingWorkload {
    /// The uid of the RayCluster (or RayJob) owning it.
    pub owner_uid: String,
    /// Its place in its LocalQueue, 0-based.
    pub position_in_local_queue: u32,
}

/// Whether an owner of a Workload is a job krayne makes: a RayCluster, or
/// a RayJob (Kueue's RayJob integration makes the RayJob the workload).
fn is_job(kind: &str) -> bool {
    matches!(kind, "RayCluster" | "RayJob")
}

/// The most clusters whose Workloads one read selects (by their
/// `kueue.x-k8s.io/job-uid` label).
pub const UIDS_PER_READ: usize = 100;

/// Kueue's label on a Workload: the uid of the job (RayCluster) it is for.
pub const JOB_UID_LABEL: &str = "kueue.x-k8s.io/job-uid";

/// The most pending Workloads of one LocalQueue krayne reads.
pub const MAX_PENDING_READ: usize = 1000;

/// Reads a `PendingWorkloadsSummary`, at most [`MAX_PENDING_READ`] items.
pub fn read_pending(summary: &serde_json::Value) -> Vec<PendingWorkload> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Item {
        #[serde(default)]
        metadata: RawMeta,
        #[serde(default)]
        position_in_local_queue: Option<u32>,
    }
    summary["items"]
        .as_array()
        .into_iter()
        .flatten()
        .take(MAX_PENDING_READ)
        .filter_map(|item| {
            let item = Item::deserialize(item).ok()?;
            let owner = item.metadata.owner_references.iter().find(|o| is_job(&o.kind))?;
            Some(PendingWorkload {
                owner_uid: keep(&owner.uid, 64),
                position_in_local_queue: item.position_in_local_queue?,
            })
        })
        .collect()
}

/// Where a Kueue-admitted cluster stands, as krayne shows it: `None` when
/// admitted (nothing to show); else when it started waiting, its place
/// (1-based, when the visibility API told), why, and `preempted` /
/// `evicted` when Kueue took it back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KueuePlace {
    /// When it started waiting (RFC 3339).
    pub since: String,
    /// Its place in its LocalQueue, 1-based.
    pub position: Option<u32>,
    /// Kueue's reason.
    pub reason: String,
    /// `preempted` or `evicted`; none while it simply waits.
    pub state: Option<&'static str>,
}

/// What `workload` (none yet: Kueue has not made it) says of a suspended
/// cluster created at `created_at`, placed at `position` (0-based) by the
/// visibility API.
pub fn place(workload: Option<&ObservedWorkload>, created_at: &str, position: Option<u32>) -> Option<KueuePlace> {
    let Some(w) = workload else {
        return Some(KueuePlace {
            since: created_at.to_owned(),
            position: None,
            reason: "waiting for Kueue to make its Workload".into(),
            state: None,
        });
    };
    if w.admitted {
        return None;
    }
    let position = position.map(|p| p.saturating_add(1));
    Some(match &w.evicted {
        Some((reason, message, at)) => KueuePlace {
            since: at
                .clone()
                .or_else(|| w.created_at.clone())
                .unwrap_or_else(|| created_at.to_owned()),
            position,
            reason: format!("{}: {message}", reason.to_lowercase()),
            state: Some(if reason == "Preempted" { "preempted" } else { "evicted" }),
        },
        None => KueuePlace {
            since: w.created_at.clone().unwrap_or_else(|| created_at.to_owned()),
            position,
            reason: w
                .pending_message
                .clone()
                .unwrap_or_else(|| "waiting for Kueue to admit it".into()),
            state: None,
        },
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_pending_workload_reads_as_queued_with_its_reason_and_place() {
        let w = ObservedWorkload::read(&json!({
            "metadata": {"name": "raycluster-a-1", "creationTimestamp": "2026-11-29T06:00:00Z",
                         "ownerReferences": [{"kind": "RayCluster", "uid": "u-1", "name": "a"}]},
            "status": {"conditions": [{"type": "QuotaReserved", "status": "False", "reason": "Pending",
                                        "message": "couldn't assign flavors to pod set head: insufficient quota"}]}
        }))
        .unwrap();
        assert_eq!(w.owner_uid.as_deref(), Some("u-1"));
        let p = place(Some(&w), "2026-11-29T05:00:00Z", Some(0)).unwrap();
        assert_eq!(p.position, Some(1));
        assert_eq!(p.since, "2026-11-29T06:00:00Z");
        assert!(p.reason.starts_with("couldn't assign flavors"));
        assert_eq!(p.state, None);
    }

    #[test]
    fn admitted_shows_nothing_and_preempted_says_so() {
        let admitted = ObservedWorkload::read(&json!({"status": {"admission": {"clusterQueue": "cq"}}})).unwrap();
        assert_eq!(place(Some(&admitted), "t", None), None);
        let evicted = ObservedWorkload::read(&json!({"status": {"conditions": [
            {"type": "Evicted", "status": "True", "reason": "Preempted", "message": "reclaimed",
             "lastTransitionTime": "2026-11-29T07:00:00Z"}]}}))
        .unwrap();
        let p = place(Some(&evicted), "t", None).unwrap();
        assert_eq!(
            (p.state, p.reason.as_str(), p.since.as_str()),
            (Some("preempted"), "preempted: reclaimed", "2026-11-29T07:00:00Z")
        );
        assert_eq!(place(None, "t0", None).unwrap().since, "t0");
    }

    #[test]
    fn a_rayjobs_workload_is_its_rayjobs_and_other_owners_are_not_krayne_jobs() {
        let owned = |kind: &str| {
            ObservedWorkload::read(&json!({"metadata": {"ownerReferences": [{"kind": kind, "uid": "u-9"}]}}))
                .unwrap()
                .owner_uid
        };
        assert_eq!(owned("RayJob").as_deref(), Some("u-9"));
        assert_eq!(owned("Job"), None);
        let pending = read_pending(&json!({"items": [
            {"metadata": {"ownerReferences": [{"kind": "RayJob", "uid": "u-9"}]}, "positionInLocalQueue": 0},
            {"metadata": {"ownerReferences": [{"kind": "Job", "uid": "u-8"}]}, "positionInLocalQueue": 1},
        ]}));
        assert_eq!(pending.len(), 1);
        assert_eq!(pending[0].owner_uid, "u-9");
    }

    #[test]
    fn hostile_or_huge_answers_are_bounded() {
        let long = "x".repeat(10_000);
        let w = ObservedWorkload::read(&json!({"status": {"conditions": [
            {"type": "QuotaReserved", "status": "False", "message": long}]}}))
        .unwrap();
        assert!(w.pending_message.unwrap().len() <= MAX_KUEUE_MESSAGE);
        let items: Vec<_> = (0..5000)
            .map(|i| {
                json!({"metadata": {"ownerReferences": [{"kind": "RayCluster", "uid": format!("u{i}")}]},
                             "positionInLocalQueue": i})
            })
            .collect();
        assert_eq!(read_pending(&json!({"items": items})).len(), MAX_PENDING_READ);
        assert!(ObservedWorkload::read(&json!("not a workload")).is_none());
    }
}
