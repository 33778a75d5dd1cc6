//! Whether each site answers, as the fleet's one health task finds it.

use std::sync::{
    Mutex, PoisonError,
    atomic::{AtomicBool, AtomicU32, Ordering},
};

/// Failed checks in a row that make a site that answered before down: one
/// slow answer under load is no outage. A site that never answered is
/// down at its first failure.
const FAILURES_TO_DOWN: u32 = 2;

/// One site's health, shared with the fleet's feed.
#[derive(Default)]
pub(super) struct Health {
    down_since: Mutex<Option<jiff::Timestamp>>,
    failures: AtomicU32,
    answered: AtomicBool,
}

/// What one check changed.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Change {
    /// Nothing.
    None,
    /// It answers again.
    Up,
    /// It is down from now.
    Down,
}

impl Health {
    /// Since when it has not answered, if it has not.
    pub(super) fn down(&self) -> Option<jiff::Timestamp> {
        *self.down_since.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether it was checked yet (it answered once, or is down).
    pub(super) fn known(&self) -> bool {
        self.answered.load(Ordering::Relaxed) || self.down().is_some()
    }

    /// Records one check's answer.
    pub(super) fn checked(&self, up: bool) -> Change {
        let failures = if up {
            self.answered.store(true, Ordering::Relaxed);
            self.failures.store(0, Ordering::Relaxed);
            0
        } else {
            self.failures.fetch_add(1, Ordering::Relaxed).saturating_add(1)
        };
        let needed = if self.answered.load(Ordering::Relaxed) {
            FAILURES_TO_DOWN
        } else {
            1
        };
        let mut down = self.down_since.lock().unwrap_or_else(PoisonError::into_inner);
        match (up, down.is_some()) {
            (true, true) => {
                *down = None;
                Change::Up
            }
            (false, false) if failures >= needed => {
                *down = Some(jiff::Timestamp::now());
                Change::Down
            }
            _ => Change::None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_site_that_answered_is_down_after_two_failures_and_up_at_its_next_answer() {
        let h = Health::default();
        assert!(!h.known());
        assert_eq!(h.checked(true), Change::None);
        assert!(h.known() && h.down().is_none());
        assert_eq!(h.checked(false), Change::None);
        assert_eq!(h.checked(false), Change::Down);
        assert!(h.down().is_some());
        assert_eq!(h.checked(false), Change::None);
        assert_eq!(h.checked(true), Change::Up);
        assert_eq!(h.down(), None);
    }

    #[test]
    fn a_site_that_never_answered_is_down_at_once() {
        let h = Health::default();
        assert_eq!(h.checked(false), Change::Down);
        assert!(h.known());
    }
}
