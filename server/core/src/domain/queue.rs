//! Queued admission (docs/quotas.md): a create or resume that does not fit
//! its namespace's quota may wait in the namespace's line, a suspended
//! RayCluster, until quota frees. This module is the line's rules: the
//! namespace's policy (team mapping `queueing:`), the order of the line,
//! and which waiting clusters fit now. Pure: the admitter gathers the line
//! and what the namespace holds, and carries out the decision.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use super::{
    lifecycle::PolicyDuration,
    quota::{self, Held, Quota, Request},
};

/// Whether a create or resume that does not fit waits when its caller did
/// not say.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum QueueMode {
    /// Only when the caller asks (`queue: true`, `--queue`).
    #[default]
    OnRequest,
    /// Always, unless the caller says `queue: false`.
    Default,
}

/// How a line is served (Kueue's `queueingStrategy`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum QueueOrder {
    /// First in, first out: nothing is admitted past a cluster that does
    /// not fit yet (Kueue's `StrictFIFO`).
    #[default]
    Strict,
    /// In order, but a cluster that does not fit lets a smaller one
    /// behind it go first (Kueue's `BestEffortFIFO`).
    BestEffort,
}

/// What ends a wait longer than `max_wait`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum OnMaxWait {
    /// The cluster leaves the line and stays, suspended (`krayne resume
    /// --queue` puts it back at the end).
    #[default]
    Keep,
    /// The cluster is deleted.
    Delete,
}

/// A namespace's queueing policy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct QueuePolicy {
    /// Whether requests wait by default.
    #[serde(default)]
    pub queue: QueueMode,
    /// How the line is served.
    #[serde(default)]
    pub order: QueueOrder,
    /// The longest a cluster waits (unset: as long as it takes).
    #[serde(default)]
    pub max_wait: Option<PolicyDuration>,
    /// What ends a wait past `max_wait`.
    #[serde(default)]
    pub on_max_wait: OnMaxWait,
}

impl QueuePolicy {
    /// Checks that the policy can be carried out as written.
    pub fn check(&self) -> Result<(), String> {
        if self.on_max_wait == OnMaxWait::Delete && self.max_wait.is_none() {
            return Err("on_max_wait needs max_wait".into());
        }
        Ok(())
    }

    /// Whether a request waits: as its caller says, else as the policy.
    pub fn waits(&self, asked: Option<bool>) -> bool {
        asked.unwrap_or(self.queue == QueueMode::Default)
    }
}

/// The most clusters one namespace's line holds: past it, a request that
/// does not fit is refused as one that does not wait (each admission
/// rewrites the places of those behind, under the namespace's lock).
pub const MAX_LINE: usize = 50;

/// How a RayJob is named in its namespace's line (a cluster by its name;
/// no cluster's name holds a `/`, so the two never meet).
pub fn rayjob_in_line(name: &str) -> String {
    format!("{RAYJOB_IN_LINE}{name}")
}

/// The RayJob a name in line stands for, if it is one.
pub fn rayjob_of_line(name: &str) -> Option<&str> {
    name.strip_prefix(RAYJOB_IN_LINE)
}

const RAYJOB_IN_LINE: &str = "rayjob/";

/// One cluster (or RayJob, whose cluster waits to be made) waiting in a
/// namespace's line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Waiting {
    /// Its name: a cluster's, or [`rayjob_in_line`]'s for a RayJob.
    pub name: String,
    /// When it joined the line.
    pub since: Timestamp,
    /// What admitting it asks of the quota.
    pub request: Request,
}

/// What the line holds now: who goes, who waits, where and why.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LineDecision {
    /// The names to admit now, in the line's order.
    pub admit: Vec<String>,
    /// Those that wait: name, place in line (1-based) and why.
    pub waiting: Vec<(String, u32, String)>,
}

/// Sorts a line into its order: who joined first, then by name (two that
/// joined in the same instant are still told apart the same way by every
/// replica).
pub fn order_line(line: &mut [Waiting]) {
    line.sort_by(|a, b| (a.since, &a.name).cmp(&(b.since, &b.name)));
}

/// Why a cluster of a line waits.
enum Why {
    /// It does not fit what is free now (said once the round's admissions
    /// are counted).
    Short,
    /// A cluster ahead of it does not fit (strict order).
    Behind(String),
    /// The quota could never hold it (it was lowered): it blocks no one.
    Never(String),
}

/// Which of `line` (in its order) fit `quota` beside `used`, served by
/// `order`: each admitted one counts for the next. No quota: all fit.
pub fn decide(quota: Option<&Quota>, used: Held, line: &[Waiting], order: QueueOrder) -> LineDecision {
    let mut used = used;
    let mut admit = Vec::new();
    let mut waiting: Vec<(&Waiting, Why)> = Vec::new();
    let mut blocked_by: Option<&str> = None;
    for entry in line {
        if let Some(never) = quota.and_then(|q| quota::shortage(q, &Held::default(), &entry.request)) {
            waiting.push((entry, Why::Never(never)));
            continue;
        }
        let fits = quota.is_none_or(|q| quota::shortage(q, &used, &entry.request).is_none());
        match (fits, blocked_by) {
            (true, None) => {
                used.add(entry.request.site.as_ref(), entry.request.growth);
                admit.push(entry.name.clone());
            }
            (false, _) => {
                if order == QueueOrder::Strict && blocked_by.is_none() {
                    blocked_by = Some(&entry.name);
                }
                waiting.push((entry, Why::Short));
            }
            (true, Some(head)) => waiting.push((entry, Why::Behind(head.to_owned()))),
        }
    }
    let waiting = (1u32..)
        .zip(waiting)
        .map(|(place, (entry, why))| {
            let reason = match why {
                Why::Short => quota
                    .and_then(|q| quota::shortage(q, &used, &entry.request))
                    .unwrap_or_default(),
                Why::Behind(head) => format!("waits for {head}, ahead of it in line (order: strict)"),
                Why::Never(short) => {
                    format!("can never fit the namespace's quota ({short}); delete it or raise the quota")
                }
            };
            (entry.name.clone(), place, reason)
        })
        .collect();
    LineDecision { admit, waiting }
}

/// When a cluster joining a line at `now` is taken to have joined: never
/// before the last one in it (a replica whose clock lags cannot put a
/// newcomer ahead of those already waiting).
pub fn joined_at(now: Timestamp, line: &[Waiting]) -> Timestamp {
    let last = line.iter().map(|w| w.since).max();
    match last {
        Some(last) if last >= now => last.checked_add(jiff::SignedDuration::from_millis(1)).unwrap_or(last),
        _ => now,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use proptest::prelude::*;

    use super::*;
    use crate::domain::{Quantity, quota::Usage};

    const GPU: u128 = 1_000_000_000;

    fn gpus(n: u128) -> Request {
        Request::new_cluster(Usage {
            clusters: 1,
            gpu_nanos: n * GPU,
            ..Usage::default()
        })
    }

    fn quota(n: u32) -> Quota {
        Quota {
            gpus: Some(n.to_string().parse::<Quantity>().unwrap()),
            ..Quota::default()
        }
    }

    fn waiting(name: &str, second: i64, n: u128) -> Waiting {
        Waiting {
            name: name.into(),
            since: Timestamp::from_second(1_800_000_000 + second).unwrap(),
            request: gpus(n),
        }
    }

    fn used(n: u128) -> Held {
        Held {
            total: Usage {
                clusters: 1,
                gpu_nanos: n * GPU,
                ..Usage::default()
            },
            ..Held::default()
        }
    }

    #[test]
    fn a_sites_cap_holds_each_admission_of_a_round_at_that_site() {
        let capped: Quota = serde_saphyr::from_str("gpus: 16\nsites: { us-2: { gpus: 4 } }\n").unwrap();
        let at = |name: &str, second: i64, site: &str| Waiting {
            request: gpus(3).at(Some(crate::domain::Site::new(site))),
            ..waiting(name, second, 3)
        };
        let line = [at("a", 0, "us-2"), at("b", 1, "us-2"), at("c", 2, "eu-1")];
        let d = decide(Some(&capped), used(0), &line, QueueOrder::BestEffort);
        assert_eq!(d.admit, ["a", "c"], "b would be 6 of us-2's 4");
        assert_eq!(
            d.waiting,
            [("b".into(), 1, "gpus in site us-2: needs 3, 1 of 4 free".into())]
        );
    }

    #[test]
    fn strict_order_admits_what_fits_up_to_the_first_that_does_not() {
        let line = [waiting("a", 0, 4), waiting("b", 1, 8), waiting("c", 2, 2)];
        let d = decide(Some(&quota(8)), used(2), &line, QueueOrder::Strict);
        assert_eq!(d.admit, ["a"]);
        assert_eq!(d.waiting[0], ("b".into(), 1, "gpus: needs 8, 2 of 8 free".into()));
        assert_eq!(
            d.waiting[1],
            ("c".into(), 2, "waits for b, ahead of it in line (order: strict)".into())
        );
    }

    #[test]
    fn best_effort_lets_a_smaller_one_past_a_big_one() {
        let line = [waiting("a", 0, 4), waiting("b", 1, 8), waiting("c", 2, 2)];
        let d = decide(Some(&quota(8)), used(2), &line, QueueOrder::BestEffort);
        assert_eq!(d.admit, ["a", "c"]);
        assert_eq!(d.waiting, [("b".into(), 1, "gpus: needs 8, 0 of 8 free".into())]);
    }

    #[test]
    fn one_the_quota_could_never_hold_blocks_no_one() {
        let line = [waiting("huge", 0, 16), waiting("a", 1, 4)];
        let d = decide(Some(&quota(8)), used(0), &line, QueueOrder::Strict);
        assert_eq!(d.admit, ["a"]);
        assert_eq!(d.waiting[0].0, "huge");
        assert!(
            d.waiting[0]
                .2
                .starts_with("can never fit the namespace's quota (gpus: needs 16"),
            "{:?}",
            d.waiting
        );
    }

    #[test]
    fn without_a_quota_everything_goes() {
        let line = [waiting("a", 0, 40), waiting("b", 1, 80)];
        assert_eq!(decide(None, used(0), &line, QueueOrder::Strict).admit, ["a", "b"]);
    }

    #[test]
    fn the_line_is_ordered_by_arrival_then_name_and_a_late_clock_joins_at_the_end() {
        let mut line = vec![waiting("z", 5, 1), waiting("b", 3, 1), waiting("a", 3, 1)];
        order_line(&mut line);
        let names: Vec<&str> = line.iter().map(|w| w.name.as_str()).collect();
        assert_eq!(names, ["a", "b", "z"]);
        let behind = Timestamp::from_second(1_800_000_000).unwrap();
        assert!(joined_at(behind, &line) > line[2].since);
        let ahead = Timestamp::from_second(1_900_000_000).unwrap();
        assert_eq!(joined_at(ahead, &line), ahead);
    }

    #[test]
    fn policies_read_and_check() {
        let p: QueuePolicy =
            serde_json::from_value(serde_json::json!({"queue": "default", "order": "best-effort", "max_wait": "2h"}))
                .unwrap();
        assert_eq!(p.queue, QueueMode::Default);
        assert_eq!(p.order, QueueOrder::BestEffort);
        assert!(p.waits(None) && !p.waits(Some(false)));
        assert!(QueuePolicy::default().check().is_ok() && !QueuePolicy::default().waits(None));
        let bad = QueuePolicy {
            on_max_wait: OnMaxWait::Delete,
            ..QueuePolicy::default()
        };
        assert!(bad.check().unwrap_err().contains("max_wait"));
        assert!(serde_json::from_value::<QueuePolicy>(serde_json::json!({"order": "fifo"})).is_err());
    }

    /// One namespace under contention: what runs and what waits.
    #[derive(Default)]
    struct Namespace {
        limit: u32,
        running: Vec<(u64, u128)>,
        line: VecDeque<(u64, u128)>,
        admitted: Vec<u64>,
    }

    impl Namespace {
        fn used(&self) -> Held {
            Held {
                total: self.running.iter().map(|(_, g)| used(*g).total).sum(),
                ..Held::default()
            }
        }

        fn entries(&self) -> Vec<Waiting> {
            self.line
                .iter()
                .map(|(id, g)| waiting(&format!("c{id:06}"), i64::try_from(*id).unwrap(), *g))
                .collect()
        }

        /// One admitter round under strict order, checking what it admits.
        fn serve(&mut self) {
            let line = self.entries();
            let d = decide(Some(&quota(self.limit)), self.used(), &line, QueueOrder::Strict);
            // What is admitted is a prefix of the line: none goes before
            // an earlier one; and the first left waiting does not fit.
            let names: Vec<&str> = line.iter().map(|w| w.name.as_str()).collect();
            assert_eq!(d.admit, names[..d.admit.len()]);
            for _ in &d.admit {
                let entry = self.line.pop_front().unwrap();
                self.running.push(entry);
                self.admitted.push(entry.0);
            }
            let total: u128 = self.running.iter().map(|(_, g)| g).sum();
            assert!(total <= u128::from(self.limit), "never past the quota");
            if let Some((id, g)) = self.line.front() {
                assert!(total + g > u128::from(self.limit), "c{id} fits but waits");
            }
        }
    }

    #[derive(Debug, Clone)]
    enum Step {
        Arrive { ns: usize, gpus: u128 },
        Finish { ns: usize, pick: usize },
    }

    fn steps() -> impl Strategy<Value = Vec<Step>> {
        let step = prop_oneof![
            (0..2usize, 1..=8u128).prop_map(|(ns, gpus)| Step::Arrive { ns, gpus }),
            (0..2usize, any::<usize>()).prop_map(|(ns, pick)| Step::Finish { ns, pick }),
        ];
        proptest::collection::vec(step, 1..200)
    }

    proptest! {
        /// Two namespaces with their own quotas, under random arrivals and
        /// completions: each namespace's clusters are admitted in their
        /// own arrival order, never past the quota, and none that fits is
        /// left waiting at the head of its line.
        #[test]
        fn each_namespace_is_served_in_its_own_arrival_order(steps in steps()) {
            let mut spaces = [Namespace { limit: 8, ..Namespace::default() }, Namespace { limit: 12, ..Namespace::default() }];
            for (id, step) in (0u64..).zip(steps) {
                match step {
                    Step::Arrive { ns, gpus } => spaces[ns].line.push_back((id, gpus)),
                    Step::Finish { ns, pick } => {
                        let running = &mut spaces[ns].running;
                        if !running.is_empty() {
                            let at = pick % running.len();
                            running.remove(at);
                        }
                    }
                }
                for space in &mut spaces {
                    space.serve();
                }
            }
            for space in &spaces {
                let mut sorted = space.admitted.clone();
                sorted.sort_unstable();
                prop_assert_eq!(&space.admitted, &sorted);
            }
        }
    }
}
