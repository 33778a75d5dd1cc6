//! Usage accounting: what a pod holds of a node while it runs
//! ([`PodCharge`]), the intervals the leader records of every Ray pod's
//! and cluster's life ([`UsageInterval`], kept by a [`UsageLedger`]), and
//! the report over them ([`report`]: CPU-, GiB- and GPU-hours,
//! cluster-hours and suspended-hours, grouped as asked). Pure.

use std::collections::BTreeMap;

use jiff::{Timestamp, ToSpan as _};
use serde::Serialize;

use super::{Atom, Error, Quantity, observed::Resources};

/// What a pod holds while it runs: its containers' requests (else their
/// limits, as Kubernetes defaults a request to its limit), together.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct PodCharge {
    /// CPU, in thousandths of a core.
    pub cpu_millis: u64,
    /// Memory, in bytes.
    pub memory_bytes: u64,
    /// GPUs, of every GPU resource (`nvidia.com/gpu`, `amd.com/gpu`, …).
    pub gpus: u64,
    /// The GPU resource's name, when it holds some (the first by name).
    pub gpu_resource: Option<Atom>,
}

impl PodCharge {
    /// The charge of containers with these resources.
    pub fn of<'a>(containers: impl IntoIterator<Item = &'a Resources>) -> Self {
        let mut charge = Self::default();
        for resources in containers {
            let amount = |name: &str| {
                resources
                    .requests
                    .get(name)
                    .or_else(|| resources.limits.get(name))
                    .and_then(|q| q.as_str().parse::<Quantity>().ok())
                    .map_or(0, |q| q.nanos())
            };
            charge.cpu_millis += u64::try_from(amount("cpu") / 1_000_000).unwrap_or(u64::MAX);
            charge.memory_bytes += u64::try_from(amount("memory") / 1_000_000_000).unwrap_or(u64::MAX);
            let names = resources.requests.iter().chain(resources.limits.iter()).map(|(k, _)| k);
            let mut gpu_names: Vec<&Atom> = names.filter(|n| is_gpu(n)).collect();
            gpu_names.sort();
            gpu_names.dedup();
            for name in gpu_names {
                let count = u64::try_from(amount(name) / 1_000_000_000).unwrap_or(u64::MAX);
                if count > 0 {
                    charge.gpus += count;
                    charge.gpu_resource.get_or_insert_with(|| name.clone());
                }
            }
        }
        charge
    }
}

/// Whether a resource name is a GPU's (`nvidia.com/gpu`, `amd.com/gpu`,
/// `gpu.intel.com/i915`).
fn is_gpu(name: &str) -> bool {
    name.contains("gpu")
}

/// What an interval counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum UsageKind {
    /// A Ray pod running: its charge, for its time.
    Pod,
    /// A cluster existing.
    Cluster,
    /// A cluster suspended.
    Suspended,
}

impl UsageKind {
    /// As stored.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Pod => "pod",
            Self::Cluster => "cluster",
            Self::Suspended => "suspended",
        }
    }

    /// From its stored name.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "pod" => Some(Self::Pod),
            "cluster" => Some(Self::Cluster),
            "suspended" => Some(Self::Suspended),
            _ => None,
        }
    }
}

/// One stretch of a pod's or a cluster's life, as recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageInterval {
    /// Unique: the kind and the object's uid (and, for a suspension, its
    /// start), so that recording it twice records it once.
    pub key: String,
    /// What it counts.
    pub kind: UsageKind,
    /// The cluster's namespace.
    pub namespace: String,
    /// The cluster.
    pub cluster: String,
    /// A pod's worker group (`headgroup` for the head).
    pub worker_group: Option<String>,
    /// Who created the cluster.
    pub creator: Option<String>,
    /// The teams with an editor's role in the namespace when it began.
    pub teams: Vec<String>,
    /// What it held (pods; zero for clusters).
    pub charge: PodCharge,
    /// When it began.
    pub started_at: Timestamp,
    /// When it ended (`None`: still open).
    pub ended_at: Option<Timestamp>,
    /// Whether its end is estimated (it ended while no replica watched).
    pub estimated: bool,
}

/// The end of an open interval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageClose {
    /// The interval's key.
    pub key: String,
    /// When it ended.
    pub ended_at: Timestamp,
    /// Whether that time is estimated.
    pub estimated: bool,
}

/// Where the recorded intervals are kept (the store database), written by
/// the one leader, read by every replica.
#[async_trait::async_trait]
pub trait UsageLedger: Send + Sync + 'static {
    /// Records intervals that began; one whose key is recorded already is
    /// left as it is.
    async fn open(&self, intervals: &[UsageInterval]) -> Result<(), Error>;
    /// Ends intervals that are open; one ended already is left as it is.
    async fn close(&self, closes: &[UsageClose]) -> Result<(), Error>;
    /// The keys of the intervals still open.
    async fn open_keys(&self) -> Result<Vec<String>, Error>;
    /// Records that the recorder saw every pod at `at`.
    async fn mark_seen(&self, at: Timestamp) -> Result<(), Error>;
    /// When the recorder last saw every pod.
    async fn last_seen(&self) -> Result<Option<Timestamp>, Error>;
    /// The intervals of `namespaces` (every namespace's when `None`) that
    /// overlap `from..to`.
    async fn intervals(
        &self,
        namespaces: Option<&[String]>,
        from: Timestamp,
        to: Timestamp,
    ) -> Result<Vec<UsageInterval>, Error>;
}

/// What a report's rows are grouped by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum UsageBy {
    /// The cluster.
    Cluster,
    /// Who created it.
    Creator,
    /// The team (an interval of a namespace several teams edit counts in
    /// each team's row, once in the totals).
    Team,
    /// The worker group.
    WorkerGroup,
    /// The UTC day.
    Day,
}

impl UsageBy {
    /// From its name in a request (`cluster`, `creator`, `team`,
    /// `worker_group`, `day`).
    pub fn parse(text: &str) -> Result<Self, Error> {
        match text {
            "cluster" => Ok(Self::Cluster),
            "creator" => Ok(Self::Creator),
            "team" => Ok(Self::Team),
            "worker_group" => Ok(Self::WorkerGroup),
            "day" => Ok(Self::Day),
            other => Err(Error::invalid(
                "by",
                format!("{other:?} is not one of cluster, creator, team, worker_group, day"),
            )),
        }
    }
}

/// Hours of each kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
pub struct UsageFigures {
    /// CPU cores × hours.
    pub cpu_hours: f64,
    /// GiB of memory × hours.
    pub memory_gib_hours: f64,
    /// GPUs × hours.
    pub gpu_hours: f64,
    /// Hours clusters existed.
    pub cluster_hours: f64,
    /// Hours clusters were suspended.
    pub suspended_hours: f64,
}

impl UsageFigures {
    fn add(&mut self, interval: &UsageInterval, hours: f64) {
        match interval.kind {
            UsageKind::Pod => {
                let charge = &interval.charge;
                self.cpu_hours += charge.cpu_millis as f64 / 1000.0 * hours;
                self.memory_gib_hours += charge.memory_bytes as f64 / GIB * hours;
                self.gpu_hours += charge.gpus as f64 * hours;
            }
            UsageKind::Cluster => self.cluster_hours += hours,
            UsageKind::Suspended => self.suspended_hours += hours,
        }
    }
}

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// One row of a report: the values of what it is grouped by, and its
/// figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
pub struct UsageRow {
    /// The cluster (grouped by cluster).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    /// Its namespace (grouped by cluster).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Who created the clusters (grouped by creator).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub creator: Option<String>,
    /// The team (grouped by team).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub team: Option<String>,
    /// The worker group (grouped by worker group; `headgroup` is the head).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worker_group: Option<String>,
    /// The UTC day, `YYYY-MM-DD` (grouped by day).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub day: Option<String>,
    /// Its hours.
    #[serde(flatten)]
    pub figures: UsageFigures,
    /// Whether any interval in it ended at an estimated time.
    pub estimated: bool,
}

/// A report's totals and its rows, sorted by what they are grouped by.
#[derive(Debug, Clone, PartialEq)]
pub struct UsageTotals {
    /// Every interval's hours, each counted once.
    pub totals: UsageFigures,
    /// The rows.
    pub rows: Vec<UsageRow>,
}

/// Every interval's hours within `from..to` (an open one up to `now`),
/// grouped `by` (none: one row per namespace).
pub fn report(
    intervals: &[UsageInterval],
    from: Timestamp,
    to: Timestamp,
    by: &[UsageBy],
    now: Timestamp,
) -> UsageTotals {
    let mut totals = UsageFigures::default();
    let mut rows: BTreeMap<RowKey, (UsageFigures, bool)> = BTreeMap::new();
    for interval in intervals {
        let start = interval.started_at.max(from);
        let end = interval.ended_at.unwrap_or(now).min(to);
        if end <= start {
            continue;
        }
        for (piece_start, piece_end) in pieces(start, end, by.contains(&UsageBy::Day)) {
            let hours = piece_end.duration_since(piece_start).as_secs_f64() / 3600.0;
            totals.add(interval, hours);
            for key in row_keys(interval, piece_start, by) {
                let row = rows.entry(key).or_default();
                row.0.add(interval, hours);
                row.1 |= interval.estimated;
            }
        }
    }
    UsageTotals {
        totals,
        rows: rows
            .into_iter()
            .map(|(key, (figures, estimated))| key.row(figures, estimated))
            .collect(),
    }
}

/// `start..end`, cut at UTC midnights when `by_day`.
fn pieces(start: Timestamp, end: Timestamp, by_day: bool) -> Vec<(Timestamp, Timestamp)> {
    if !by_day {
        return vec![(start, end)];
    }
    let mut out = Vec::new();
    let mut at = start;
    while at < end {
        let next = next_midnight(at).min(end);
        out.push((at, next));
        at = next;
    }
    out
}

fn next_midnight(t: Timestamp) -> Timestamp {
    let day = t.to_zoned(jiff::tz::TimeZone::UTC).date();
    day.checked_add(1.day())
        .ok()
        .and_then(|d| d.to_zoned(jiff::tz::TimeZone::UTC).ok())
        .map_or(Timestamp::MAX, |z| z.timestamp())
}

/// A row's identity: the grouped values, in a fixed order.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord)]
struct RowKey {
    namespace: Option<String>,
    cluster: Option<String>,
    creator: Option<String>,
    team: Option<String>,
    worker_group: Option<String>,
    day: Option<String>,
}

impl RowKey {
    fn row(self, figures: UsageFigures, estimated: bool) -> UsageRow {
        UsageRow {
            cluster: self.cluster,
            namespace: self.namespace,
            creator: self.creator,
            team: self.team,
            worker_group: self.worker_group,
            day: self.day,
            figures,
            estimated,
        }
    }
}

/// The rows a piece of `interval` from `at` counts in: one, or one per
/// team when grouped by team.
fn row_keys(interval: &UsageInterval, at: Timestamp, by: &[UsageBy]) -> Vec<RowKey> {
    let mut key = RowKey::default();
    if by.is_empty() || by.contains(&UsageBy::Cluster) {
        key.namespace = Some(interval.namespace.clone());
    }
    for b in by {
        match b {
            UsageBy::Cluster => key.cluster = Some(interval.cluster.clone()),
            UsageBy::Creator => key.creator = Some(interval.creator.clone().unwrap_or_default()),
            UsageBy::WorkerGroup => key.worker_group = Some(interval.worker_group.clone().unwrap_or_default()),
            UsageBy::Day => key.day = Some(at.to_zoned(jiff::tz::TimeZone::UTC).date().to_string()),
            UsageBy::Team => {}
        }
    }
    if !by.contains(&UsageBy::Team) {
        return vec![key];
    }
    if interval.teams.is_empty() {
        key.team = Some(String::new());
        return vec![key];
    }
    interval
        .teams
        .iter()
        .map(|team| RowKey {
            team: Some(team.clone()),
            ..key.clone()
        })
        .collect()
}

/// A row's sort key as one string (for page tokens).
pub fn row_key(row: &UsageRow) -> String {
    [
        &row.namespace,
        &row.cluster,
        &row.creator,
        &row.team,
        &row.worker_group,
        &row.day,
    ]
    .iter()
    .map(|v| v.as_deref().unwrap_or(""))
    .collect::<Vec<_>>()
    .join("\u{1f}")
}

#[cfg(test)]
mod tests {
    use litemap::LiteMap;

    use super::*;

    fn t(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn pod(key: &str, cluster: &str, cpu_millis: u64, gpus: u64, from: &str, to: Option<&str>) -> UsageInterval {
        UsageInterval {
            key: key.into(),
            kind: UsageKind::Pod,
            namespace: "ml-team".into(),
            cluster: cluster.into(),
            worker_group: Some("gpu".into()),
            creator: Some("alice@example.com".into()),
            teams: vec!["ml-research".into(), "platform".into()],
            charge: PodCharge {
                cpu_millis,
                memory_bytes: 2 * 1024 * 1024 * 1024,
                gpus,
                gpu_resource: None,
            },
            started_at: t(from),
            ended_at: to.map(t),
            estimated: false,
        }
    }

    #[test]
    fn a_pods_charge_is_its_requests_else_its_limits() {
        let q = |pairs: &[(&str, &str)]| -> LiteMap<Atom, Atom> {
            pairs.iter().map(|(k, v)| (Atom::from(*k), Atom::from(*v))).collect()
        };
        let ray = Resources {
            requests: q(&[("cpu", "1500m"), ("memory", "4Gi")]),
            limits: q(&[("cpu", "2"), ("memory", "4Gi"), ("nvidia.com/gpu", "2")]),
        };
        let sidecar = Resources {
            requests: q(&[("cpu", "100m"), ("memory", "256Mi")]),
            limits: LiteMap::new(),
        };
        let charge = PodCharge::of([&ray, &sidecar]);
        assert_eq!(charge.cpu_millis, 1600);
        assert_eq!(charge.memory_bytes, 4 * 1024 * 1024 * 1024 + 256 * 1024 * 1024);
        assert_eq!(charge.gpus, 2);
        assert_eq!(charge.gpu_resource.as_deref(), Some("nvidia.com/gpu"));
    }

    #[test]
    fn hours_are_counted_within_the_window_and_split_at_midnight() {
        let intervals = [
            pod(
                "pod/a",
                "a",
                2000,
                1,
                "2026-11-01T22:00:00Z",
                Some("2026-11-02T02:00:00Z"),
            ),
            pod("pod/b", "b", 1000, 0, "2026-10-31T23:00:00Z", None),
        ];
        let (from, to) = (t("2026-11-01T00:00:00Z"), t("2026-12-01T00:00:00Z"));
        let now = t("2026-11-02T00:00:00Z");
        let all = report(&intervals, from, to, &[], now);
        assert!((all.totals.gpu_hours - 4.0).abs() < 1e-9);
        assert!((all.totals.cpu_hours - (8.0 + 24.0)).abs() < 1e-9, "{:?}", all.totals);
        assert!((all.totals.memory_gib_hours - 2.0 * 28.0).abs() < 1e-9);
        assert_eq!(all.rows.len(), 1);
        assert_eq!(all.rows[0].namespace.as_deref(), Some("ml-team"));

        let by_day = report(&intervals, from, to, &[UsageBy::Cluster, UsageBy::Day], now);
        let days: Vec<_> = by_day
            .rows
            .iter()
            .map(|r| (r.cluster.clone().unwrap(), r.day.clone().unwrap(), r.figures.gpu_hours))
            .collect();
        assert_eq!(
            days,
            [
                ("a".into(), "2026-11-01".into(), 2.0),
                ("a".into(), "2026-11-02".into(), 2.0),
                ("b".into(), "2026-11-01".into(), 0.0),
            ]
        );
    }

    #[test]
    fn a_namespace_two_teams_edit_counts_in_each_team_once_in_the_totals() {
        let intervals = [pod(
            "pod/a",
            "a",
            1000,
            1,
            "2026-11-01T00:00:00Z",
            Some("2026-11-01T01:00:00Z"),
        )];
        let (from, to) = (t("2026-11-01T00:00:00Z"), t("2026-12-01T00:00:00Z"));
        let teams = report(&intervals, from, to, &[UsageBy::Team], to);
        assert_eq!(teams.rows.len(), 2);
        assert!(teams.rows.iter().all(|r| (r.figures.gpu_hours - 1.0).abs() < 1e-9));
        assert!((teams.totals.gpu_hours - 1.0).abs() < 1e-9);
    }

    #[test]
    fn only_known_groupings_are_taken() {
        assert_eq!(UsageBy::parse("worker_group").unwrap(), UsageBy::WorkerGroup);
        assert_eq!(UsageBy::parse("month").unwrap_err().code(), "invalid_argument");
    }
}
