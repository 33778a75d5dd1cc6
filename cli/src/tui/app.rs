//! The TUI's state and everything that changes it: keys in, effects out
//! (calls for the driver to make), messages with their answers back in.
//! Nothing here waits or draws, so all of it is unit-tested.

use std::collections::{BTreeMap, VecDeque};

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use krayne_client::{
    ClientError, Scale,
    proto::{
        ClusterDetails, ClusterInfo, ClusterSpec, HeadService, Job, NamespaceAccess, NamespaceQuota, WatchEventType,
    },
};

use super::{
    command::{Command, Palette},
    filter::Filter,
    form::{Form, Outcome},
};

/// A cluster: (namespace, name).
pub(crate) type Key = (String, String);

/// Log lines kept of a followed job.
const LOG_LINES: usize = 500;

/// Every this many ticks (seconds) the detail screen lists services and
/// jobs again: neither has a watch.
const POLL_TICKS: u64 = 3;

/// What the driver is asked to do.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Effect {
    /// (Re)start the live watch: one namespace, or all (`None`).
    Watch(Option<String>),
    Quota(String),
    Namespaces,
    /// Describe the cluster, and list its services and jobs.
    Describe(Key),
    /// List the cluster's services (their health) and jobs again.
    Poll(Key),
    /// Read the head's last lines (a cluster that is not ready).
    HeadLines(Key),
    FollowLogs(Key, String),
    /// Stop following a job's log.
    Unfollow,
    StopJob(Key, String),
    Create(ClusterSpec),
    Scale(Key, Scale),
    /// Suspend (`true`) or resume the cluster.
    Suspend(Key, bool),
    Delete(Key),
    /// Open the cluster's tunnels, or close them when open.
    Tunnels(Key),
    Open(Key),
    /// Remember a namespace as the most recent one.
    Remember(String),
    /// Put this text on the terminal's clipboard (OSC 52).
    Copy(String),
}

/// What the driver reports back.
#[derive(Debug)]
pub(crate) enum Msg {
    /// The watch (re)started: every cluster there is now.
    Synced(Vec<ClusterInfo>),
    Changed(WatchEventType, ClusterInfo),
    /// The watch broke; the driver is reconnecting.
    Lost(String),
    /// The server refused the watch (not allowed here): the driver does
    /// not retry it.
    Refused(String),
    /// The server refused the caller's token: nothing works until they
    /// sign in again.
    SignedOut(String),
    /// A namespace's quota (`None`: it has none, or it could not be read).
    Quota(String, Option<NamespaceQuota>),
    /// A namespace's GPU-hours this month (`None`: not recorded).
    MonthUsage(String, Option<f64>),
    Namespaces(Vec<NamespaceAccess>),
    Details(Key, Box<ClusterDetails>),
    Services(Key, Result<Vec<HeadService>, String>),
    Jobs(Key, Result<Vec<Job>, String>),
    Log(Key, String, String),
    /// The head's last lines (`Ok((pod, text))`), or why there are none.
    HeadLines(Key, Result<(String, String), String>),
    LogEnded(Key, String, Option<String>),
    Created(Result<ClusterInfo, ClientError>),
    Scaled(Key, Result<ClusterInfo, ClientError>),
    /// An action's outcome for the status line.
    Done(Result<String, String>),
    /// A sign-in link for `what`, to be copied: there is no browser here.
    Link(String, String),
    /// The cluster's open tunnels as (service, local URL); `None`: closed.
    Tunnels(Key, Option<Vec<(String, String)>>),
    /// Time passes (ages, the reconnecting spinner).
    Tick(jiff::Timestamp),
}

/// The explorer's sort columns, in `Tab` order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Sort {
    #[default]
    Name,
    Status,
    Workers,
    Age,
    Namespace,
}

impl Sort {
    fn next(self) -> Self {
        match self {
            Self::Name => Self::Status,
            Self::Status => Self::Workers,
            Self::Workers => Self::Age,
            Self::Age => Self::Namespace,
            Self::Namespace => Self::Name,
        }
    }

    /// The column's header.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Self::Name => "NAME",
            Self::Status => "STATUS",
            Self::Workers => "WORKERS",
            Self::Age => "AGE",
            Self::Namespace => "NAMESPACE",
        }
    }
}

/// The live watch's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Connection {
    Connecting,
    Live,
    Reconnecting(String),
    /// Not allowed to watch this scope; nothing retries until another
    /// namespace is chosen.
    Refused(String),
    /// The token was refused.
    SignedOut(String),
}

/// The screen under any overlay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Screen {
    Explorer,
    Detail(Key),
}

/// What is drawn over the screen and takes the keys.
#[derive(Debug, Clone)]
pub(crate) enum Overlay {
    Help,
    /// Typing the filter.
    Filter,
    ConfirmDelete(Key),
    Create(Form),
    Scale(Key, Form),
    Palette(Palette),
    Namespaces {
        selected: usize,
    },
    /// A one-time sign-in link to open elsewhere (no browser here), shown
    /// whole so it can be copied; any key closes it.
    Link {
        /// What it opens, e.g. "the dashboard of demo".
        what: String,
        url: String,
    },
}

/// The detail screen's data, as it arrives.
#[derive(Debug, Default)]
pub(crate) struct Detail {
    pub(crate) details: Option<ClusterDetails>,
    pub(crate) services: Option<Vec<HeadService>>,
    pub(crate) jobs: Option<Vec<Job>>,
    /// Why the services could not be listed the last time (e.g. no head
    /// yet); a list shown beside it is stale.
    pub(crate) services_error: Option<String>,
    /// The same for the jobs.
    pub(crate) jobs_error: Option<String>,
    pub(crate) job: usize,
    pub(crate) logs: Option<Logs>,
    /// A cluster that is not ready: the head's last lines (pod, text), or
    /// why there are none.
    pub(crate) head_lines: Option<Result<(String, String), String>>,
    /// Panels PageDown scrolled past (the top ones).
    pub(crate) scroll: usize,
}

/// A followed job's log.
#[derive(Debug, Default)]
pub(crate) struct Logs {
    pub(crate) job: String,
    pub(crate) lines: VecDeque<String>,
    /// The last line is not finished yet (a chunk ended inside it).
    open_line: bool,
    /// Why following ended (`None` while it goes on).
    pub(crate) ended: Option<String>,
}

impl Logs {
    /// Adds a chunk of the log; chunks may end inside a line.
    fn push(&mut self, chunk: &str) {
        let mut pieces = chunk.split('\n');
        if let Some(first) = pieces.next() {
            match self.lines.back_mut() {
                Some(last) if self.open_line => last.push_str(first),
                _ => self.lines.push_back(first.to_owned()),
            }
        }
        self.lines.extend(pieces.map(str::to_owned));
        // A chunk ending in a newline leaves an empty last piece: the next
        // line starts there.
        self.open_line = !chunk.ends_with('\n');
        if !self.open_line {
            self.lines.pop_back();
        }
        while self.lines.len() > LOG_LINES {
            self.lines.pop_front();
        }
    }
}

/// The status line: a message, and whether it is an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Status {
    pub(crate) text: String,
    pub(crate) error: bool,
}

/// Everything on screen.
#[derive(Debug)]
pub(crate) struct App {
    /// The namespace shown; `None`: every namespace the caller may see.
    pub(crate) namespace: Option<String>,
    /// Where clusters are created when every namespace is shown.
    pub(crate) home: String,
    pub(crate) clusters: BTreeMap<Key, ClusterInfo>,
    pub(crate) connection: Connection,
    pub(crate) quota: Option<NamespaceQuota>,
    /// The namespace's GPU-hours this month, for the quota line.
    pub(crate) month_gpu_hours: Option<f64>,
    pub(crate) namespaces: Vec<NamespaceAccess>,
    /// Namespaces used, most recent first.
    pub(crate) recent: Vec<String>,
    pub(crate) filter_text: String,
    pub(crate) sort: Sort,
    pub(crate) selected: Option<Key>,
    cursor: usize,
    pub(crate) screen: Screen,
    pub(crate) overlay: Option<Overlay>,
    pub(crate) detail: Detail,
    pub(crate) tunnels: BTreeMap<Key, Vec<(String, String)>>,
    pub(crate) status: Option<Status>,
    pub(crate) now: jiff::Timestamp,
    ticks: u64,
    pub(crate) quit: bool,
    /// Sign-in links to print on one line each once the terminal is back
    /// (what they open, the link).
    pub(crate) print_on_exit: Vec<(String, String)>,
}

impl App {
    /// A new UI over `namespace` (`None`: all), and what to do first.
    pub(crate) fn new(namespace: Option<String>, home: String, recent: Vec<String>) -> (Self, Vec<Effect>) {
        let app = Self {
            namespace,
            home,
            clusters: BTreeMap::new(),
            connection: Connection::Connecting,
            quota: None,
            month_gpu_hours: None,
            namespaces: Vec::new(),
            recent,
            filter_text: String::new(),
            sort: Sort::Name,
            selected: None,
            cursor: 0,
            screen: Screen::Explorer,
            overlay: None,
            detail: Detail::default(),
            tunnels: BTreeMap::new(),
            status: None,
            now: jiff::Timestamp::now(),
            ticks: 0,
            quit: false,
            print_on_exit: Vec::new(),
        };
        let effects = app.watch_effects();
        (app, effects)
    }

    fn watch_effects(&self) -> Vec<Effect> {
        let mut effects = vec![Effect::Watch(self.namespace.clone())];
        effects.extend(self.namespace.clone().map(Effect::Quota));
        effects
    }

    /// The clusters that pass the filter, in the sort order.
    pub(crate) fn visible(&self) -> Vec<&ClusterInfo> {
        let filter = Filter::parse(&self.filter_text);
        let mut shown: Vec<&ClusterInfo> = self.clusters.values().filter(|c| filter.matches(c)).collect();
        match self.sort {
            Sort::Name => shown.sort_by(|a, b| (&a.name, &a.namespace).cmp(&(&b.name, &b.namespace))),
            Sort::Namespace => shown.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name))),
            Sort::Status => shown.sort_by(|a, b| (&a.status, &a.name).cmp(&(&b.status, &b.name))),
            Sort::Workers => shown.sort_by(|a, b| b.num_workers.cmp(&a.num_workers).then(a.name.cmp(&b.name))),
            Sort::Age => shown.sort_by_key(|c| c.created_at.as_ref().map(|t| (t.seconds, t.nanos))),
        }
        shown
    }

    /// The highlighted row's index in [`Self::visible`].
    pub(crate) fn selected_index(&self, visible: &[&ClusterInfo]) -> Option<usize> {
        if visible.is_empty() {
            return None;
        }
        let by_key = self
            .selected
            .as_ref()
            .and_then(|k| visible.iter().position(|c| c.namespace == k.0 && c.name == k.1));
        Some(by_key.unwrap_or(self.cursor.min(visible.len() - 1)))
    }

    /// The cluster the next action is about: the detail's, or the
    /// highlighted row's.
    pub(crate) fn target(&self) -> Option<Key> {
        if let Screen::Detail(key) = &self.screen {
            return Some(key.clone());
        }
        let visible = self.visible();
        let index = self.selected_index(&visible)?;
        visible.get(index).map(|c| (c.namespace.clone(), c.name.clone()))
    }

    fn select_at(&mut self, index: usize) {
        let visible = self.visible();
        if let Some(c) = visible.get(index) {
            let key = (c.namespace.clone(), c.name.clone());
            self.cursor = index;
            self.selected = Some(key);
        }
    }

    fn move_by(&mut self, delta: isize) {
        let visible = self.visible();
        let Some(current) = self.selected_index(&visible) else {
            return;
        };
        let last = visible.len() - 1;
        self.select_at(current.saturating_add_signed(delta).min(last));
    }

    /// Healthy (ready or running) and all clusters in scope.
    pub(crate) fn health(&self) -> (usize, usize) {
        let healthy = self
            .clusters
            .values()
            .filter(|c| matches!(c.status.as_str(), "ready" | "running"))
            .count();
        (healthy, self.clusters.len())
    }

    /// The picker's namespaces: most recent first, then the rest by name.
    pub(crate) fn picker(&self) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        for n in &self.recent {
            if self.namespaces.iter().any(|a| &a.namespace == n) && !names.contains(n) {
                names.push(n.clone());
            }
        }
        let mut rest: Vec<String> = self
            .namespaces
            .iter()
            .map(|a| a.namespace.clone())
            .filter(|n| !names.contains(n))
            .collect();
        rest.sort();
        names.extend(rest);
        names
    }

    fn say(&mut self, text: impl Into<String>) {
        self.status = Some(Status {
            text: text.into(),
            error: false,
        });
    }

    fn complain(&mut self, text: impl Into<String>) {
        self.status = Some(Status {
            text: text.into(),
            error: true,
        });
    }

    /// Applies a key press.
    pub(crate) fn on_key(&mut self, key: KeyEvent) -> Vec<Effect> {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        if ctrl && key.code == KeyCode::Char('c') {
            self.quit = true;
            return Vec::new();
        }
        if let Some(overlay) = self.overlay.take() {
            return self.on_overlay_key(overlay, key);
        }
        if ctrl && key.code == KeyCode::Char('p') {
            let keys = self.clusters.keys().cloned();
            self.overlay = Some(Overlay::Palette(Palette::new(keys)));
            return Vec::new();
        }
        self.status = None;
        match key.code {
            KeyCode::Up | KeyCode::Char('k') => self.up_down(-1),
            KeyCode::Down | KeyCode::Char('j') => self.up_down(1),
            KeyCode::PageUp => self.page(-1),
            KeyCode::PageDown => self.page(1),
            KeyCode::Home | KeyCode::Char('g') => self.up_down(isize::MIN / 2),
            KeyCode::End | KeyCode::Char('G') => self.up_down(isize::MAX / 2),
            KeyCode::Enter => self.run(Command::Detail),
            KeyCode::Char('c') => self.run(Command::Create),
            KeyCode::Char('s') => self.run(Command::Scale),
            KeyCode::Char('z') => self.run(Command::Suspend),
            KeyCode::Char('d') => self.run(Command::Delete),
            KeyCode::Char('t') => self.run(Command::Tunnels),
            KeyCode::Char('o') => self.run(Command::Open),
            KeyCode::Char('/') => self.run(Command::Filter),
            KeyCode::Char('n') => self.run(Command::Namespaces),
            KeyCode::Char('r') => self.run(Command::Refresh),
            KeyCode::Tab => self.run(Command::Sort),
            KeyCode::Char('?') => self.run(Command::Help),
            KeyCode::Char('l') => self.follow_selected_job(),
            KeyCode::Char('x') => self.stop_selected_job(),
            KeyCode::Esc if self.screen == Screen::Explorer && !self.filter_text.is_empty() => {
                self.filter_text.clear();
                Vec::new()
            }
            KeyCode::Char('q') | KeyCode::Esc => self.run(Command::Back),
            _ => Vec::new(),
        }
    }

    fn up_down(&mut self, delta: isize) -> Vec<Effect> {
        match &self.screen {
            Screen::Explorer => self.move_by(delta),
            Screen::Detail(_) => {
                let jobs = self.detail.jobs.as_ref().map_or(0, Vec::len);
                self.detail.job = self.detail.job.saturating_add_signed(delta).min(jobs.saturating_sub(1));
            }
        }
        Vec::new()
    }

    /// PageUp/PageDown: ten rows of the list, or a panel of the detail.
    fn page(&mut self, delta: isize) -> Vec<Effect> {
        match &self.screen {
            Screen::Explorer => {
                self.move_by(delta * 10);
                Vec::new()
            }
            Screen::Detail(_) => {
                let scrolled = self.detail.scroll.saturating_add_signed(delta);
                self.detail.scroll = scrolled.min(super::ui::SCROLLABLE);
                Vec::new()
            }
        }
    }

    fn selected_job(&self) -> Option<(Key, String)> {
        let Screen::Detail(key) = &self.screen else { return None };
        let job = self.detail.jobs.as_ref()?.get(self.detail.job)?;
        Some((key.clone(), job.id.clone()))
    }

    fn follow_selected_job(&mut self) -> Vec<Effect> {
        let Some((key, job)) = self.selected_job() else {
            return Vec::new();
        };
        self.detail.logs = Some(Logs {
            job: job.clone(),
            ..Logs::default()
        });
        vec![Effect::FollowLogs(key, job)]
    }

    fn stop_selected_job(&mut self) -> Vec<Effect> {
        let Some((key, job)) = self.selected_job() else {
            return Vec::new();
        };
        self.say(format!("Stopping job {job}…"));
        vec![Effect::StopJob(key, job)]
    }

    /// Does what a key or a palette entry asks for.
    pub(crate) fn run(&mut self, command: Command) -> Vec<Effect> {
        match command {
            Command::Detail => match (&self.screen, self.target()) {
                (Screen::Explorer, Some(key)) => self.open_detail(key),
                _ => Vec::new(),
            },
            Command::GoTo(key) => self.open_detail(key),
            Command::Create => {
                let namespace = self.namespace.clone().unwrap_or_else(|| self.home.clone());
                self.overlay = Some(Overlay::Create(Form::create(&namespace)));
                Vec::new()
            }
            Command::Scale => self.open_scale(),
            Command::Suspend => {
                let Some(key) = self.target() else {
                    self.say("No cluster selected.");
                    return Vec::new();
                };
                let suspended = self
                    .clusters
                    .get(&key)
                    .is_some_and(|c| matches!(c.status.as_str(), "suspended" | "suspending"));
                vec![Effect::Suspend(key, !suspended)]
            }
            Command::Delete => {
                match self.target() {
                    Some(key) => self.overlay = Some(Overlay::ConfirmDelete(key)),
                    None => self.say("No cluster selected."),
                }
                Vec::new()
            }
            Command::Tunnels => self.about_target(Effect::Tunnels),
            Command::Open => self.about_target(Effect::Open),
            Command::Filter => {
                let effects = self.leave_detail();
                self.overlay = Some(Overlay::Filter);
                effects
            }
            Command::Namespaces => {
                self.overlay = Some(Overlay::Namespaces { selected: 0 });
                vec![Effect::Namespaces]
            }
            Command::AllNamespaces => self.switch(None),
            Command::Refresh => {
                self.say("Refreshing…");
                let mut effects = self.watch_effects();
                if let Screen::Detail(key) = &self.screen {
                    effects.push(Effect::Describe(key.clone()));
                }
                effects
            }
            Command::Sort => {
                self.sort = self.sort.next();
                Vec::new()
            }
            Command::Help => {
                self.overlay = Some(Overlay::Help);
                Vec::new()
            }
            Command::Back => match self.screen {
                Screen::Detail(_) => self.leave_detail(),
                Screen::Explorer => self.run(Command::Quit),
            },
            Command::Quit => {
                self.quit = true;
                Vec::new()
            }
        }
    }

    /// Back to the explorer, no longer following a job's log.
    fn leave_detail(&mut self) -> Vec<Effect> {
        self.screen = Screen::Explorer;
        let following = self.detail.logs.is_some();
        self.detail = Detail::default();
        if following { vec![Effect::Unfollow] } else { Vec::new() }
    }

    fn about_target(&mut self, effect: fn(Key) -> Effect) -> Vec<Effect> {
        match self.target() {
            Some(key) => vec![effect(key)],
            None => {
                self.say("No cluster selected.");
                Vec::new()
            }
        }
    }

    fn open_detail(&mut self, key: Key) -> Vec<Effect> {
        let mut effects = Vec::new();
        if self.detail.logs.is_some() {
            effects.push(Effect::Unfollow);
        }
        self.selected = Some(key.clone());
        self.screen = Screen::Detail(key.clone());
        self.detail = Detail::default();
        effects.push(Effect::Describe(key));
        effects
    }

    fn open_scale(&mut self) -> Vec<Effect> {
        let Some(key) = self.target() else {
            self.say("No cluster selected.");
            return Vec::new();
        };
        let replicas = self.clusters.get(&key).map_or(0, |c| c.num_workers);
        let mut form = Form::scale(&key.1, "worker", replicas);
        let known = self
            .detail
            .details
            .as_ref()
            .filter(|d| d.info.as_ref().is_some_and(|i| i.namespace == key.0 && i.name == key.1));
        let effects = match known {
            Some(details) => {
                fill_scale(&mut form, details);
                Vec::new()
            }
            None => vec![Effect::Describe(key.clone())],
        };
        self.overlay = Some(Overlay::Scale(key, form));
        effects
    }

    fn switch(&mut self, namespace: Option<String>) -> Vec<Effect> {
        self.namespace = namespace.clone();
        self.clusters.clear();
        self.quota = None;
        self.month_gpu_hours = None;
        self.selected = None;
        self.cursor = 0;
        self.connection = Connection::Connecting;
        let mut effects = self.leave_detail();
        effects.extend(self.watch_effects());
        if let Some(n) = namespace {
            self.recent.retain(|r| r != &n);
            self.recent.insert(0, n.clone());
            effects.push(Effect::Remember(n));
        }
        effects
    }

    fn on_overlay_key(&mut self, overlay: Overlay, key: KeyEvent) -> Vec<Effect> {
        match overlay {
            Overlay::Help => Vec::new(),
            Overlay::Link { what, url } => match key.code {
                KeyCode::Char('c') => {
                    self.say("Copied the link (where the terminal passes OSC 52 to the clipboard).".to_owned());
                    let copy = vec![Effect::Copy(url.clone())];
                    self.overlay = Some(Overlay::Link { what, url });
                    copy
                }
                KeyCode::Char('p') => {
                    self.say("The link is printed, whole, when you quit (q).".to_owned());
                    self.print_on_exit.push((what, url));
                    Vec::new()
                }
                _ => Vec::new(),
            },
            Overlay::Filter => {
                match key.code {
                    KeyCode::Enter => {}
                    KeyCode::Esc => self.filter_text.clear(),
                    KeyCode::Backspace => {
                        self.filter_text.pop();
                        self.overlay = Some(Overlay::Filter);
                    }
                    KeyCode::Char(c) => {
                        self.filter_text.push(c);
                        self.overlay = Some(Overlay::Filter);
                    }
                    _ => self.overlay = Some(Overlay::Filter),
                }
                self.cursor = 0;
                self.selected = None;
                Vec::new()
            }
            Overlay::ConfirmDelete(target) => {
                if matches!(key.code, KeyCode::Char('y' | 'Y')) {
                    self.say(format!("Deleting {}/{}…", target.0, target.1));
                    let mut effects = if matches!(self.screen, Screen::Detail(_)) {
                        self.run(Command::Back)
                    } else {
                        Vec::new()
                    };
                    effects.push(Effect::Delete(target));
                    effects
                } else {
                    self.say("Not deleted.");
                    Vec::new()
                }
            }
            Overlay::Create(mut form) => match form.on_key(key) {
                Outcome::Cancel => Vec::new(),
                Outcome::Stay => {
                    self.overlay = Some(Overlay::Create(form));
                    Vec::new()
                }
                Outcome::Submit => {
                    let spec = form.cluster_spec();
                    form.busy = spec.is_some();
                    self.overlay = Some(Overlay::Create(form));
                    spec.map(Effect::Create).into_iter().collect()
                }
            },
            Overlay::Scale(target, mut form) => match form.on_key(key) {
                Outcome::Cancel => Vec::new(),
                Outcome::Stay => {
                    self.overlay = Some(Overlay::Scale(target, form));
                    Vec::new()
                }
                Outcome::Submit => {
                    let scale = form.scale_request();
                    form.busy = scale.is_some();
                    let effects = scale.map(|s| Effect::Scale(target.clone(), s)).into_iter().collect();
                    self.overlay = Some(Overlay::Scale(target, form));
                    effects
                }
            },
            Overlay::Palette(mut palette) => match key.code {
                KeyCode::Esc => Vec::new(),
                KeyCode::Enter => palette.chosen().map(|c| self.run(c)).unwrap_or_default(),
                code => {
                    match code {
                        KeyCode::Up => palette.move_by(-1),
                        KeyCode::Down | KeyCode::Tab => palette.move_by(1),
                        KeyCode::Backspace => {
                            let mut q = palette.query.clone();
                            q.pop();
                            palette.set_query(q);
                        }
                        KeyCode::Char(c) => {
                            let q = format!("{}{c}", palette.query);
                            palette.set_query(q);
                        }
                        _ => {}
                    }
                    self.overlay = Some(Overlay::Palette(palette));
                    Vec::new()
                }
            },
            Overlay::Namespaces { selected } => {
                let names = self.picker();
                // The first entry is "all namespaces".
                let last = names.len();
                match key.code {
                    KeyCode::Up | KeyCode::Char('k') => {
                        self.overlay = Some(Overlay::Namespaces {
                            selected: selected.saturating_sub(1),
                        });
                    }
                    KeyCode::Down | KeyCode::Char('j') => {
                        self.overlay = Some(Overlay::Namespaces {
                            selected: (selected + 1).min(last),
                        });
                    }
                    KeyCode::Enter if selected == 0 => return self.switch(None),
                    KeyCode::Enter => {
                        return names
                            .get(selected - 1)
                            .cloned()
                            .map(|n| self.switch(Some(n)))
                            .unwrap_or_default();
                    }
                    KeyCode::Esc | KeyCode::Char('q') => {}
                    _ => self.overlay = Some(Overlay::Namespaces { selected }),
                }
                Vec::new()
            }
        }
    }

    /// Applies what the driver reports.
    pub(crate) fn on_msg(&mut self, msg: Msg) -> Vec<Effect> {
        match msg {
            Msg::Synced(clusters) => {
                let was_lost = matches!(self.connection, Connection::Reconnecting(_));
                self.clusters = clusters
                    .into_iter()
                    .map(|c| ((c.namespace.clone(), c.name.clone()), c))
                    .collect();
                self.connection = Connection::Live;
                if was_lost || self.status.as_ref().is_some_and(|s| s.text == "Refreshing…") {
                    self.say("Connected.");
                }
            }
            Msg::Changed(kind, cluster) => return self.on_change(kind, cluster),
            Msg::Lost(why) => self.connection = Connection::Reconnecting(why),
            Msg::SignedOut(why) => {
                self.connection = Connection::SignedOut(why);
                self.clusters.clear();
            }
            Msg::Refused(why) => {
                self.connection = Connection::Refused(why);
                self.clusters.clear();
                // Choosing another namespace is the way on.
                if self.overlay.is_none() {
                    self.overlay = Some(Overlay::Namespaces { selected: 0 });
                    return vec![Effect::Namespaces];
                }
            }
            Msg::Quota(namespace, quota) => {
                // An answer for the namespace shown before a switch is dropped.
                if self.namespace.as_deref() == Some(namespace.as_str()) {
                    self.quota = quota;
                }
            }
            Msg::MonthUsage(namespace, hours) => {
                if self.namespace.as_deref() == Some(namespace.as_str()) {
                    self.month_gpu_hours = hours;
                }
            }
            Msg::Namespaces(namespaces) => self.namespaces = namespaces,
            Msg::Details(key, details) => {
                if let Some(Overlay::Scale(k, form)) = &mut self.overlay
                    && *k == key
                    && !form.touched
                {
                    fill_scale(form, &details);
                }
                if self.screen == Screen::Detail(key.clone()) {
                    let status = details.info.as_ref().map(|i| i.status.clone()).unwrap_or_default();
                    self.detail.details = Some(*details);
                    // Why it is not ready is in the head's output.
                    if !matches!(status.as_str(), "ready" | "suspended" | "suspending") {
                        return vec![Effect::HeadLines(key)];
                    }
                    self.detail.head_lines = None;
                }
            }
            Msg::HeadLines(key, lines) => {
                if self.screen == Screen::Detail(key) {
                    self.detail.head_lines = Some(lines);
                }
            }
            Msg::Services(key, services) => {
                if self.screen == Screen::Detail(key) {
                    match services {
                        Ok(list) => {
                            self.detail.services = Some(list);
                            self.detail.services_error = None;
                        }
                        Err(why) => self.detail.services_error = Some(why),
                    }
                }
            }
            Msg::Jobs(key, jobs) => {
                if self.screen == Screen::Detail(key) {
                    match jobs {
                        Ok(jobs) => {
                            self.detail.job = self.detail.job.min(jobs.len().saturating_sub(1));
                            self.detail.jobs = Some(jobs);
                            self.detail.jobs_error = None;
                        }
                        Err(why) => self.detail.jobs_error = Some(why),
                    }
                }
            }
            Msg::Log(key, job, chunk) => {
                if let Some(logs) = self.logs_of(&key, &job) {
                    logs.push(&chunk);
                }
            }
            Msg::LogEnded(key, job, why) => {
                if let Some(logs) = self.logs_of(&key, &job) {
                    logs.ended = Some(why.unwrap_or_else(|| "the job's log ended".into()));
                }
            }
            Msg::Created(result) => self.on_created(result),
            Msg::Scaled(key, result) => self.on_scaled(&key, result),
            Msg::Done(Ok(text)) => self.say(text),
            Msg::Link(what, url) => {
                self.say(format!(
                    "Sign-in link for {what}: c copies it, p prints it whole when you quit."
                ));
                self.overlay = Some(Overlay::Link { what, url });
            }
            Msg::Done(Err(text)) => self.complain(text),
            Msg::Tunnels(key, Some(urls)) => {
                let list: Vec<String> = urls.iter().map(|(s, u)| format!("{s} {u}")).collect();
                self.say(format!("Tunnels to {}: {}", key.1, list.join(", ")));
                self.tunnels.insert(key, urls);
            }
            Msg::Tunnels(key, None) => {
                self.say(format!("Closed the tunnels to {}.", key.1));
                self.tunnels.remove(&key);
            }
            Msg::Tick(now) => {
                self.now = now;
                self.ticks += 1;
                if let Screen::Detail(key) = &self.screen
                    && self.ticks.is_multiple_of(POLL_TICKS)
                {
                    return vec![Effect::Poll(key.clone())];
                }
            }
        }
        Vec::new()
    }

    fn logs_of(&mut self, key: &Key, job: &str) -> Option<&mut Logs> {
        if self.screen != Screen::Detail(key.clone()) {
            return None;
        }
        self.detail.logs.as_mut().filter(|l| l.job == job)
    }

    fn on_change(&mut self, kind: WatchEventType, cluster: ClusterInfo) -> Vec<Effect> {
        let key = (cluster.namespace.clone(), cluster.name.clone());
        let mut effects = Vec::new();
        match kind {
            WatchEventType::Deleted => {
                self.clusters.remove(&key);
                self.tunnels.remove(&key);
                if self.screen == Screen::Detail(key.clone()) {
                    self.complain(format!("{}/{} was deleted.", key.0, key.1));
                }
            }
            WatchEventType::Added | WatchEventType::Modified => {
                if self.screen == Screen::Detail(key.clone()) {
                    effects.push(Effect::Describe(key.clone()));
                }
                self.clusters.insert(key, cluster);
            }
            WatchEventType::Bookmark | WatchEventType::Unspecified => return effects,
        }
        effects.extend(self.namespace.clone().map(Effect::Quota));
        effects
    }

    fn on_created(&mut self, result: Result<ClusterInfo, ClientError>) {
        // Only the form that sent it (still waiting) takes the answer.
        let Some(Overlay::Create(form)) = self
            .overlay
            .as_mut()
            .filter(|o| matches!(o, Overlay::Create(f) if f.busy))
        else {
            return match result {
                Ok(c) => self.say(format!("Created {}/{}.", c.namespace, c.name)),
                Err(e) => self.complain(format!("create failed: {}", e.message())),
            };
        };
        match result {
            Ok(c) => {
                self.overlay = None;
                self.selected = Some((c.namespace.clone(), c.name.clone()));
                self.say(format!("Created {}/{}.", c.namespace, c.name));
            }
            Err(e) => form.refused(&e),
        }
    }

    fn on_scaled(&mut self, key: &Key, result: Result<ClusterInfo, ClientError>) {
        let waiting = |o: &&mut Overlay| matches!(o, Overlay::Scale(k, f) if k == key && f.busy);
        let Some(Overlay::Scale(_, form)) = self.overlay.as_mut().filter(waiting) else {
            return match result {
                Ok(c) => self.say(format!("Scaled {} to {} workers.", c.name, c.num_workers)),
                Err(e) => self.complain(format!("scale failed: {}", e.message())),
            };
        };
        match result {
            Ok(c) => {
                self.overlay = None;
                self.say(format!("Scaled {} to {} workers.", c.name, c.num_workers));
            }
            Err(e) => form.refused(&e),
        }
    }
}

/// The scale form's group and counts from a cluster's details.
fn fill_scale(form: &mut Form, details: &ClusterDetails) {
    if let Some(group) = details.worker_groups.first() {
        form.fill("worker_group", &group.name);
        form.fill("replicas", &group.replicas.to_string());
    }
}

#[cfg(test)]
mod tests;
