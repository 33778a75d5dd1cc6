//! Per-principal request rates: one token bucket (GCRA) per subject, so a
//! runaway pipeline slows down itself, not every other team.

use std::{
    num::NonZeroU32,
    sync::atomic::{AtomicU64, Ordering},
    time::Duration,
};

use governor::{
    DefaultKeyedRateLimiter, Quota, RateLimiter,
    clock::{Clock as _, DefaultClock},
};

use crate::domain::{Error, Principal};

/// A steady rate and the burst allowed above it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    /// Requests per second, sustained.
    pub per_second: NonZeroU32,
    /// Requests allowed at once after a quiet spell.
    pub burst: NonZeroU32,
}

impl RateLimit {
    /// `per_second` with `burst`; `None` when `per_second` is 0 (no limit).
    /// A burst below the rate is raised to it.
    pub fn new(per_second: u32, burst: u32) -> Option<Self> {
        let per_second = NonZeroU32::new(per_second)?;
        let burst = NonZeroU32::new(burst.max(per_second.get())).unwrap_or(per_second);
        Some(Self { per_second, burst })
    }
}

/// One token bucket (GCRA) per key: a principal's subject, or a source
/// address for refused authentications.
pub(super) struct KeyedRate {
    limiter: Option<DefaultKeyedRateLimiter<String>>,
    clock: DefaultClock,
    checks: AtomicU64,
}

/// How often (in checks) buckets of idle keys are forgotten.
const SWEEP_EVERY: u64 = 4096;

impl KeyedRate {
    /// Buckets of `limit`; `None` admits everything.
    pub(super) fn new(limit: Option<RateLimit>) -> Self {
        Self {
            limiter: limit.map(|l| RateLimiter::keyed(Quota::per_second(l.per_second).allow_burst(l.burst))),
            clock: DefaultClock::default(),
            checks: AtomicU64::new(0),
        }
    }

    /// Takes one from `key`'s bucket; how long to wait when it is empty.
    pub(super) fn over(&self, key: &str) -> Option<Duration> {
        let limiter = self.limiter.as_ref()?;
        if self.checks.fetch_add(1, Ordering::Relaxed) % SWEEP_EVERY == SWEEP_EVERY - 1 {
            limiter.retain_recent();
        }
        limiter
            .check_key(&key.to_owned())
            .err()
            .map(|not_until| not_until.wait_time_from(self.clock.now()).max(Duration::from_millis(1)))
    }
}

/// Admits or refuses requests by their principal's rate.
pub(super) struct Admission(KeyedRate);

impl Admission {
    pub(super) fn new(limit: Option<RateLimit>) -> Self {
        Self(KeyedRate::new(limit))
    }

    /// `RateLimited` (with when to retry) if `principal` is over its rate.
    pub(super) fn admit(&self, principal: &Principal) -> Result<(), Error> {
        match self.0.over(&principal.subject) {
            None => Ok(()),
            Some(retry_after) => {
                metrics::counter!("krayne_rate_limited_total").increment(1);
                Err(Error::RateLimited { retry_after })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn principal(subject: &str) -> Principal {
        Principal {
            subject: subject.into(),
            email: None,
            groups: Vec::new(),
            teams: Vec::new(),
            global_admin: false,
            grants: Vec::new(),
            expires_at: None,
            issuer: None,
        }
    }

    #[test]
    fn a_burst_is_admitted_then_refused_with_a_retry_time() {
        let a = Admission::new(RateLimit::new(1, 3));
        let (busy, quiet) = (principal("busy"), principal("quiet"));
        for _ in 0..3 {
            a.admit(&busy).unwrap();
        }
        match a.admit(&busy) {
            Err(Error::RateLimited { retry_after }) => {
                assert!(retry_after > Duration::ZERO && retry_after <= Duration::from_secs(1));
            }
            other => panic!("expected RateLimited, got {other:?}"),
        }
        a.admit(&quiet).unwrap();
    }

    #[test]
    fn zero_means_no_limit() {
        assert_eq!(RateLimit::new(0, 10), None);
        let a = Admission::new(None);
        for _ in 0..10_000 {
            a.admit(&principal("p")).unwrap();
        }
        assert_eq!(RateLimit::new(5, 1).unwrap().burst.get(), 5);
    }
}
