//! Key handling and messages, without a terminal or a server.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use krayne_client::{ClientError, Scale, proto::WatchEventType};

use super::{App, Connection, Effect, Msg, Overlay, Screen, Sort};
use crate::tui::fixtures::{self, cluster, clusters};

fn press(app: &mut App, code: KeyCode) -> Vec<Effect> {
    app.on_key(KeyEvent::new(code, KeyModifiers::NONE))
}

fn typed(app: &mut App, text: &str) {
    for c in text.chars() {
        press(app, KeyCode::Char(c));
    }
}

fn key(namespace: &str, name: &str) -> (String, String) {
    (namespace.to_owned(), name.to_owned())
}

fn names(app: &App) -> Vec<String> {
    app.visible().iter().map(|c| c.name.clone()).collect()
}

#[test]
fn it_starts_by_watching_its_namespace_and_asking_its_quota() {
    let (app, effects) = App::new(Some("ml-team".into()), "ml-team".into(), Vec::new());
    assert_eq!(
        effects,
        [Effect::Watch(Some("ml-team".into())), Effect::Quota("ml-team".into())]
    );
    assert_eq!(app.connection, Connection::Connecting);
    let (_, all) = App::new(None, "ml-team".into(), Vec::new());
    assert_eq!(all, [Effect::Watch(None)]);
}

#[test]
fn the_selection_follows_its_cluster_as_others_arrive() {
    let mut app = fixtures::app(None, clusters());
    assert_eq!(names(&app), ["demo", "etl", "train-gpu"]);
    press(&mut app, KeyCode::Down);
    assert_eq!(app.target(), Some(key("data-team", "etl")));
    app.on_msg(Msg::Changed(
        WatchEventType::Added,
        cluster("ml-team", "a-first", "creating", (0, 1), 1),
    ));
    assert_eq!(app.target(), Some(key("data-team", "etl")), "still on etl");
    press(&mut app, KeyCode::Char('G'));
    assert_eq!(app.target(), Some(key("ml-team", "train-gpu")));
    press(&mut app, KeyCode::Char('j'));
    assert_eq!(app.target(), Some(key("ml-team", "train-gpu")), "stays on the last row");
    press(&mut app, KeyCode::Home);
    assert_eq!(app.target(), Some(key("ml-team", "a-first")));
}

#[test]
fn changes_and_deletions_arrive_live() {
    let mut app = fixtures::app(Some("ml-team"), clusters());
    assert_eq!(app.health(), (1, 2));
    let effects = app.on_msg(Msg::Changed(
        WatchEventType::Modified,
        cluster("ml-team", "train-gpu", "ready", (4, 4), 3 * 3600),
    ));
    assert_eq!(effects, [Effect::Quota("ml-team".into())], "usage may have moved");
    assert_eq!(app.health(), (2, 2));
    app.on_msg(Msg::Changed(
        WatchEventType::Deleted,
        cluster("ml-team", "demo", "ready", (2, 2), 300),
    ));
    assert_eq!(names(&app), ["train-gpu"]);
}

#[test]
fn a_lost_watch_shows_reconnecting_until_it_syncs_again() {
    let mut app = fixtures::app(Some("ml-team"), clusters());
    app.on_msg(Msg::Lost("transport error".into()));
    assert_eq!(app.connection, Connection::Reconnecting("transport error".into()));
    assert_eq!(names(&app), ["demo", "train-gpu"], "the last known clusters stay");
    app.on_msg(Msg::Synced(vec![cluster("ml-team", "demo", "ready", (2, 2), 300)]));
    assert_eq!(app.connection, Connection::Live);
    assert_eq!(names(&app), ["demo"], "the resync replaces them");
    assert_eq!(app.status.as_ref().map(|s| s.text.as_str()), Some("Connected."));
}

#[test]
fn a_refused_watch_says_so_and_offers_the_namespace_picker() {
    let mut app = fixtures::app(Some("default"), clusters());
    let effects = app.on_msg(Msg::Refused(
        "alice@example.com has no role in namespace \"default\"".into(),
    ));
    assert_eq!(effects, [Effect::Namespaces]);
    assert!(matches!(app.connection, Connection::Refused(_)));
    assert!(matches!(app.overlay, Some(Overlay::Namespaces { .. })));
    assert!(names(&app).is_empty(), "nothing is shown from a scope one may not see");
    app.on_msg(Msg::Namespaces(fixtures::namespaces()));
    press(&mut app, KeyCode::Enter);
    assert_ne!(app.namespace.as_deref(), Some("default"));
    assert_eq!(app.connection, Connection::Connecting, "a new watch starts");
}

#[test]
fn slash_filters_as_you_type_and_esc_clears() {
    let mut app = fixtures::app(None, clusters());
    press(&mut app, KeyCode::Char('/'));
    typed(&mut app, "status:ready");
    assert_eq!(names(&app), ["demo"]);
    press(&mut app, KeyCode::Backspace);
    press(&mut app, KeyCode::Enter);
    assert!(app.overlay.is_none());
    assert_eq!(app.filter_text, "status:read");
    press(&mut app, KeyCode::Char('/'));
    typed(&mut app, " ns:data");
    assert!(names(&app).is_empty());
    press(&mut app, KeyCode::Esc);
    assert_eq!(names(&app).len(), 3, "Esc while typing clears");
    press(&mut app, KeyCode::Char('/'));
    typed(&mut app, "gpu");
    press(&mut app, KeyCode::Enter);
    press(&mut app, KeyCode::Esc);
    assert!(app.filter_text.is_empty(), "Esc in the explorer clears a kept filter");
    assert!(!app.quit);
}

#[test]
fn enter_opens_the_detail_and_q_goes_back_then_quits() {
    let mut app = fixtures::app(Some("ml-team"), clusters());
    assert_eq!(
        press(&mut app, KeyCode::Enter),
        [Effect::Describe(key("ml-team", "demo"))]
    );
    assert_eq!(app.screen, Screen::Detail(key("ml-team", "demo")));
    app.on_msg(Msg::Details(key("ml-team", "demo"), Box::new(fixtures::details())));
    app.on_msg(Msg::Jobs(key("ml-team", "demo"), Ok(fixtures::jobs())));
    assert!(app.detail.details.is_some());
    press(&mut app, KeyCode::Down);
    assert_eq!(app.detail.job, 1);
    assert_eq!(
        press(&mut app, KeyCode::Char('l')),
        [Effect::FollowLogs(key("ml-team", "demo"), "raysubmit_prep001".into())]
    );
    app.on_msg(Msg::Log(
        key("ml-team", "demo"),
        "raysubmit_prep001".into(),
        "one\ntwo\n".into(),
    ));
    assert_eq!(app.detail.logs.as_ref().map(|l| l.lines.len()), Some(2));
    assert_eq!(
        press(&mut app, KeyCode::Char('x')),
        [Effect::StopJob(key("ml-team", "demo"), "raysubmit_prep001".into())]
    );
    assert_eq!(press(&mut app, KeyCode::Char('q')), [Effect::Unfollow]);
    assert_eq!(app.screen, Screen::Explorer);
    assert!(!app.quit);
    press(&mut app, KeyCode::Char('q'));
    assert!(app.quit);
}

#[test]
fn the_detail_polls_services_and_jobs_and_redescribes_on_change() {
    let mut app = fixtures::app(Some("ml-team"), clusters());
    press(&mut app, KeyCode::Enter);
    let now = app.now;
    let polls: Vec<Vec<Effect>> = (0..3).map(|_| app.on_msg(Msg::Tick(now))).collect();
    assert_eq!(polls[2], [Effect::Poll(key("ml-team", "demo"))]);
    let effects = app.on_msg(Msg::Changed(
        WatchEventType::Modified,
        cluster("ml-team", "demo", "ready", (3, 3), 300),
    ));
    assert!(
        effects.contains(&Effect::Describe(key("ml-team", "demo"))),
        "{effects:?}"
    );
    app.on_msg(Msg::Jobs(
        key("ml-team", "demo"),
        Err("the head is not serving yet".into()),
    ));
    assert_eq!(app.detail.jobs_error.as_deref(), Some("the head is not serving yet"));
    app.on_msg(Msg::Services(key("ml-team", "demo"), Ok(fixtures::services())));
    app.on_msg(Msg::Services(key("ml-team", "demo"), Err("timed out".into())));
    assert!(app.detail.services.is_some(), "the last list stays, marked stale");
    assert_eq!(app.detail.services_error.as_deref(), Some("timed out"));
    assert_eq!(
        app.detail.jobs_error.as_deref(),
        Some("the head is not serving yet"),
        "apart from the jobs'"
    );
}

#[test]
fn s_scales_with_the_groups_details_filled_in() {
    let mut app = fixtures::app(Some("ml-team"), clusters());
    let effects = press(&mut app, KeyCode::Char('s'));
    assert_eq!(effects, [Effect::Describe(key("ml-team", "demo"))]);
    let mut details = fixtures::details();
    details.worker_groups[0].name = "gpu-workers".into();
    app.on_msg(Msg::Details(key("ml-team", "demo"), Box::new(details)));
    press(&mut app, KeyCode::Tab);
    press(&mut app, KeyCode::Backspace);
    typed(&mut app, "5");
    let effects = press(&mut app, KeyCode::Enter);
    let wanted = Scale {
        group: "gpu-workers".into(),
        replicas: Some(5),
        min_replicas: None,
        max_replicas: None,
    };
    assert_eq!(effects, [Effect::Scale(key("ml-team", "demo"), wanted)]);
    app.on_msg(Msg::Scaled(
        key("ml-team", "demo"),
        Err(ClientError::invalid_field(
            "replicas",
            "must be at most max_replicas (4)",
        )),
    ));
    let Some(Overlay::Scale(_, form)) = &app.overlay else {
        panic!("the form stays open with the error")
    };
    assert_eq!(
        form.fields[1].error.as_deref(),
        Some("must be at most max_replicas (4)")
    );
    press(&mut app, KeyCode::Enter);
    app.on_msg(Msg::Scaled(
        key("ml-team", "other"),
        Ok(cluster("ml-team", "other", "ready", (1, 1), 9)),
    ));
    assert!(
        matches!(app.overlay, Some(Overlay::Scale(..))),
        "another cluster's answer is not this form's"
    );
    app.on_msg(Msg::Scaled(
        key("ml-team", "demo"),
        Ok(cluster("ml-team", "demo", "ready", (2, 4), 300)),
    ));
    assert!(app.overlay.is_none());
    assert_eq!(
        app.status.as_ref().map(|s| s.text.as_str()),
        Some("Scaled demo to 4 workers.")
    );
}

#[test]
fn c_creates_and_the_servers_refusal_is_shown_inline() {
    let mut app = fixtures::app(None, clusters());
    press(&mut app, KeyCode::Char('c'));
    typed(&mut app, "Bad_Name");
    let effects = press(&mut app, KeyCode::Enter);
    let [Effect::Create(spec)] = effects.as_slice() else {
        panic!("{effects:?}")
    };
    assert_eq!(
        (spec.name.as_str(), spec.namespace.as_deref()),
        ("Bad_Name", Some("ml-team"))
    );
    assert!(
        press(&mut app, KeyCode::Char('x')).is_empty(),
        "no edits while it is sent"
    );
    app.on_msg(Msg::Created(Err(ClientError::invalid_field(
        "name",
        "must be a DNS-1035 label",
    ))));
    let Some(Overlay::Create(form)) = &app.overlay else {
        panic!("the form stays open")
    };
    assert_eq!(form.fields[0].error.as_deref(), Some("must be a DNS-1035 label"));
    press(&mut app, KeyCode::Enter);
    app.on_msg(Msg::Created(Ok(cluster("ml-team", "good", "creating", (0, 1), 0))));
    assert!(app.overlay.is_none());
    assert_eq!(app.selected, Some(key("ml-team", "good")));
}

#[test]
fn d_asks_first() {
    let mut app = fixtures::app(Some("ml-team"), clusters());
    assert!(press(&mut app, KeyCode::Char('d')).is_empty());
    assert!(matches!(app.overlay, Some(Overlay::ConfirmDelete(_))));
    assert!(press(&mut app, KeyCode::Char('n')).is_empty());
    assert_eq!(app.status.as_ref().map(|s| s.text.as_str()), Some("Not deleted."));
    press(&mut app, KeyCode::Char('d'));
    assert_eq!(
        press(&mut app, KeyCode::Char('y')),
        [Effect::Delete(key("ml-team", "demo"))]
    );
}

#[test]
fn z_suspends_a_running_cluster_and_resumes_a_suspended_one() {
    let mut app = fixtures::app(Some("ml-team"), clusters());
    assert_eq!(
        press(&mut app, KeyCode::Char('z')),
        [Effect::Suspend(key("ml-team", "demo"), true)]
    );
    app.on_msg(Msg::Changed(
        WatchEventType::Modified,
        cluster("ml-team", "demo", "suspended", (0, 2), 60),
    ));
    assert_eq!(
        press(&mut app, KeyCode::Char('z')),
        [Effect::Suspend(key("ml-team", "demo"), false)]
    );
}

#[test]
fn tab_cycles_the_sort_column() {
    let mut app = fixtures::app(None, clusters());
    press(&mut app, KeyCode::Tab);
    assert_eq!(app.sort, Sort::Status);
    assert_eq!(names(&app), ["train-gpu", "demo", "etl"]);
    press(&mut app, KeyCode::Tab);
    assert_eq!(names(&app), ["train-gpu", "demo", "etl"], "most workers first");
    press(&mut app, KeyCode::Tab);
    assert_eq!(app.sort, Sort::Age);
    assert_eq!(names(&app), ["etl", "train-gpu", "demo"], "oldest first");
    for _ in 0..2 {
        press(&mut app, KeyCode::Tab);
    }
    assert_eq!(app.sort, Sort::Name);
}

#[test]
fn n_picks_a_namespace_most_recent_first() {
    let (mut app, _) = App::new(
        Some("ml-team".into()),
        "ml-team".into(),
        vec!["shared".into(), "gone".into()],
    );
    assert_eq!(press(&mut app, KeyCode::Char('n')), [Effect::Namespaces]);
    app.on_msg(Msg::Namespaces(fixtures::namespaces()));
    assert_eq!(
        app.picker(),
        ["shared", "data-team", "ml-team"],
        "recent first, then by name"
    );
    press(&mut app, KeyCode::Down);
    press(&mut app, KeyCode::Down);
    let effects = press(&mut app, KeyCode::Enter);
    assert_eq!(
        effects,
        [
            Effect::Watch(Some("data-team".into())),
            Effect::Quota("data-team".into()),
            Effect::Remember("data-team".into()),
        ]
    );
    assert_eq!(app.namespace.as_deref(), Some("data-team"));
    assert_eq!(app.recent[0], "data-team");
    press(&mut app, KeyCode::Char('n'));
    assert_eq!(
        press(&mut app, KeyCode::Enter),
        [Effect::Watch(None)],
        "the first entry is all"
    );
}

#[test]
fn ctrl_p_runs_what_the_fuzzy_query_finds() {
    let mut app = fixtures::app(Some("ml-team"), clusters());
    app.on_key(KeyEvent::new(KeyCode::Char('p'), KeyModifiers::CONTROL));
    typed(&mut app, "trgpu");
    let effects = press(&mut app, KeyCode::Enter);
    assert_eq!(effects, [Effect::Describe(key("ml-team", "train-gpu"))]);
    assert_eq!(app.screen, Screen::Detail(key("ml-team", "train-gpu")));
    app.on_key(KeyEvent::new(KeyCode::Char('p'), KeyModifiers::CONTROL));
    typed(&mut app, "tunnels");
    assert_eq!(
        press(&mut app, KeyCode::Enter),
        [Effect::Tunnels(key("ml-team", "train-gpu"))]
    );
}

#[test]
fn t_and_o_act_on_the_selected_cluster_and_need_one() {
    let mut app = fixtures::app(Some("empty"), Vec::new());
    assert!(press(&mut app, KeyCode::Char('t')).is_empty());
    assert_eq!(
        app.status.as_ref().map(|s| s.text.as_str()),
        Some("No cluster selected.")
    );
    let mut app = fixtures::app(Some("ml-team"), clusters());
    assert_eq!(
        press(&mut app, KeyCode::Char('o')),
        [Effect::Open(key("ml-team", "demo"))]
    );
    assert_eq!(
        press(&mut app, KeyCode::Char('t')),
        [Effect::Tunnels(key("ml-team", "demo"))]
    );
    app.on_msg(Msg::Tunnels(
        key("ml-team", "demo"),
        Some(vec![("dashboard".into(), "http://127.0.0.1:12000".into())]),
    ));
    assert_eq!(app.tunnels.len(), 1);
    app.on_msg(Msg::Tunnels(key("ml-team", "demo"), None));
    assert!(app.tunnels.is_empty());
}

#[test]
fn ctrl_c_quits_from_anywhere_and_help_closes_on_any_key() {
    let mut app = fixtures::app(Some("ml-team"), clusters());
    press(&mut app, KeyCode::Char('?'));
    assert!(matches!(app.overlay, Some(Overlay::Help)));
    press(&mut app, KeyCode::Char('x'));
    assert!(app.overlay.is_none());
    press(&mut app, KeyCode::Char('c'));
    app.on_key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL));
    assert!(app.quit);
}

#[test]
fn log_chunks_that_end_inside_a_line_join_up() {
    let mut logs = super::Logs::default();
    logs.push("epoch 1\nepo");
    logs.push("ch 2\n");
    logs.push("\ndone");
    assert_eq!(logs.lines, ["epoch 1", "epoch 2", "", "done"]);
    for i in 0..600 {
        logs.push(&format!("line {i}\n"));
    }
    assert_eq!(logs.lines.len(), super::LOG_LINES);
    assert_eq!(logs.lines.back().map(String::as_str), Some("line 599"));
}

#[test]
fn going_to_another_cluster_stops_following_the_old_log() {
    let mut app = fixtures::app(Some("ml-team"), clusters());
    press(&mut app, KeyCode::Enter);
    app.on_msg(Msg::Jobs(key("ml-team", "demo"), Ok(fixtures::jobs())));
    press(&mut app, KeyCode::Char('l'));
    let effects = app.run(super::Command::GoTo(key("ml-team", "train-gpu")));
    assert_eq!(
        effects,
        [Effect::Unfollow, Effect::Describe(key("ml-team", "train-gpu"))]
    );
}

#[test]
fn a_refused_token_says_sign_in_again_and_offers_no_picker() {
    let mut app = fixtures::app(Some("ml-team"), clusters());
    let effects = app.on_msg(Msg::SignedOut("token expired".into()));
    assert!(effects.is_empty(), "no namespace would help");
    assert_eq!(app.connection, Connection::SignedOut("token expired".into()));
    assert!(app.overlay.is_none() && names(&app).is_empty());
}

#[test]
fn a_link_to_copy_is_shown_until_any_key() {
    let mut app = fixtures::app(Some("ml-team"), clusters());
    app.on_msg(Msg::Link(
        "the dashboard of demo".into(),
        "http://x/sign-in?ticket=t".into(),
    ));
    assert!(matches!(&app.overlay, Some(Overlay::Link { url, .. }) if url == "http://x/sign-in?ticket=t"));
    press(&mut app, KeyCode::Char('z'));
    assert!(app.overlay.is_none());
}

#[test]
fn a_cluster_that_is_not_ready_asks_for_its_heads_last_lines() {
    let mut app = fixtures::app(Some("ml-team"), clusters());
    press(&mut app, KeyCode::Enter);
    let key = app.target().unwrap();
    let mut details = fixtures::details();
    details.info.as_mut().unwrap().status = "crash-loop".into();
    let effects = app.on_msg(Msg::Details(key.clone(), Box::new(details)));
    assert_eq!(effects, [Effect::HeadLines(key.clone())]);
    app.on_msg(Msg::HeadLines(
        key,
        Ok(("demo-head".into(), "ModuleNotFoundError\n".into())),
    ));
    assert!(matches!(&app.detail.head_lines, Some(Ok((_, text))) if text.contains("ModuleNotFoundError")));
    let ready = fixtures::details();
    let key = app.target().unwrap();
    assert!(
        app.on_msg(Msg::Details(key, Box::new(ready))).is_empty(),
        "a ready cluster's are not read"
    );
    assert!(app.detail.head_lines.is_none());
}

/// Issue 56 item 7: on a sign-in link, `c` copies it (and keeps it shown),
/// `p` keeps it for printing on exit.
#[test]
fn a_sign_in_link_is_copied_with_c_and_printed_on_exit_with_p() {
    let mut app = fixtures::app(Some("ml-team"), clusters());
    let url = "http://127.0.0.1:8080/x/sessions/sign-in?ticket=abc".to_owned();
    app.on_msg(Msg::Link("the dashboard of demo".into(), url.clone()));
    assert_eq!(press(&mut app, KeyCode::Char('c')), vec![Effect::Copy(url.clone())]);
    assert!(matches!(app.overlay, Some(Overlay::Link { .. })), "still shown");
    assert!(press(&mut app, KeyCode::Char('p')).is_empty());
    assert!(app.overlay.is_none());
    assert_eq!(app.print_on_exit, vec![("the dashboard of demo".to_owned(), url)]);
}
