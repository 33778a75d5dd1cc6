//! Which heads a pass asks, and in what order, so that a pass's length is
//! bounded whatever heads do: a head that did not answer in time is asked
//! again only after 2, 4, … up to [`MAX_SKIPPED`] passes (and is not idle
//! meanwhile: fail safe); the heads asked longest ago go first, so those a
//! pass's deadline left out are asked first by the next.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use crate::domain::ObservedCluster;

/// Most passes a slow head is left out.
const MAX_SKIPPED: u64 = 16;

/// A cluster by namespace and name.
pub(crate) type Key = (String, String);

#[derive(Debug, Default, Clone, Copy)]
struct Record {
    /// The pass that last asked it.
    asked: u64,
    /// Passes in a row its head did not answer in time.
    strikes: u32,
    /// The first pass that asks it again.
    next: u64,
}

/// What the reaper remembers of heads between passes (on the replica that
/// leads: a new leader starts afresh, asking every head).
#[derive(Debug, Default)]
pub(crate) struct HeadSchedule {
    inner: Mutex<Schedule>,
}

#[derive(Debug, Default)]
struct Schedule {
    pass: u64,
    heads: HashMap<Key, Record>,
}

/// One pass's plan: the clusters to ask, in order, and how many slow heads
/// it leaves out.
pub(crate) struct Planned {
    pub(crate) pass: u64,
    pub(crate) ask: Vec<Arc<ObservedCluster>>,
    pub(crate) skipped: usize,
}

fn key(c: &ObservedCluster) -> Key {
    (c.metadata.namespace.to_string(), c.metadata.name.to_string())
}

impl HeadSchedule {
    fn lock(&self) -> std::sync::MutexGuard<'_, Schedule> {
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The next pass's plan over `watched` (clusters gone are forgotten).
    pub(crate) fn plan(&self, watched: Vec<Arc<ObservedCluster>>) -> Planned {
        let mut s = self.lock();
        s.pass += 1;
        let pass = s.pass;
        let present: std::collections::HashSet<Key> = watched.iter().map(|c| key(c)).collect();
        s.heads.retain(|k, _| present.contains(k));
        let (mut ask, mut skipped) = (Vec::with_capacity(watched.len()), 0);
        for cluster in watched {
            match s.heads.get(&key(&cluster)) {
                Some(r) if r.next > pass => skipped += 1,
                Some(r) => ask.push((r.asked, cluster)),
                None => ask.push((0, cluster)),
            }
        }
        ask.sort_by_key(|(asked, _)| *asked);
        Planned {
            pass,
            ask: ask.into_iter().map(|(_, c)| c).collect(),
            skipped,
        }
    }

    /// `cluster`'s head answered (or was told about) in pass `pass`.
    pub(crate) fn answered(&self, cluster: &Key, pass: u64) {
        self.lock().heads.insert(
            cluster.clone(),
            Record {
                asked: pass,
                strikes: 0,
                next: pass + 1,
            },
        );
    }

    /// `cluster`'s head did not answer in time in pass `pass`.
    pub(crate) fn slow(&self, cluster: &Key, pass: u64) {
        let mut s = self.lock();
        let r = s.heads.entry(cluster.clone()).or_default();
        r.strikes = r.strikes.saturating_add(1);
        r.asked = pass;
        r.next = pass + (1_u64 << r.strikes.min(4)).min(MAX_SKIPPED);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(name: &str) -> Arc<ObservedCluster> {
        Arc::new(
            serde_json::from_value(serde_json::json!({
                "apiVersion": "ray.io/v1", "kind": "RayCluster",
                "metadata": {"name": name, "namespace": "ml"},
                "spec": {"headGroupSpec": {"template": {"spec": {"containers": []}}}}
            }))
            .unwrap(),
        )
    }

    fn names(p: &Planned) -> Vec<String> {
        p.ask.iter().map(|c| c.metadata.name.to_string()).collect()
    }

    #[test]
    fn slow_heads_are_asked_less_often_and_the_longest_unasked_first() {
        let schedule = HeadSchedule::default();
        let all = || vec![cluster("a"), cluster("b"), cluster("c")];
        let first = schedule.plan(all());
        assert_eq!(names(&first), ["a", "b", "c"]);
        // A pass's deadline left c out; b hung.
        schedule.answered(&("ml".into(), "a".into()), first.pass);
        schedule.slow(&("ml".into(), "b".into()), first.pass);
        let second = schedule.plan(all());
        assert_eq!(names(&second), ["c", "a"], "c never asked goes first; b sits out");
        assert_eq!(second.skipped, 1);
        let third = schedule.plan(all());
        assert_eq!(names(&third), ["c", "a", "b"]);
        schedule.slow(&("ml".into(), "b".into()), third.pass);
        let mut out = 0;
        for _ in 0..4 {
            out += schedule.plan(all()).skipped;
        }
        assert_eq!(out, 3, "a second strike sits out three more passes");
    }
}
