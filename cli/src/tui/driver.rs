//! Runs the TUI: draws, reads keys, and makes the calls [`App`] asks for
//! on tasks of their own, their answers coming back as messages. The
//! live watch is one such task; it reconnects until the UI ends.

use std::{collections::BTreeMap, time::Duration};

use crossterm::event::{Event, EventStream, KeyEventKind};
use futures::StreamExt as _;
use krayne_client::{Client, ClientError, Code, Forwarder, WatchFrom, proto::WatchEventType};
use ratatui::{Terminal, backend::Backend};
use tokio::{
    signal::unix::{SignalKind, signal},
    sync::mpsc,
    task::JoinHandle,
};

use super::{
    app::{App, Effect, Key, Msg},
    recent, ui,
};
use crate::{
    commands::service::{
        open::has_display,
        tunnel::{bind_near, krayne_port, local_command, local_url},
    },
    failure::Failure,
};

/// The longest pause between two reconnection attempts.
const MAX_PAUSE: Duration = Duration::from_secs(5);

/// A live watch hears from the server at least every 30 s (a bookmark, at
/// the server's default); this long without a word, the connection is
/// taken for dead and the watch starts over.
const SILENCE: Duration = Duration::from_secs(75);

/// What the driver's tasks send back.
enum Report {
    /// For the app.
    App(Msg),
    /// From the watch task of one generation (older ones are dropped).
    Watch(u64, Msg),
    /// Tunnels opened for a cluster, to keep until closed.
    Opened(Key, Vec<(String, String, Forwarder)>),
    /// A coalesced call's answer.
    Landed(Flight, Msg),
}

/// Calls asked for again and again as changes arrive (a cluster's details
/// while its detail is shown, the quota): while one runs, further asks make
/// it run once more when it lands instead of piling up.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Flight {
    Describe(Key),
    Quota(String),
}

/// The calls in flight and what they hold open.
struct Driver {
    client: Client,
    reports: mpsc::UnboundedSender<Report>,
    watch: Option<JoinHandle<()>>,
    generation: u64,
    logs: Option<JoinHandle<()>>,
    tunnels: BTreeMap<Key, Vec<Forwarder>>,
    /// Clusters whose tunnels are being opened (a second `t` waits).
    opening: std::collections::BTreeSet<Key>,
    /// Coalesced calls in flight, and whether to run each once more.
    in_flight: BTreeMap<Flight, bool>,
}

impl Drop for Driver {
    fn drop(&mut self) {
        for task in [self.watch.take(), self.logs.take()].into_iter().flatten() {
            task.abort();
        }
    }
}

/// Draws `app` until the user quits, making its calls with `client`;
/// returns the sign-in links to print once the terminal is restored.
pub(crate) async fn run<B: Backend>(
    terminal: &mut Terminal<B>,
    client: Client,
    mut app: App,
    first: Vec<Effect>,
) -> Result<Vec<(String, String)>, Failure>
where
    B::Error: std::fmt::Display,
{
    let draw_failed = |e: B::Error| Failure::Other(format!("cannot draw on the terminal: {e}"));
    terminal.draw(|f| ui::draw(f, &app)).map_err(draw_failed)?;
    let (reports, mut incoming) = mpsc::unbounded_channel();
    let mut driver = Driver {
        client,
        reports,
        watch: None,
        generation: 0,
        logs: None,
        tunnels: BTreeMap::new(),
        opening: std::collections::BTreeSet::new(),
        in_flight: BTreeMap::new(),
    };
    driver.apply(first);
    let mut keys = EventStream::new();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.tick().await;
    let listen = |kind| signal(kind).map_err(|e| Failure::Other(format!("cannot listen for signals: {e}")));
    let (mut term, mut hup) = (listen(SignalKind::terminate())?, listen(SignalKind::hangup())?);
    while !app.quit {
        tokio::select! {
            // Killed or hung up: leave as `q` does, so the terminal is restored.
            _ = term.recv() => break,
            _ = hup.recv() => break,
            event = keys.next() => match event {
                Some(Ok(Event::Key(key))) if key.kind != KeyEventKind::Release => {
                    let effects = app.on_key(key);
                    driver.apply(effects);
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(Failure::Other(format!("cannot read the terminal: {e}"))),
                None => break,
            },
            Some(report) = incoming.recv() => {
                driver.take(&mut app, report);
                // A burst (the first sync, many changes) is drawn once.
                while let Ok(report) = incoming.try_recv() {
                    driver.take(&mut app, report);
                }
            }
            _ = tick.tick() => {
                let effects = app.on_msg(Msg::Tick(jiff::Timestamp::now()));
                driver.apply(effects);
            }
        }
        if !app.quit {
            terminal.draw(|f| ui::draw(f, &app)).map_err(draw_failed)?;
        }
    }
    Ok(std::mem::take(&mut app.print_on_exit))
}

impl Driver {
    fn take(&mut self, app: &mut App, report: Report) {
        let msg = match report {
            Report::App(msg) => msg,
            Report::Watch(generation, msg) if generation == self.generation => msg,
            Report::Watch(..) => return,
            Report::Opened(key, opened) => {
                self.opening.remove(&key);
                if !app.clusters.contains_key(&key) {
                    // Deleted while they opened: they lead nowhere.
                    return;
                }
                let urls = opened.iter().map(|(s, u, _)| (s.clone(), u.clone())).collect();
                self.tunnels
                    .insert(key.clone(), opened.into_iter().map(|(_, _, f)| f).collect());
                Msg::Tunnels(key, Some(urls))
            }
            Report::Landed(flight, msg) => {
                if self.in_flight.remove(&flight) == Some(true) {
                    self.start(match flight.clone() {
                        Flight::Describe(key) => Effect::Describe(key),
                        Flight::Quota(namespace) => Effect::Quota(namespace),
                    });
                }
                msg
            }
        };
        if let Msg::Changed(WatchEventType::Deleted, c) = &msg {
            // Its tunnels lead nowhere now.
            self.tunnels.remove(&(c.namespace.clone(), c.name.clone()));
        }
        let effects = app.on_msg(msg);
        self.apply(effects);
    }

    fn apply(&mut self, effects: Vec<Effect>) {
        for effect in effects {
            self.start(effect);
        }
    }

    /// Whether a coalesced call should start now (else it runs once more
    /// when the one in flight lands).
    fn take_off(&mut self, flight: Flight) -> bool {
        match self.in_flight.get_mut(&flight) {
            Some(again) => {
                *again = true;
                false
            }
            None => {
                self.in_flight.insert(flight, false);
                true
            }
        }
    }

    /// Starts one effect; every call runs on a task of its own.
    fn start(&mut self, effect: Effect) {
        let client = self.client.clone();
        let tx = self.reports.clone();
        let send = move |msg: Msg| {
            let _ = tx.send(Report::App(msg));
        };
        match effect {
            Effect::Watch(namespace) => {
                if let Some(old) = self.watch.take() {
                    old.abort();
                }
                self.generation += 1;
                let (generation, tx) = (self.generation, self.reports.clone());
                self.watch = Some(tokio::spawn(watch(client, namespace, generation, tx)));
            }
            Effect::Quota(namespace) => {
                let flight = Flight::Quota(namespace.clone());
                if self.take_off(flight.clone()) {
                    let tx = self.reports.clone();
                    tokio::spawn(async move {
                        let quota = client.quota(&namespace).await.ok();
                        let query = krayne_client::UsageQuery {
                            namespace: namespace.clone(),
                            ..Default::default()
                        };
                        let hours = client
                            .usage(&query)
                            .await
                            .ok()
                            .and_then(|r| r.totals)
                            .map(|t| t.gpu_hours);
                        let _ = tx.send(Report::App(Msg::MonthUsage(namespace.clone(), hours)));
                        let _ = tx.send(Report::Landed(flight, Msg::Quota(namespace, quota)));
                    });
                }
            }
            Effect::Namespaces => {
                tokio::spawn(async move {
                    send(match client.list_namespaces().await {
                        Ok(list) => Msg::Namespaces(list),
                        Err(e) => Msg::Done(Err(failed("listing namespaces", &e))),
                    });
                });
            }
            Effect::Describe(key) => {
                let flight = Flight::Describe(key.clone());
                if self.take_off(flight.clone()) {
                    let (c, k, tx) = (client.clone(), key.clone(), self.reports.clone());
                    tokio::spawn(async move {
                        let msg = match c.describe(&k.0, &k.1).await {
                            Ok(details) => Msg::Details(k, Box::new(details)),
                            Err(e) => Msg::Done(Err(failed("describing the cluster", &e))),
                        };
                        let _ = tx.send(Report::Landed(flight, msg));
                    });
                    self.start(Effect::Poll(key));
                }
            }
            Effect::Poll(key) => {
                let (c, k, s) = (client.clone(), key.clone(), send.clone());
                tokio::spawn(async move {
                    let services = c.list_services(&k.0, &k.1).await.map_err(|e| e.message().to_owned());
                    s(Msg::Services(k, services));
                });
                tokio::spawn(async move {
                    let jobs = client.jobs(&key.0, &key.1).await.map_err(|e| e.message().to_owned());
                    send(Msg::Jobs(key, jobs));
                });
            }
            Effect::HeadLines(key) => {
                tokio::spawn(async move {
                    let lines = head_lines(&client, &key).await;
                    send(Msg::HeadLines(key, lines));
                });
            }
            Effect::FollowLogs(key, job) => {
                if let Some(old) = self.logs.take() {
                    old.abort();
                }
                self.logs = Some(tokio::spawn(follow(client, key, job, send)));
            }
            Effect::Unfollow => {
                if let Some(old) = self.logs.take() {
                    old.abort();
                }
            }
            Effect::StopJob(key, job) => {
                tokio::spawn(async move {
                    send(Msg::Done(match client.stop_job(&key.0, &key.1, &job).await {
                        Ok(r) if r.stopped => Ok(format!("Stopped job {job}.")),
                        Ok(_) => Ok(format!("Job {job} had already ended.")),
                        Err(e) => Err(failed("stopping the job", &e)),
                    }));
                });
            }
            Effect::Create(spec) => {
                tokio::spawn(async move { send(Msg::Created(client.create(spec).await)) });
            }
            Effect::Scale(key, scale) => {
                tokio::spawn(async move {
                    let result = client.scale(&key.0, &key.1, scale).await;
                    send(Msg::Scaled(key, result));
                });
            }
            Effect::Suspend(key, suspend) => {
                tokio::spawn(async move {
                    let (ns, name) = (&key.0, &key.1);
                    send(Msg::Done(if suspend {
                        match client.suspend(ns, name).await {
                            Ok(_) => Ok(format!("Suspending {ns}/{name}: its pods are going (z resumes it).")),
                            Err(e) => Err(failed("suspending", &e)),
                        }
                    } else {
                        match client.resume(ns, name).await {
                            Ok(_) => Ok(format!("Resuming {ns}/{name}: its pods are starting.")),
                            Err(e) => Err(failed("resuming", &e)),
                        }
                    }));
                });
            }
            Effect::Delete(key) => {
                tokio::spawn(async move {
                    send(Msg::Done(match client.delete(&key.0, &key.1).await {
                        Ok(()) => Ok(format!("Deleted {}/{}.", key.0, key.1)),
                        Err(e) => Err(failed("deleting", &e)),
                    }));
                });
            }
            Effect::Tunnels(key) => {
                if self.tunnels.remove(&key).is_some() {
                    send(Msg::Tunnels(key, None));
                } else if self.opening.insert(key.clone()) {
                    let tx = self.reports.clone();
                    tokio::spawn(async move {
                        match open_tunnels(&client, &key).await {
                            Ok(opened) => {
                                let _ = tx.send(Report::Opened(key, opened));
                            }
                            Err(why) => {
                                let _ = tx.send(Report::Opened(key, Vec::new()));
                                send(Msg::Done(Err(why)));
                            }
                        }
                    });
                }
            }
            Effect::Open(key) => {
                tokio::spawn(async move { send(open_dashboard(&client, &key).await) });
            }
            Effect::Remember(namespace) => recent::remember(&namespace),
            Effect::Copy(text) => {
                // A terminal without OSC 52 ignores it; nothing to report.
                let copy = crossterm::clipboard::CopyToClipboard::to_clipboard_from(text);
                let _ = crossterm::execute!(std::io::stdout(), copy);
            }
        }
    }
}

fn failed(what: &str, e: &ClientError) -> String {
    format!("{what} failed: {}", e.message())
}

/// The live watch of `namespace`: every cluster there is now, then each
/// change; on any failure it says so and starts over, pausing longer each
/// time up to [`MAX_PAUSE`], except a refusal (not allowed, not signed
/// in), which no retry would change.
async fn watch(client: Client, namespace: Option<String>, generation: u64, tx: mpsc::UnboundedSender<Report>) {
    let send = |msg| tx.send(Report::Watch(generation, msg)).is_ok();
    let mut pause = Duration::from_millis(250);
    loop {
        let from = WatchFrom {
            resource_version: None,
            send_initial_events: true,
        };
        let why = match client.watch_clusters(namespace.as_deref(), from).await {
            Err(e) if refused(&e) => {
                send(refusal(&e));
                return;
            }
            Err(e) => e.message().to_owned(),
            Ok(events) => {
                let mut events = std::pin::pin!(events);
                let mut initial = Some(Vec::new());
                loop {
                    let event = match tokio::time::timeout(SILENCE, events.next()).await {
                        Err(_) => break format!("no word from the server for {} s", SILENCE.as_secs()),
                        Ok(None) => break "the server ended the watch".to_owned(),
                        Ok(Some(Err(e))) if refused(&e) => {
                            send(refusal(&e));
                            return;
                        }
                        Ok(Some(Err(e))) => break e.message().to_owned(),
                        Ok(Some(Ok(event))) => event,
                    };
                    pause = Duration::from_millis(250);
                    let kind = event.r#type();
                    let delivered = match (&mut initial, kind, event.cluster) {
                        (Some(list), WatchEventType::Added, Some(cluster)) => {
                            list.push(cluster);
                            true
                        }
                        (Some(_), WatchEventType::Bookmark, _) => send(Msg::Synced(initial.take().unwrap_or_default())),
                        (None, WatchEventType::Added | WatchEventType::Modified | WatchEventType::Deleted, Some(c)) => {
                            send(Msg::Changed(kind, c))
                        }
                        _ => true,
                    };
                    if !delivered {
                        return;
                    }
                }
            }
        };
        if !send(Msg::Lost(why)) {
            return;
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(MAX_PAUSE);
    }
}

/// The head's last lines: the crashed container's when there is one (a
/// crash loop), else the running one's; or why there are none.
async fn head_lines(client: &Client, key: &Key) -> Result<(String, String), String> {
    let (log, _) = client
        .head_last_lines(&key.0, &key.1, HEAD_LINES)
        .await
        .map_err(|e| e.message().to_owned())?;
    Ok((log.pod, log.text))
}

/// How many of the head's last lines the detail shows.
const HEAD_LINES: u32 = 10;

/// Whether the server refused the caller rather than failed.
fn refused(e: &ClientError) -> bool {
    matches!(e.code(), Code::PermissionDenied | Code::Unauthenticated)
}

/// What a refusal tells the app: not allowed here, or signed out.
fn refusal(e: &ClientError) -> Msg {
    let why = e.message().to_owned();
    if e.code() == Code::Unauthenticated {
        Msg::SignedOut(why)
    } else {
        Msg::Refused(why)
    }
}

/// Follows a job's log until it ends.
async fn follow(client: Client, key: Key, job: String, send: impl Fn(Msg)) {
    let stream = match client.tail_job_logs(&key.0, &key.1, &job).await {
        Ok(stream) => stream,
        Err(e) => return send(Msg::LogEnded(key, job, Some(e.message().to_owned()))),
    };
    let mut stream = std::pin::pin!(stream);
    while let Some(chunk) = stream.next().await {
        match chunk {
            Ok(text) => send(Msg::Log(key.clone(), job.clone(), text)),
            Err(e) => return send(Msg::LogEnded(key, job, Some(e.message().to_owned()))),
        }
    }
    send(Msg::LogEnded(key, job, None));
}

/// Local ports for every service the cluster declares, at Krayne's port
/// numbers (or the next free ones), each reaching its service through the
/// server.
async fn open_tunnels(client: &Client, key: &Key) -> Result<Vec<(String, String, Forwarder)>, String> {
    let services = client
        .list_services(&key.0, &key.1)
        .await
        .map_err(|e| failed("listing services", &e))?;
    let mut opened = Vec::new();
    for service in services {
        let listener = bind_near(krayne_port(&key.1, &key.0, &service.name))
            .await
            .map_err(|e| e.message().to_owned())?;
        let port = listener.local_addr().map(|a| a.port()).unwrap_or_default();
        let forwarder = client.forward_service(&key.0, &key.1, &service, listener);
        let shown = local_command(&service.name, port).unwrap_or_else(|| local_url(&service, port));
        opened.push((service.name.clone(), shown, forwarder));
    }
    Ok(opened)
}

/// Opens the dashboard signed in, or shows the link to copy when there is
/// no desktop to open it on.
async fn open_dashboard(client: &Client, key: &Key) -> Msg {
    let session = match client.create_browser_session(&key.0, &key.1, "dashboard").await {
        Ok(session) => session,
        Err(e) => return Msg::Done(Err(failed("opening the dashboard", &e))),
    };
    if has_display() && open::that_detached(&session.sign_in_url).is_ok() {
        return Msg::Done(Ok(format!("Opened the dashboard of {} in your browser.", key.1)));
    }
    Msg::Link(format!("the dashboard of {}", key.1), session.sign_in_url)
}
