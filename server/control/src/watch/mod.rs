//! Live watches of clusters and of RayJobs, served from the watch cache: a watcher costs
//! Kubernetes nothing. Each watcher has its own bounded queue; one that
//! stays full (the client reads too slowly) ends the watch with a reason
//! instead of buffering without bound.

mod hub;

use std::{
    collections::HashMap,
    pin::Pin,
    sync::{Arc, OnceLock},
    task::{Context as TaskContext, Poll},
    time::Duration,
};

use self::hub::Hub;
use super::{
    Context, ControlPlane,
    streams::kit::{OpenStreams, Permit},
    streams::{Ended, StreamGuard, StreamKind},
};
use crate::domain::{
    Action, ClusterFeed, Error, Principal, WatchEvent, WatchEventType, WatchFrom, WatchVersion, WatchedKind,
    audit::AuditAction,
};
use futures::Stream;
use tokio::sync::{
    broadcast::{self, error::RecvError},
    mpsc, oneshot,
};

/// Limits of live watches.
#[derive(Debug, Clone)]
pub struct WatchSettings {
    /// Watches one principal may have open at once.
    pub max_per_principal: usize,
    /// Watches of one namespace all callers together may have open (a
    /// watch of every namespace counts against its caller only).
    pub max_per_namespace: usize,
    /// Changes kept for resumes; a version older than these is `Gone`.
    pub history: usize,
    /// Events queued for one watcher before it counts as stalled.
    pub queue: usize,
    /// How long a watcher's queue may stay full before the watch is cut.
    pub stall: Duration,
    /// How often a watcher gets a bookmark.
    pub bookmark_every: Duration,
}

impl Default for WatchSettings {
    fn default() -> Self {
        Self {
            max_per_principal: 16,
            max_per_namespace: 64,
            history: 4096,
            queue: 256,
            stall: Duration::from_secs(10),
            bookmark_every: Duration::from_secs(30),
        }
    }
}

/// The hub (started by the first watch) and the open watches.
pub(super) struct Watches {
    hub: OnceLock<Arc<Hub>>,
    open: Arc<OpenStreams>,
}

impl Default for Watches {
    fn default() -> Self {
        Self {
            hub: OnceLock::new(),
            open: Arc::new(OpenStreams::counted_by("krayne_watches_open")),
        }
    }
}

/// A live watch: events, then (when the server ends it) one error saying
/// why; it simply ends when the client goes, or after a last bookmark
/// when the time the caller asked for is up.
pub struct ClusterWatch {
    events: mpsc::Receiver<Arc<WatchEvent>>,
    ended: Option<oneshot::Receiver<Error>>,
}

impl Stream for ClusterWatch {
    type Item = Result<Arc<WatchEvent>, Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Option<Self::Item>> {
        match self.events.poll_recv(cx) {
            Poll::Ready(Some(event)) => return Poll::Ready(Some(Ok(event))),
            Poll::Pending => return Poll::Pending,
            Poll::Ready(None) => {}
        }
        let Some(ended) = self.ended.as_mut() else {
            return Poll::Ready(None);
        };
        let why = match Pin::new(ended).poll(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(why) => why.ok(),
        };
        self.ended = None;
        Poll::Ready(why.map(Err))
    }
}

/// Cluster summaries for one list ([`ControlPlane::summaries`]).
pub(super) struct Summaries(Option<Arc<Hub>>);

impl Summaries {
    /// The summaries of a page of clusters with their pods, in
    /// (namespace, name) order: the hub's where built from the same
    /// versions, else new ones.
    pub(super) fn page(&self, page: &[hub::PageItem<'_>]) -> Vec<Arc<crate::domain::Summary>> {
        match &self.0 {
            Some(hub) => hub.summaries_of(page),
            None => page
                .iter()
                .map(|(cluster, pods)| Arc::new(hub::summarize(cluster, pods)))
                .collect(),
        }
    }
}

/// Which namespaces a watch covers.
#[derive(Debug, Clone)]
enum Scope {
    /// One (the caller may view it).
    One(String),
    /// Every namespace the caller may view, as the mapping says now.
    Viewable,
}

/// One watcher's task: its caller, place in the stream and queue.
struct Watcher {
    hub: Arc<Hub>,
    /// The kind of object it passes on.
    what: WatchedKind,
    scope: Scope,
    principal: Principal,
    position: WatchVersion,
    live: broadcast::Receiver<Arc<WatchEvent>>,
    /// Namespaces granted after the watch began, from this change on.
    granted: HashMap<String, u64>,
    tx: mpsc::Sender<Arc<WatchEvent>>,
    ended: oneshot::Sender<Error>,
    settings: WatchSettings,
    /// Ends the watch at the credential's expiry and at shutdown (the
    /// mapping's revocations end it in `remap`).
    guard: StreamGuard,
    /// Where its end is counted and audited.
    service: ControlPlane,
    auth: Option<crate::auth::Authenticator>,
    /// When the watch ends as the caller asked (`timeout_seconds`).
    deadline: Option<tokio::time::Instant>,
    _permit: Permit,
}

impl ControlPlane {
    /// Every change to the clusters of `namespace` (of every namespace the
    /// caller may view when `None`) from `from` on, live (viewer), for at
    /// most `timeout` when one is given: then a bookmark, and the stream
    /// ends without an error. Refused before it starts: no viewer role, a
    /// version no longer held (`Gone`), too many watches open, no watch
    /// cache.
    pub async fn watch_clusters(
        &self,
        cx: &Context,
        namespace: Option<&str>,
        from: WatchFrom,
        timeout: Option<Duration>,
    ) -> Result<ClusterWatch, Error> {
        self.watch(cx, WatchedKind::Clusters, namespace, from, timeout).await
    }

    /// Every change to the RayJobs of `namespace` (of every namespace the
    /// caller may view when `None`), as [`Self::watch_clusters`] gives
    /// clusters': each event carries the RayJob as list shows it, its
    /// cluster's status included (its exit code is read by a get, once
    /// the job has ended).
    pub async fn watch_rayjobs(
        &self,
        cx: &Context,
        namespace: Option<&str>,
        from: WatchFrom,
        timeout: Option<Duration>,
    ) -> Result<ClusterWatch, Error> {
        self.watch(cx, WatchedKind::RayJobs, namespace, from, timeout).await
    }

    async fn watch(
        &self,
        cx: &Context,
        what: WatchedKind,
        namespace: Option<&str>,
        from: WatchFrom,
        timeout: Option<Duration>,
    ) -> Result<ClusterWatch, Error> {
        let action = match what {
            WatchedKind::Clusters => AuditAction::ClusterWatch,
            WatchedKind::RayJobs => AuditAction::RayJobWatch,
        };
        if let Some(ns) = namespace {
            self.authorize(cx, action, ns, None).await?;
        }
        let started = self.start_watch(cx, what, namespace, from, timeout);
        if let Err(e) = &started {
            self.record_refusal(cx, action, namespace, None, e).await;
        }
        let (watcher, backlog, watch) = started?;
        self.record_read(cx, action, namespace, None).await;
        tokio::spawn(watcher.run(backlog));
        Ok(watch)
    }

    fn start_watch(
        &self,
        cx: &Context,
        what: WatchedKind,
        namespace: Option<&str>,
        from: WatchFrom,
        timeout: Option<Duration>,
    ) -> Result<(Watcher, Vec<Arc<WatchEvent>>, ClusterWatch), Error> {
        if what == WatchedKind::RayJobs {
            self.rayjob_store()?;
        }
        let feed = self.store.feed().ok_or_else(|| {
            Error::Unavailable("live watches are served from the watch cache, which this server runs without".into())
        })?;
        if !feed.ready() {
            return Err(Error::Unavailable(
                "the watch cache has not finished its first list; try again shortly".into(),
            ));
        }
        let settings = self.settings.watches.clone();
        let subject = &cx.principal.subject;
        let holders = crate::streams::kit::Holders {
            subject: (subject, settings.max_per_principal),
            namespace: namespace.map(|ns| (ns, settings.max_per_namespace)),
        };
        let permit = self.watches.open.take_for(holders);
        let Ok(permit) = permit else {
            tracing::info!(%subject, ?namespace, full = ?permit.err(), "watch refused: too many open");
            return Err(Error::RateLimited {
                retry_after: Duration::from_secs(1),
            });
        };
        let hub = self.hub(feed, settings.history);
        let scope = namespace.map_or(Scope::Viewable, |ns| Scope::One(ns.to_owned()));
        let (tx, rx) = mpsc::channel(settings.queue.max(1));
        let (ended, ended_rx) = oneshot::channel();
        let (backlog, position, live) = {
            let mut held = hub.held();
            let principal = &cx.principal;
            let backlog = held.backlog(from, what, namespace, |ns| principal.may(Action::Read, ns))?;
            (backlog, held.version(), hub.subscribe())
        };
        let backlog = backlog.events();
        let watcher = Watcher {
            hub,
            what,
            scope,
            principal: cx.principal.clone(),
            position,
            live,
            granted: HashMap::new(),
            tx,
            ended,
            settings,
            guard: self.stream_guard(StreamKind::Watch, cx, namespace, None, None, None),
            service: self.clone(),
            auth: self.authenticator.clone(),
            deadline: timeout.map(|t| tokio::time::Instant::now() + t),
            _permit: permit,
        };
        let watch = ClusterWatch {
            events: rx,
            ended: Some(ended_rx),
        };
        Ok((watcher, backlog, watch))
    }

    /// Starts the watch hub (on a server with a watch cache) rather than
    /// with the first list or watch: it follows the cache from the start,
    /// and its task is there from the start.
    pub(crate) fn start_watch_hub(&self) {
        if let Some(feed) = self.store.feed() {
            self.hub(feed, self.settings.watches.history);
        }
    }

    /// Where a list gets its clusters' summaries: the watch hub's, when it
    /// runs (started with the server) and its cache has listed, else built
    /// on the spot. Asked once per list.
    pub(super) fn summaries(&self) -> Summaries {
        Summaries(self.watches.hub.get().filter(|h| h.ready()).cloned())
    }

    fn hub(&self, feed: Arc<dyn ClusterFeed>, keep: usize) -> Arc<Hub> {
        self.watches.hub.get_or_init(|| Hub::start(feed, keep)).clone()
    }
}

/// Why a watcher stopped delivering.
enum Stop {
    /// The client went away.
    Gone,
    /// The time the caller asked for is up (after a last bookmark).
    Expired,
    /// The server ends the watch, saying why.
    End(Error, &'static str),
}

impl Watcher {
    /// Delivers the backlog, a bookmark, then the live changes the caller
    /// may see, until the client goes or the watch must end.
    async fn run(mut self, backlog: Vec<Arc<WatchEvent>>) {
        let stop = self.deliver_all(backlog).await;
        let stop = match stop {
            Ok(()) => self.follow().await,
            Err(stop) => stop,
        };
        match stop {
            Stop::End(why, reason) => {
                metrics::counter!("krayne_watches_ended_total", "reason" => reason).increment(1);
                tracing::info!(subject = %self.principal.subject, reason, %why, "watch ended by the server");
                let _ = self.ended.send(why);
            }
            Stop::Expired => {
                metrics::counter!("krayne_watches_ended_total", "reason" => "timeout").increment(1);
            }
            Stop::Gone => {}
        }
    }

    async fn deliver_all(&mut self, backlog: Vec<Arc<WatchEvent>>) -> Result<(), Stop> {
        for event in backlog {
            if self.visible(&event) {
                self.deliver(event).await?;
            }
        }
        self.bookmark().await
    }

    async fn follow(&mut self) -> Stop {
        let mut reloads = self.auth.as_ref().map(crate::auth::Authenticator::reloads);
        let mut bookmarks = tokio::time::interval(self.settings.bookmark_every);
        bookmarks.reset();
        let deadline = self.deadline;
        let expired = async move {
            match deadline {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        let mut expired = std::pin::pin!(expired);
        let guard = self.guard.clone();
        let mut guard_ended = std::pin::pin!(guard.ended());
        loop {
            let reload = async {
                match reloads.as_mut() {
                    Some(r) => r.changed().await.is_ok(),
                    None => std::future::pending().await,
                }
            };
            let step = tokio::select! {
                biased;
                ended = &mut guard_ended => Err(self.ended_by_guard(&ended).await),
                () = self.tx.closed() => Err(Stop::Gone),
                () = &mut expired => self.bookmark().await.and(Err(Stop::Expired)),
                true = reload => self.remap().await,
                received = self.live.recv() => self.received(received).await,
                _ = bookmarks.tick() => self.bookmark().await,
            };
            if let Err(stop) = step {
                return stop;
            }
        }
    }

    /// The guard ended the watch: counted (and audited when it ended for
    /// the caller), then said to the client.
    async fn ended_by_guard(&self, ended: &Ended) -> Stop {
        self.service.stream_ended(&self.guard, ended).await;
        match ended {
            Ended::ShuttingDown => Stop::End(
                Error::Unavailable(format!(
                    "the server is shutting down; resume from {} on another",
                    self.position
                )),
                "shutdown",
            ),
            other => Stop::End(other.as_error(), other.label()),
        }
    }

    async fn received(&mut self, received: Result<Arc<WatchEvent>, RecvError>) -> Result<(), Stop> {
        match received {
            Ok(event) => self.take(event).await,
            Err(RecvError::Lagged(_)) => Err(self.too_slow()),
            Err(RecvError::Closed) => Err(Stop::End(
                Error::Unavailable("the watch cache stopped".into()),
                "closed",
            )),
        }
    }

    async fn take(&mut self, event: Arc<WatchEvent>) -> Result<(), Stop> {
        // Already in what this watch started from: never twice.
        if event.version <= self.position {
            return Ok(());
        }
        self.position = event.version;
        if self.visible(&event) {
            self.deliver(event).await?;
        }
        Ok(())
    }

    fn visible(&self, event: &WatchEvent) -> bool {
        let Some(object) = &event.object else {
            return true;
        };
        if object.kind() != self.what {
            return false;
        }
        let ns = object.namespace();
        match &self.scope {
            Scope::One(mine) => mine == ns,
            Scope::Viewable => {
                self.principal.may(Action::Read, ns)
                    && self.granted.get(ns).is_none_or(|&since| event.version.seq > since)
            }
        }
    }

    async fn bookmark(&mut self) -> Result<(), Stop> {
        let event = Arc::new(WatchEvent {
            kind: WatchEventType::Bookmark,
            version: self.position,
            object: None,
        });
        self.deliver(event).await
    }

    /// Queues `event`; a queue that stays full for the stall time ends
    /// the watch (the events already queued still reach the client).
    async fn deliver(&mut self, event: Arc<WatchEvent>) -> Result<(), Stop> {
        match self.tx.send_timeout(event, self.settings.stall).await {
            Ok(()) => Ok(()),
            Err(mpsc::error::SendTimeoutError::Closed(_)) => Err(Stop::Gone),
            Err(mpsc::error::SendTimeoutError::Timeout(_)) => Err(self.too_slow()),
        }
    }

    fn too_slow(&self) -> Stop {
        Stop::End(
            Error::Unavailable(format!(
                "watch ended: this client read too slowly ({} events waited over {} s); \
                 resume from the last version it read",
                self.settings.queue,
                self.settings.stall.as_secs_f64()
            )),
            "slow_consumer",
        )
    }

    /// The team mapping changed: a namespace no longer viewable ends the
    /// watch; one newly viewable starts flowing with its objects `ADDED`.
    async fn remap(&mut self) -> Result<(), Stop> {
        let Some(auth) = &self.auth else {
            return Ok(());
        };
        let now = auth.refresh(&self.principal);
        let revoked = |ns: &str| self.principal.may(Action::Read, ns) && !now.may(Action::Read, ns);
        let (lost, added, since) = {
            let held = self.hub.held();
            let namespaces = held.namespaces();
            let lost = match &self.scope {
                Scope::One(ns) => (!now.may(Action::Read, ns)).then(|| ns.clone()),
                Scope::Viewable => namespaces.iter().find(|ns| revoked(ns)).map(|ns| (*ns).to_owned()),
            };
            let mut added = Vec::new();
            if matches!(self.scope, Scope::Viewable) {
                for ns in namespaces {
                    if now.may(Action::Read, ns) && !self.principal.may(Action::Read, ns) {
                        self.granted.insert(ns.to_owned(), held.version().seq);
                        added.extend(held.snapshot_of(ns, self.what));
                    }
                }
            }
            (lost, added, held.version())
        };
        if let Some(ns) = lost {
            return Err(Stop::End(
                Error::PermissionDenied(format!(
                    "access to namespace {ns:?} was revoked; list again to see what you may view now"
                )),
                "revoked",
            ));
        }
        // The ADDED events show the clusters as of `since`: first deliver
        // the changes up to it (already in this watcher's channel: the hub
        // broadcasts under its lock) under the old mapping, so versions
        // never go back and a resume from the ADDED events' on misses
        // nothing.
        while self.position < since {
            let received = self.live.recv().await;
            self.received(received).await?;
        }
        self.principal = now;
        for object in added {
            self.deliver(object.added(since)).await?;
        }
        Ok(())
    }
}
