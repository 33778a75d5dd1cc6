//! One background task and the loop the driver runs it in.

use std::{sync::Arc, time::Duration};

use futures::future::BoxFuture;
use tokio::{sync::Notify, time::MissedTickBehavior};
use tokio_util::sync::CancellationToken;

use crate::domain::Leadership;

/// What to run and when: every period (a late run delays the next, never
/// doubles it), only while this replica leads when it has an election,
/// sooner when woken.
pub(crate) struct Task {
    name: &'static str,
    every: Duration,
    first_at_once: bool,
    leading: Option<Arc<dyn Leadership>>,
    woken_by: Option<Arc<Notify>>,
    pause_after: Duration,
    final_run: bool,
    until: Option<CancellationToken>,
    /// Runs once, ended (not waited for) at the stop.
    once: bool,
    run: Box<dyn FnMut() -> BoxFuture<'static, ()> + Send>,
}

impl std::fmt::Debug for Task {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Task")
            .field("name", &self.name)
            .field("every", &self.every)
            .finish_non_exhaustive()
    }
}

impl Task {
    /// `run` now, then every `every`.
    pub(crate) fn every(
        name: &'static str,
        every: Duration,
        run: impl FnMut() -> BoxFuture<'static, ()> + Send + 'static,
    ) -> Self {
        Self {
            name,
            every: every.max(Duration::from_millis(1)),
            first_at_once: true,
            leading: None,
            woken_by: None,
            pause_after: Duration::ZERO,
            final_run: false,
            until: None,
            once: false,
            run: Box::new(run),
        }
    }

    /// A task that is one long loop of its own (waiting on events, not
    /// on a clock): run once, ended by the driver's stop.
    pub(crate) fn forever(name: &'static str, run: BoxFuture<'static, ()>) -> Self {
        let mut once = Some(run);
        let mut task = Self::every(name, Duration::ZERO, move || {
            once.take().unwrap_or_else(|| Box::pin(async {}))
        });
        task.once = true;
        task
    }

    /// Only while this replica holds `leadership` (waited for before each
    /// run).
    #[must_use]
    pub(crate) fn while_leading(mut self, leadership: Option<Arc<dyn Leadership>>) -> Self {
        self.leading = leadership;
        self
    }

    /// Also soon after `notify` fires; the first run waits a period.
    #[must_use]
    pub(crate) fn woken_by(mut self, notify: Arc<Notify>) -> Self {
        self.woken_by = Some(notify);
        self.first_at_once = false;
        self
    }

    /// At least `pause` between the end of one run and the next.
    #[must_use]
    pub(crate) fn pause_after(mut self, pause: Duration) -> Self {
        self.pause_after = pause;
        self
    }

    /// One last run when stopped (to write what is held).
    #[must_use]
    pub(crate) fn final_run(mut self) -> Self {
        self.final_run = true;
        self
    }

    /// Ends (besides with the driver) when `token` is cancelled.
    #[must_use]
    pub(crate) fn until(mut self, token: CancellationToken) -> Self {
        self.until = Some(token);
        self
    }

    /// Its name, for logs and metrics.
    pub(crate) fn name(&self) -> &'static str {
        self.name
    }

    /// Runs the task until `halt` (or its own end) is cancelled. A run
    /// under way then finishes (the driver's stop bounds how long), except
    /// a [`Self::forever`] task's, which ends at once.
    pub(crate) async fn drive(self, halt: CancellationToken) {
        let Self {
            name,
            every,
            first_at_once,
            leading,
            woken_by,
            pause_after,
            final_run,
            until,
            once,
            mut run,
        } = self;
        let end = || stopped(&halt, until.as_ref());
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        if !first_at_once {
            tick.reset();
        }
        loop {
            let stopping = tokio::select! {
                biased;
                () = end() => true,
                () = due(leading.as_deref(), woken_by.as_deref(), &mut tick) => false,
            };
            if stopping && !final_run {
                return;
            }
            if once {
                tokio::select! {
                    () = end() => {}
                    () = measured(name, run()) => {}
                }
                return;
            }
            measured(name, run()).await;
            if stopping {
                return;
            }
            if !pause_after.is_zero() {
                tokio::time::sleep(pause_after).await;
            }
        }
    }
}

/// When the next run is due: once this replica leads (if it must), at the
/// next tick or when woken.
async fn due(leading: Option<&dyn Leadership>, woken_by: Option<&Notify>, tick: &mut tokio::time::Interval) {
    if let Some(leadership) = leading {
        leadership.leading().await;
    }
    match woken_by {
        Some(notify) => tokio::select! {
            _ = tick.tick() => {}
            () = notify.notified() => {}
        },
        None => {
            tick.tick().await;
        }
    }
}

/// One run, with the driver's metrics.
async fn measured(task: &'static str, run: BoxFuture<'static, ()>) {
    let started = std::time::Instant::now();
    run.await;
    metrics::counter!("krayne_background_runs_total", "task" => task).increment(1);
    metrics::histogram!("krayne_background_run_seconds", "task" => task).record(started.elapsed().as_secs_f64());
    #[expect(clippy::cast_precision_loss, reason = "a gauge of seconds")]
    let now = jiff::Timestamp::now().as_millisecond() as f64 / 1000.0;
    metrics::gauge!("krayne_background_last_run_timestamp_seconds", "task" => task).set(now);
}

/// Resolves when the driver halts or the task's own end comes.
async fn stopped(halt: &CancellationToken, own: Option<&CancellationToken>) {
    match own {
        Some(own) => tokio::select! {
            () = halt.cancelled() => {}
            () = own.cancelled() => {}
        },
        None => halt.cancelled().await,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// A leadership a test hands over.
    struct Handed(tokio::sync::watch::Receiver<bool>);

    #[async_trait::async_trait]
    impl Leadership for Handed {
        async fn leading(&self) {
            let _ = self.0.clone().wait_for(|leads| *leads).await;
        }

        async fn holds(&self) -> bool {
            *self.0.borrow()
        }
    }

    /// A task body that counts its runs.
    fn counting() -> (
        Arc<AtomicUsize>,
        impl FnMut() -> BoxFuture<'static, ()> + Send + 'static,
    ) {
        let runs = Arc::new(AtomicUsize::new(0));
        let counted = runs.clone();
        (runs, move || {
            let counted = counted.clone();
            Box::pin(async move {
                counted.fetch_add(1, Ordering::SeqCst);
            }) as BoxFuture<'static, ()>
        })
    }

    /// Lets the driven task reach its next wait.
    async fn settle() {
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_periodic_task_runs_at_once_then_every_period_until_halted() {
        let (runs, body) = counting();
        let halt = CancellationToken::new();
        let driven = tokio::spawn(Task::every("t", Duration::from_secs(10), body).drive(halt.clone()));
        settle().await;
        assert_eq!(runs.load(Ordering::SeqCst), 1, "at once");
        tokio::time::advance(Duration::from_secs(10)).await;
        settle().await;
        assert_eq!(runs.load(Ordering::SeqCst), 2, "a period later");
        halt.cancel();
        driven.await.unwrap();
        assert_eq!(runs.load(Ordering::SeqCst), 2, "no run at the end unless asked");
    }

    #[tokio::test(start_paused = true)]
    async fn an_elected_task_waits_for_the_lease_and_a_recorder_runs_once_more_at_the_end() {
        let (runs, body) = counting();
        let (hand, leads) = tokio::sync::watch::channel(false);
        let halt = CancellationToken::new();
        let task = Task::every("t", Duration::from_secs(10), body)
            .while_leading(Some(Arc::new(Handed(leads))))
            .final_run();
        let driven = tokio::spawn(task.drive(halt.clone()));
        tokio::time::advance(Duration::from_secs(30)).await;
        settle().await;
        assert_eq!(runs.load(Ordering::SeqCst), 0, "not before it leads");
        hand.send(true).unwrap();
        settle().await;
        assert_eq!(runs.load(Ordering::SeqCst), 1, "once it leads");
        halt.cancel();
        driven.await.unwrap();
        assert_eq!(runs.load(Ordering::SeqCst), 2, "the last run at the stop");
    }

    #[tokio::test(start_paused = true)]
    async fn a_woken_task_waits_a_period_first_and_a_loop_of_its_own_ends_at_the_stop() {
        let (runs, body) = counting();
        let wake = Arc::new(Notify::new());
        let halt = CancellationToken::new();
        let task = Task::every("t", Duration::from_secs(60), body).woken_by(wake.clone());
        let driven = tokio::spawn(task.drive(halt.clone()));
        settle().await;
        assert_eq!(runs.load(Ordering::SeqCst), 0, "a recorder has nothing at once");
        wake.notify_one();
        settle().await;
        assert_eq!(runs.load(Ordering::SeqCst), 1, "woken");
        halt.cancel();
        driven.await.unwrap();

        let halt = CancellationToken::new();
        let forever = Task::forever("loop", Box::pin(std::future::pending()));
        let driven = tokio::spawn(forever.drive(halt.clone()));
        settle().await;
        halt.cancel();
        tokio::time::timeout(Duration::from_secs(1), driven)
            .await
            .expect("an event loop is ended, not waited for")
            .unwrap();
    }
}
