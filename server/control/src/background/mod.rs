//! The background driver: every periodic and leader-elected task of a
//! replica, started in one place. The composition root calls
//! [`ControlPlane::start_background`] once; nothing else in the use cases
//! spawns work that outlives a request (`server/tests/layering.rs` keeps
//! it so). Each task is named, measured (`krayne_background_runs_total`,
//! `krayne_background_run_seconds`, `krayne_background_last_run_timestamp_seconds`,
//! by `task`) and stopped with the server ([`Driver::stop`]).
//!
//! As Oxide's Nexus `background/driver.rs`: the tasks say what they do
//! ([`tasks`]); the driver says when.

mod task;
mod tasks;

use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub(crate) use self::task::Task;
pub use self::tasks::{BackgroundWork, MappingReload, ReaperWork, SoleReplica};
use crate::ControlPlane;

/// The running background tasks of a replica.
#[derive(Debug)]
pub struct Driver {
    halt: CancellationToken,
    running: Vec<(&'static str, JoinHandle<()>)>,
}

impl Driver {
    /// Starts `tasks`, each on its own.
    fn start(tasks: Vec<Task>) -> Self {
        let halt = CancellationToken::new();
        let running = tasks
            .into_iter()
            .map(|task| (task.name(), tokio::spawn(task.drive(halt.clone()))))
            .collect();
        Self { halt, running }
    }

    /// The names of the tasks it runs, in the order started.
    pub fn tasks(&self) -> Vec<&'static str> {
        self.running.iter().map(|(name, _)| *name).collect()
    }

    /// Stops every task: those that run once more at the end (the
    /// activity recorder's last write) do, within `within`; what still
    /// runs then is aborted.
    pub async fn stop(self, within: Duration) {
        self.halt.cancel();
        let deadline = tokio::time::Instant::now() + within;
        for (name, mut handle) in self.running {
            if tokio::time::timeout_at(deadline, &mut handle).await.is_err() {
                tracing::warn!(task = name, "a background task did not stop in time; aborted");
                handle.abort();
            }
        }
    }
}

impl ControlPlane {
    /// Starts the replica's background work: what every server runs
    /// (gauges, dependency probes, denial windows, the watch hub, the
    /// activity recorder when there is a ledger) and what `work` adds (the
    /// lifecycle reaper, the companion keeper's election, the mapping
    /// reload). Called once, by the composition root.
    pub fn start_background(&self, work: BackgroundWork) -> Driver {
        self.start_watch_hub();
        Driver::start(self.background_tasks(work))
    }
}
