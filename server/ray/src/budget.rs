//! The memory a replica gives to heads' answers being read: one budget
//! for all heads, and a quarter of it at most for the heads of any one
//! namespace, so that one team's heads — which answer whatever the team
//! wants — cannot take the rest's share. What an answer holds is given
//! back when it is dropped.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The budget's unit, in bytes.
const UNIT: usize = 1024;
/// Namespaces whose shares are kept; past it, idle shares are forgotten.
const MAX_SHARES: usize = 4096;

/// `bytes` as units (rounded up).
pub(crate) fn units(bytes: usize) -> usize {
    bytes.div_ceil(UNIT).min(Semaphore::MAX_PERMITS)
}

/// The bytes to reserve as an answer grows from `before` bytes to
/// `after`: whole units, so that an answer read in many odd-sized frames
/// holds no more than its length rounded up once.
pub(crate) fn growth(before: usize, after: usize) -> usize {
    units(after).saturating_sub(units(before)) * UNIT
}

/// What is left of the budget, all together and per namespace.
#[derive(Debug)]
pub(crate) struct HeadBudget {
    all: Arc<Semaphore>,
    share: usize,
    shares: Mutex<HashMap<String, Arc<Semaphore>>>,
    /// krayne's own reads' half (the reaper's), which they wait for
    /// rather than being refused: at platform scale a pass asks many heads
    /// at once, and it must neither fail for want of memory nor take the
    /// callers' half.
    system: Arc<Semaphore>,
}

/// Which budget an answer would pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Spent {
    /// The replica's, all heads together.
    All,
    /// The namespace's share.
    Namespace,
}

/// Part of the budget, held by one answer.
#[derive(Debug)]
pub(crate) struct Held {
    all: OwnedSemaphorePermit,
    namespace: Option<OwnedSemaphorePermit>,
    system: Option<OwnedSemaphorePermit>,
}

impl HeadBudget {
    /// A budget of `bytes`, a quarter of it per namespace — but never
    /// less than `one_read` (the largest one read may hold), so that every
    /// read can be had.
    pub(crate) fn new(bytes: usize, one_read: usize) -> Self {
        let all = units(bytes);
        Self {
            all: Arc::new(Semaphore::new(all)),
            share: (all / 4).max(units(one_read)).min(all),
            shares: Mutex::default(),
            system: Arc::new(Semaphore::new((all / 2).max(units(one_read)).min(all))),
        }
    }

    /// `more` bytes for one of krayne's own reads: waited for within its
    /// half, then taken from the whole (refused if callers hold the rest).
    pub(crate) async fn reserve_system(&self, held: &mut Option<Held>, more: usize) -> Result<(), Spent> {
        let Some(more) = permits(more)? else {
            return Ok(());
        };
        let in_system = self
            .system
            .clone()
            .acquire_many_owned(more)
            .await
            .map_err(|_| Spent::All)?;
        let in_all = self.all.clone().try_acquire_many_owned(more).map_err(|_| Spent::All)?;
        add(held, in_all, None, Some(in_system));
        Ok(())
    }

    /// `more` bytes for an answer, added to what `held` holds already;
    /// counted against `namespace`'s share too, when one is named.
    pub(crate) fn reserve(&self, namespace: Option<&str>, held: &mut Option<Held>, more: usize) -> Result<(), Spent> {
        let Some(more) = permits(more)? else {
            return Ok(());
        };
        let in_namespace = match namespace {
            Some(namespace) => Some(
                self.share_of(namespace)
                    .try_acquire_many_owned(more)
                    .map_err(|_| Spent::Namespace)?,
            ),
            None => None,
        };
        let in_all = self.all.clone().try_acquire_many_owned(more).map_err(|_| Spent::All)?;
        add(held, in_all, in_namespace, None);
        Ok(())
    }

    fn share_of(&self, namespace: &str) -> Arc<Semaphore> {
        let mut shares = self.shares.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(share) = shares.get(namespace) {
            return share.clone();
        }
        if shares.len() >= MAX_SHARES {
            // A share no answer holds is whole: forgetting it loses nothing.
            shares.retain(|_, s| s.available_permits() < self.share);
        }
        shares
            .entry(namespace.to_owned())
            .or_insert_with(|| Arc::new(Semaphore::new(self.share)))
            .clone()
    }
}

/// The permits `more` bytes take (`None`: none); past a semaphore's
/// reach, refused.
fn permits(more: usize) -> Result<Option<u32>, Spent> {
    let more = u32::try_from(units(more)).map_err(|_| Spent::All)?;
    Ok((more > 0).then_some(more))
}

/// Adds permits to what `held` holds.
fn add(
    held: &mut Option<Held>,
    all: OwnedSemaphorePermit,
    namespace: Option<OwnedSemaphorePermit>,
    system: Option<OwnedSemaphorePermit>,
) {
    let Some(h) = held else {
        *held = Some(Held { all, namespace, system });
        return;
    };
    h.all.merge(all);
    for (slot, more) in [(&mut h.namespace, namespace), (&mut h.system, system)] {
        match (slot.as_mut(), more) {
            (Some(kept), Some(more)) => kept.merge(more),
            (None, more) => *slot = more,
            (Some(_), None) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The callers' half is theirs while krayne's own reads wait.
    fn budget_for_callers_stays(budget: &HeadBudget) {
        let mut held = None;
        budget.reserve(Some("team"), &mut held, 16 * 1024).unwrap();
    }

    #[test]
    fn a_namespace_takes_at_most_its_share_and_gives_it_back() {
        let budget = HeadBudget::new(64 * 1024, 1);
        let mut first = None;
        budget.reserve(Some("greedy"), &mut first, 16 * 1024).unwrap();
        assert_eq!(budget.reserve(Some("greedy"), &mut None, 1), Err(Spent::Namespace));
        let mut held: Vec<Option<Held>> = Vec::new();
        for namespace in ["b", "c", "d"] {
            let mut h = None;
            budget.reserve(Some(namespace), &mut h, 16 * 1024).unwrap();
            held.push(h);
        }
        assert_eq!(budget.reserve(Some("e"), &mut None, 1), Err(Spent::All));
        drop(first);
        let mut again = None;
        budget.reserve(Some("greedy"), &mut again, 8 * 1024).unwrap();
        budget.reserve(Some("greedy"), &mut again, 8 * 1024).unwrap();
        let mut system = None;
        assert_eq!(
            budget.reserve(None, &mut system, 1),
            Err(Spent::All),
            "krayne's own reads count against the whole"
        );
        let small = HeadBudget::new(64 * 1024, 40 * 1024);
        let waiting = HeadBudget::new(64 * 1024, 1);
        let mut first = None;
        futures::executor::block_on(waiting.reserve_system(&mut first, 32 * 1024)).unwrap();
        let mut second = None;
        let pending = waiting.reserve_system(&mut second, 1);
        futures::pin_mut!(pending);
        assert!(
            futures::FutureExt::now_or_never(pending.as_mut()).is_none(),
            "krayne's own reads wait for their half"
        );
        budget_for_callers_stays(&waiting);
        drop(first);
        futures::executor::block_on(pending).unwrap();
        small.reserve(Some("big"), &mut None, 40 * 1024).unwrap();
        assert_eq!(units(1), 1);
        let (mut read, mut reserved) = (0, 0);
        for frame in std::iter::repeat_n(1000, 4096) {
            reserved += growth(read, read + frame);
            read += frame;
        }
        assert_eq!(units(reserved), units(read), "frames of odd sizes round up once");
        assert_eq!(units(16 * 1024 * 1024), 16_384);
    }
}
