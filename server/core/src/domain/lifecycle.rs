//! Cost control: a namespace's lifecycle policy (team mapping
//! `lifecycle:`), and what it means for one cluster now. Pure: the reaper
//! gathers the signals (when the cluster was created, since when nothing
//! has used it, until when its owner keeps it, when its owner was warned)
//! and carries out the step this module decides.
//!
//! Two rules keep it safe: nothing is done without a warning at least
//! `warn_before` earlier (a warning that came late pushes the action back),
//! and a cluster whose use is unknown is not idle (the reaper passes no
//! `idle_since` then).

use std::fmt;

use jiff::{SignedDuration, Timestamp};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A duration in the team mapping: `30s`, `90m`, `2h`, `7d`, `1h30m`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct PolicyDuration(pub SignedDuration);

impl<'de> Deserialize<'de> for PolicyDuration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        parse_duration(&text).map(Self).map_err(serde::de::Error::custom)
    }
}

impl Serialize for PolicyDuration {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("{}s", self.0.as_secs()))
    }
}

/// Parses `30s`, `90m`, `2h`, `7d`, `1h30m` (a day is 24 hours); it must
/// be more than zero.
pub fn parse_duration(text: &str) -> Result<SignedDuration, String> {
    let bad = || format!("{text:?} is not a duration; try 30s, 90m, 2h or 7d");
    let span: jiff::Span = text.trim().parse().map_err(|_| bad())?;
    let d = span
        .to_duration(jiff::SpanRelativeTo::days_are_24_hours())
        .map_err(|_| bad())?;
    if d.is_positive() {
        Ok(d)
    } else {
        Err(format!("{text:?} must be more than zero"))
    }
}

/// What happens to a cluster past its `max_lifetime`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OnExpiry {
    /// Suspend it (reversible: `krayne resume`).
    #[default]
    Suspend,
    /// Delete it.
    Delete,
}

/// A namespace's lifecycle policy.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct LifecyclePolicy {
    /// Suspend a cluster nothing has used for this long.
    pub idle_after: Option<PolicyDuration>,
    /// Suspend (or delete, with `on_expiry: delete`) a cluster this long
    /// after its creation.
    pub max_lifetime: Option<PolicyDuration>,
    /// What `max_lifetime` does.
    #[serde(default)]
    pub on_expiry: OnExpiry,
    /// How long ahead the owner is warned (default 15 minutes).
    pub warn_before: Option<PolicyDuration>,
    /// The longest `krayne keep` may postpone, from the time it is asked
    /// (unset: keeping is refused).
    pub keep_max: Option<PolicyDuration>,
    /// How long a finished job's cluster (`krayne run`) is kept when the
    /// run does not say (KubeRay's `ttlSecondsAfterFinished`).
    #[serde(default)]
    pub job_ttl: Option<PolicyDuration>,
}

/// The warning lead when the policy names none.
pub const DEFAULT_WARN_BEFORE: SignedDuration = SignedDuration::from_mins(15);

impl LifecyclePolicy {
    /// How long ahead the owner is warned.
    pub fn warn_before(&self) -> SignedDuration {
        self.warn_before.map_or(DEFAULT_WARN_BEFORE, |d| d.0)
    }

    /// Checks that the policy can be carried out as written.
    pub fn check(&self) -> Result<(), String> {
        if self.idle_after.is_none() && self.max_lifetime.is_none() && self.job_ttl.is_none() {
            return Err("give idle_after, max_lifetime, job_ttl or several".into());
        }
        if self.on_expiry == OnExpiry::Delete && self.max_lifetime.is_none() {
            return Err("on_expiry needs max_lifetime".into());
        }
        let warn = self.warn_before();
        for (field, d) in [("idle_after", self.idle_after), ("max_lifetime", self.max_lifetime)] {
            if let Some(d) = d
                && warn >= d.0
            {
                return Err(format!(
                    "warn_before ({}) must be shorter than {field} ({})",
                    Span(warn),
                    Span(d.0)
                ));
            }
        }
        Ok(())
    }
}

/// What the policy does to a cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LifecycleAction {
    /// Suspend it.
    Suspend,
    /// Delete it.
    Delete,
}

impl LifecycleAction {
    /// `suspend`, `delete`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Suspend => "suspend",
            Self::Delete => "delete",
        }
    }
}

/// Why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LifecycleReason {
    /// Unused this long (by the time of the action).
    Idle(SignedDuration),
    /// Its `max_lifetime`, reached.
    Lifetime(SignedDuration),
}

impl LifecycleReason {
    /// `idle` or `lifetime`, for metrics' labels.
    pub fn kind(self) -> &'static str {
        match self {
            Self::Idle(_) => "idle",
            Self::Lifetime(_) => "lifetime",
        }
    }
}

impl fmt::Display for LifecycleReason {
    /// `idle 2h04m`, `lifetime 7d reached`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Idle(d) => write!(f, "idle {}", Span(*d)),
            Self::Lifetime(d) => write!(f, "lifetime {} reached", Span(*d)),
        }
    }
}

/// A duration as people write it: `7d`, `2h04m`, `15m`, `45s`.
pub struct Span(pub SignedDuration);

impl fmt::Display for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.0.as_secs().max(0);
        let (d, h, m, sec) = (s / 86_400, s / 3600 % 24, s / 60 % 60, s % 60);
        match (d, h, m, sec) {
            (0, 0, 0, sec) => write!(f, "{sec}s"),
            (0, 0, m, 0) => write!(f, "{m}m"),
            (0, 0, m, sec) => write!(f, "{m}m{sec:02}s"),
            (0, h, 0, _) => write!(f, "{h}h"),
            (0, h, m, _) => write!(f, "{h}h{m:02}m"),
            (d, 0, _, _) => write!(f, "{d}d"),
            (d, h, _, _) => write!(f, "{d}d{h:02}h"),
        }
    }
}

/// What the reaper knows of one cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Signals {
    /// When it was created.
    pub created_at: Timestamp,
    /// Since when nothing has used it; `None` while in use, or when its
    /// use cannot be told (a head that does not answer is not idle).
    pub idle_since: Option<Timestamp>,
    /// Until when its owner keeps it (`krayne keep`).
    pub kept_until: Option<Timestamp>,
    /// When its owner was last warned.
    pub warned_at: Option<Timestamp>,
    /// Whether it is suspended.
    pub suspended: bool,
}

/// What will happen, when, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    /// What.
    pub action: LifecycleAction,
    /// When the policy says, kept or not.
    pub at: Timestamp,
    /// When the owner is to be warned.
    pub warn_at: Timestamp,
    /// Why.
    pub reason: LifecycleReason,
}

impl Plan {
    /// The plan as the cluster's annotation records it and reads show it:
    /// `suspend at 2026-11-27T09:00:00Z: lifetime 7d reached`.
    pub fn text(&self) -> String {
        format!("{} at {}: {}", self.action.as_str(), self.at, self.reason)
    }
}

/// A plan read back from its [`Plan::text`]: what, when, why.
pub fn parse_plan_text(text: &str) -> Option<(LifecycleAction, Timestamp, &str)> {
    let (action, rest) = if let Some(rest) = text.strip_prefix("suspend at ") {
        (LifecycleAction::Suspend, rest)
    } else {
        (LifecycleAction::Delete, text.strip_prefix("delete at ")?)
    };
    let (at, reason) = rest.split_once(": ")?;
    Some((action, at.parse().ok()?, reason))
}

/// What the reaper does for one cluster now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// The policy has nothing to do with it.
    Nothing,
    /// Not yet: nothing to do before the plan's warning.
    Wait(Plan),
    /// Warn the owner now; the action comes `warn_before` later at the
    /// earliest.
    Warn(Plan),
    /// Do it now.
    Act(Plan),
}

/// The next thing the policy will do to the cluster, if anything.
pub fn plan(policy: &LifecyclePolicy, s: &Signals) -> Option<Plan> {
    let kept = |at: Timestamp| s.kept_until.map_or(at, |k| at.max(k));
    let lifetime = policy.max_lifetime.and_then(|d| {
        let action = match policy.on_expiry {
            OnExpiry::Delete => LifecycleAction::Delete,
            OnExpiry::Suspend if s.suspended => return None,
            OnExpiry::Suspend => LifecycleAction::Suspend,
        };
        Some((
            action,
            kept(s.created_at.saturating_add(d.0).ok()?),
            LifecycleReason::Lifetime(d.0),
        ))
    });
    let idle = match (policy.idle_after, s.idle_since, s.suspended) {
        (Some(d), Some(since), false) => {
            let at = kept(since.saturating_add(d.0).ok()?);
            Some((
                LifecycleAction::Suspend,
                at,
                LifecycleReason::Idle(at.duration_since(since)),
            ))
        }
        _ => None,
    };
    // The earlier wins; at the same time, a delete.
    let (action, at, reason) = [lifetime, idle]
        .into_iter()
        .flatten()
        .min_by_key(|(action, at, _)| (*at, *action != LifecycleAction::Delete))?;
    let warn_at = at.saturating_sub(policy.warn_before()).ok()?;
    Some(Plan {
        action,
        at,
        warn_at,
        reason,
    })
}

/// What to do now. A warning counts for a plan when it came no earlier
/// than the plan's own warning time (one from an earlier idle spell does
/// not); the action waits `warn_before` after it.
pub fn step(policy: &LifecyclePolicy, s: &Signals, now: Timestamp) -> Step {
    let Some(plan) = plan(policy, s) else {
        return Step::Nothing;
    };
    if now < plan.warn_at {
        return Step::Wait(plan);
    }
    let Some(warned) = s.warned_at.filter(|w| *w >= plan.warn_at) else {
        return Step::Warn(plan);
    };
    let due = warned
        .saturating_add(policy.warn_before())
        .map_or(plan.at, |after_warning| plan.at.max(after_warning));
    if now >= due { Step::Act(plan) } else { Step::Wait(plan) }
}

/// Until when `krayne keep` may postpone, asked at `now`.
pub fn keep_limit(policy: &LifecyclePolicy, now: Timestamp) -> Option<Timestamp> {
    policy.keep_max.and_then(|d| now.saturating_add(d.0).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(yaml: &str) -> LifecyclePolicy {
        let p: LifecyclePolicy = serde_saphyr::from_str(yaml).unwrap();
        p.check().unwrap();
        p
    }

    fn at(minutes: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + minutes * 60).unwrap()
    }

    fn signals() -> Signals {
        Signals {
            created_at: at(0),
            idle_since: None,
            kept_until: None,
            warned_at: None,
            suspended: false,
        }
    }

    #[test]
    fn durations_read_as_people_write_them() {
        assert_eq!(parse_duration("90m").unwrap(), SignedDuration::from_mins(90));
        assert_eq!(parse_duration("7d").unwrap(), SignedDuration::from_hours(168));
        assert_eq!(parse_duration("1h30m").unwrap(), SignedDuration::from_mins(90));
        assert!(parse_duration("0s").unwrap_err().contains("more than zero"));
        assert!(parse_duration("soon").unwrap_err().contains("try 30s"));
        assert_eq!(Span(SignedDuration::from_mins(124)).to_string(), "2h04m");
        assert_eq!(Span(SignedDuration::from_hours(168)).to_string(), "7d");
        assert_eq!(Span(SignedDuration::from_secs(45)).to_string(), "45s");
    }

    #[test]
    fn a_policy_that_cannot_be_carried_out_is_refused() {
        let refused = |yaml: &str| {
            let p: LifecyclePolicy = serde_saphyr::from_str(yaml).unwrap();
            p.check().unwrap_err()
        };
        assert!(refused("warn_before: 5m").contains("idle_after, max_lifetime"));
        assert!(refused("idle_after: 10m").contains("warn_before (15m) must be shorter than idle_after (10m)"));
        assert!(refused("idle_after: 2h\non_expiry: delete").contains("needs max_lifetime"));
        assert!(serde_saphyr::from_str::<LifecyclePolicy>("idle_after: soon").is_err());
        assert!(serde_saphyr::from_str::<LifecyclePolicy>("idle_afterr: 2h").is_err());
        assert!(serde_saphyr::from_str::<LifecyclePolicy>("max_lifetime: 7d\non_expiry: archive").is_err());
    }

    #[test]
    fn an_idle_cluster_is_warned_then_suspended_and_use_starts_over() {
        let p = policy("idle_after: 2h\nwarn_before: 10m");
        assert_eq!(step(&p, &signals(), at(600)), Step::Nothing, "in use: never idle");
        let idle = Signals {
            idle_since: Some(at(60)),
            ..signals()
        };
        let Step::Wait(plan) = step(&p, &idle, at(100)) else {
            panic!()
        };
        assert_eq!(
            (plan.action, plan.at, plan.warn_at),
            (LifecycleAction::Suspend, at(180), at(170))
        );
        assert_eq!(plan.reason.to_string(), "idle 2h");
        assert!(matches!(step(&p, &idle, at(170)), Step::Warn(_)));
        let warned = Signals {
            warned_at: Some(at(170)),
            ..idle
        };
        assert!(matches!(step(&p, &warned, at(175)), Step::Wait(_)));
        assert!(matches!(step(&p, &warned, at(180)), Step::Act(_)));
        // Used again after the warning, then idle again: the old warning
        // does not count.
        let again = Signals {
            idle_since: Some(at(200)),
            ..warned
        };
        assert!(matches!(step(&p, &again, at(310)), Step::Warn(_)));
    }

    #[test]
    fn a_late_warning_pushes_the_action_back() {
        let p = policy("idle_after: 2h\nwarn_before: 10m");
        let s = Signals {
            idle_since: Some(at(0)),
            ..signals()
        };
        // The reaper was away: first seen long past the time.
        assert!(matches!(step(&p, &s, at(500)), Step::Warn(_)));
        let warned = Signals {
            warned_at: Some(at(500)),
            ..s
        };
        assert!(matches!(step(&p, &warned, at(505)), Step::Wait(_)));
        assert!(matches!(step(&p, &warned, at(510)), Step::Act(_)));
    }

    #[test]
    fn lifetime_comes_first_when_earlier_deletes_and_keep_postpones() {
        let p = policy("idle_after: 2h\nmax_lifetime: 3h\non_expiry: delete\nwarn_before: 10m\nkeep_max: 4h");
        let s = Signals {
            idle_since: Some(at(120)),
            ..signals()
        };
        let plan = plan(&p, &s).unwrap();
        assert_eq!((plan.action, plan.at), (LifecycleAction::Delete, at(180)));
        assert_eq!(plan.reason.to_string(), "lifetime 3h reached");
        let kept = Signals {
            kept_until: Some(at(400)),
            ..s
        };
        let plan = super::plan(&p, &kept).unwrap();
        assert_eq!(plan.at, at(400), "both postponed; delete wins a tie");
        assert_eq!(plan.action, LifecycleAction::Delete);
        assert_eq!(keep_limit(&p, at(100)), Some(at(340)));
        assert_eq!(keep_limit(&policy("idle_after: 1h"), at(100)), None);
    }

    #[test]
    fn a_plan_reads_back_from_its_text() {
        let p = policy("idle_after: 2h\nwarn_before: 10m");
        let s = Signals {
            idle_since: Some(at(0)),
            ..signals()
        };
        let plan = plan(&p, &s).unwrap();
        let text = plan.text();
        assert_eq!(text, format!("suspend at {}: idle 2h", at(120)));
        assert_eq!(
            parse_plan_text(&text),
            Some((LifecycleAction::Suspend, at(120), "idle 2h"))
        );
        assert_eq!(parse_plan_text("archive at never: why"), None);
        assert_eq!(parse_plan_text("delete at 2026-11-27T09:00:00Z"), None);
    }

    #[test]
    fn a_suspended_cluster_is_only_deleted_at_its_lifetime() {
        let suspended = Signals {
            idle_since: Some(at(0)),
            suspended: true,
            ..signals()
        };
        assert_eq!(plan(&policy("idle_after: 1h\nmax_lifetime: 7d"), &suspended), None);
        let delete = policy("max_lifetime: 7d\non_expiry: delete");
        assert_eq!(plan(&delete, &suspended).unwrap().action, LifecycleAction::Delete);
    }
}
