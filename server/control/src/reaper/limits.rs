//! What bounds the reaper's blast radius: caps on the actions (suspend,
//! delete) of one pass, all namespaces together and per namespace — past
//! them acting pauses until the next pass, warnings go on — and the settle
//! time of a new or changed policy, during which what it alone would
//! suspend or delete is only reported.

use std::collections::HashMap;

use jiff::{SignedDuration, Timestamp};

use crate::domain::{
    PolicyRecord,
    lifecycle::{LifecyclePolicy, Signals, Step, step},
};

/// The reaper's limits (`--lifecycle-max-actions-per-pass`,
/// `--lifecycle-max-actions-per-namespace`, `--lifecycle-policy-settle`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReaperLimits {
    /// Suspensions and deletions of one pass, all namespaces together.
    pub max_actions_per_pass: usize,
    /// Suspensions and deletions of one pass in one namespace.
    pub max_actions_per_namespace: usize,
    /// How long a new or changed policy only reports what it alone would
    /// suspend or delete.
    pub policy_settle: SignedDuration,
}

impl Default for ReaperLimits {
    fn default() -> Self {
        Self {
            max_actions_per_pass: 20,
            max_actions_per_namespace: 5,
            policy_settle: SignedDuration::from_hours(1),
        }
    }
}

/// Which cap held an action back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cap {
    /// The pass's, all namespaces together.
    Pass,
    /// The namespace's.
    Namespace,
}

impl Cap {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Pass => "pass",
            Self::Namespace => "namespace",
        }
    }
}

/// What is left of one pass's caps.
#[derive(Debug)]
pub(crate) struct PassBudget {
    left: usize,
    per_namespace: usize,
    taken: HashMap<String, usize>,
    /// Actions held back, by cap.
    pub(crate) deferred: HashMap<&'static str, usize>,
}

impl PassBudget {
    pub(crate) fn new(limits: &ReaperLimits) -> Self {
        Self {
            left: limits.max_actions_per_pass,
            per_namespace: limits.max_actions_per_namespace,
            taken: HashMap::new(),
            deferred: HashMap::new(),
        }
    }

    /// Whether one more action in `namespace` is within the caps (then it
    /// is counted), or the cap that holds it back.
    pub(crate) fn take(&mut self, namespace: &str) -> Result<(), Cap> {
        let taken = self.taken.get(namespace).copied().unwrap_or(0);
        let cap = if self.left == 0 {
            Cap::Pass
        } else if taken >= self.per_namespace {
            Cap::Namespace
        } else {
            self.left -= 1;
            self.taken.insert(namespace.to_owned(), taken + 1);
            return Ok(());
        };
        *self.deferred.entry(cap.as_str()).or_default() += 1;
        Err(cap)
    }

    /// Actions held back this pass.
    pub(crate) fn deferred_total(&self) -> usize {
        self.deferred.values().sum()
    }
}

/// A namespace whose policy is new or changed, still settling: until
/// `until`, what only it would suspend or delete is reported.
#[derive(Debug, Clone)]
pub(crate) struct Settling {
    /// The policy before (`None`: the namespace had none).
    pub(crate) previous: Option<LifecyclePolicy>,
    /// When it has settled.
    pub(crate) until: Timestamp,
}

/// The namespaces of `records` still settling at `now`.
pub(crate) fn settling(records: &[PolicyRecord], settle: SignedDuration, now: Timestamp) -> HashMap<String, Settling> {
    records
        .iter()
        .filter_map(|r| {
            let until = r.since.checked_add(settle).ok()?;
            (now < until).then(|| {
                let previous = r.previous.as_deref().and_then(|p| serde_json::from_str(p).ok());
                (r.namespace.clone(), Settling { previous, until })
            })
        })
        .collect()
}

/// Whether the policy before would warn or act on the cluster now too:
/// then the new one may go ahead.
pub(crate) fn previous_would_too(settling: &Settling, signals: &Signals, now: Timestamp) -> bool {
    settling
        .previous
        .as_ref()
        .is_some_and(|p| matches!(step(p, signals, now), Step::Warn(_) | Step::Act(_)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pass_acts_within_both_caps_and_counts_what_it_defers() {
        let mut budget = PassBudget::new(&ReaperLimits {
            max_actions_per_pass: 3,
            max_actions_per_namespace: 2,
            policy_settle: SignedDuration::ZERO,
        });
        assert_eq!(budget.take("a"), Ok(()));
        assert_eq!(budget.take("a"), Ok(()));
        assert_eq!(budget.take("a"), Err(Cap::Namespace));
        assert_eq!(budget.take("b"), Ok(()));
        assert_eq!(budget.take("c"), Err(Cap::Pass));
        assert_eq!(budget.deferred_total(), 2);
    }

    #[test]
    fn a_policy_settles_after_the_settle_time() {
        let since: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let records = [PolicyRecord {
            namespace: "ml".into(),
            previous: Some(r#"{"idle_after":"7200s"}"#.into()),
            since,
        }];
        let hour = SignedDuration::from_hours(1);
        let soon = settling(&records, hour, since + SignedDuration::from_mins(59));
        let previous = soon["ml"].previous.as_ref().unwrap();
        assert_eq!(previous.idle_after.unwrap().0, SignedDuration::from_hours(2));
        assert!(settling(&records, hour, since + hour).is_empty());
        assert!(settling(&records, SignedDuration::ZERO, since).is_empty());
    }
}
