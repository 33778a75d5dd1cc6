//! Every screen at the three widths (narrow, medium, wide), drawn on
//! ratatui's test backend from a fake event stream and compared with the
//! snapshots beside this file.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use krayne_client::{ClientError, proto::WatchEventType};
use ratatui::{Terminal, backend::TestBackend};

use crate::tui::{
    app::{App, Msg},
    fixtures::{self, cluster, clusters},
};

const WIDTHS: [(u16, &str); 3] = [(80, "narrow"), (120, "medium"), (160, "wide")];

fn screen(app: &App, width: u16, height: u16) -> String {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
    terminal.draw(|f| super::draw(f, app)).unwrap();
    terminal.backend().to_string()
}

fn press(app: &mut App, code: KeyCode) {
    app.on_key(KeyEvent::new(code, KeyModifiers::NONE));
}

/// Snapshots `app` at each width as `<name>_<width>`.
fn at_every_width(name: &str, app: &App, height: u16) {
    for (width, label) in WIDTHS {
        insta::assert_snapshot!(format!("{name}_{label}"), screen(app, width, height));
    }
}

fn ml_team() -> App {
    let mut app = fixtures::app(Some("ml-team"), clusters());
    app.on_msg(Msg::Quota("ml-team".into(), Some(fixtures::quota())));
    app
}

#[test]
fn the_quota_line_says_this_months_gpu_hours() {
    let mut app = ml_team();
    app.on_msg(Msg::MonthUsage("ml-team".into(), Some(12.46)));
    let text = screen(&app, 120, 12);
    assert!(text.contains("this month 12.5 GPU-h"), "{text}");
    app.on_msg(Msg::MonthUsage("other-team".into(), Some(99.0)));
    assert!(
        screen(&app, 120, 12).contains("12.5 GPU-h"),
        "another namespace's answer is dropped"
    );
}

#[test]
fn explorer() {
    let mut app = ml_team();
    app.on_msg(Msg::Tunnels(
        ("ml-team".into(), "demo".into()),
        Some(vec![
            ("dashboard".into(), "http://127.0.0.1:31512".into()),
            ("client".into(), "ray://127.0.0.1:24785".into()),
        ]),
    ));
    at_every_width("explorer", &app, 12);
}

/// Clusters waiting in line show their place in the table, and the
/// detail's header says why (issue 61).
#[test]
fn queued_clusters_show_their_place_and_why() {
    let mut waiting = clusters();
    for (place, name) in [(1, "big-a"), (2, "big-b")] {
        let mut c = cluster("ml-team", name, "queued", (0, 2), 60);
        c.suspended = true;
        c.queue_position = Some(place);
        c.queue_reason = Some("gpus: needs 8, 2 of 8 free\u{1b}[2J".into());
        waiting.push(c);
    }
    let app = fixtures::app(Some("ml-team"), waiting);
    at_every_width("explorer_queued", &app, 12);
    let mut app = app;
    press(&mut app, KeyCode::Enter);
    let detail = screen(&app, 160, 12);
    assert!(detail.contains("queued #1"), "{detail}");
    assert!(
        detail.contains("waits: gpus: needs 8, 2 of 8 free\\u{1b}[2J"),
        "escaped: {detail}"
    );
}

#[test]
fn explorer_of_every_namespace_sorted_by_age() {
    let mut app = fixtures::app(None, clusters());
    press(&mut app, KeyCode::Tab);
    press(&mut app, KeyCode::Tab);
    press(&mut app, KeyCode::Tab);
    press(&mut app, KeyCode::Down);
    at_every_width("explorer_all", &app, 10);
}

#[test]
fn explorer_live_change() {
    let mut app = ml_team();
    app.on_msg(Msg::Changed(
        WatchEventType::Modified,
        cluster("ml-team", "train-gpu", "ready", (4, 4), 3 * 3600),
    ));
    at_every_width("explorer_changed", &app, 10);
}

#[test]
fn explorer_empty_filtered_connecting_and_reconnecting() {
    let empty = fixtures::app(Some("ml-team"), Vec::new());
    at_every_width("explorer_empty", &empty, 8);
    let mut filtered = ml_team();
    press(&mut filtered, KeyCode::Char('/'));
    for c in "status:failed".chars() {
        press(&mut filtered, KeyCode::Char(c));
    }
    at_every_width("explorer_filtering", &filtered, 8);
    let (connecting, _) = App::new(Some("ml-team".into()), "ml-team".into(), Vec::new());
    at_every_width("explorer_connecting", &connecting, 8);
    let mut lost = ml_team();
    lost.on_msg(Msg::Lost("transport error".into()));
    at_every_width("explorer_reconnecting", &lost, 10);
    let mut refused = fixtures::app(Some("default"), Vec::new());
    refused.on_msg(Msg::Refused(
        "alice@example.com has no role in namespace \"default\"".into(),
    ));
    refused.overlay = None;
    at_every_width("explorer_refused", &refused, 8);
}

fn detail() -> App {
    let mut app = ml_team();
    press(&mut app, KeyCode::Enter);
    let key = ("ml-team".to_owned(), "demo".to_owned());
    app.on_msg(Msg::Details(key.clone(), Box::new(fixtures::details())));
    app.on_msg(Msg::Services(key.clone(), Ok(fixtures::services())));
    app.on_msg(Msg::Jobs(key.clone(), Ok(fixtures::jobs())));
    app.on_msg(Msg::Tunnels(
        key,
        Some(vec![("dashboard".into(), "http://127.0.0.1:31512".into())]),
    ));
    app
}

#[test]
fn detail_with_events() {
    at_every_width("detail", &detail(), 30);
    // 80×24 (issue 41): the cluster's shape first, down to the worker rows.
    let small = screen(&detail(), 80, 24);
    assert!(small.contains("Worker groups") && small.contains("│worker "), "{small}");
    insta::assert_snapshot!("detail_80x24", small);
}

#[test]
fn detail_following_a_log() {
    let mut app = detail();
    press(&mut app, KeyCode::Char('l'));
    let key = ("ml-team".to_owned(), "demo".to_owned());
    app.on_msg(Msg::Log(
        key,
        "raysubmit_train01".into(),
        "epoch 1 loss 0.91\nepoch 2 loss 0.55\n".into(),
    ));
    at_every_width("detail_log", &app, 30);
}

#[test]
fn detail_with_a_stale_list() {
    let mut app = detail();
    let key = ("ml-team".to_owned(), "demo".to_owned());
    app.on_msg(Msg::Services(key, Err("deadline exceeded".into())));
    at_every_width("detail_stale", &app, 30);
}

#[test]
fn detail_loading() {
    let mut app = ml_team();
    press(&mut app, KeyCode::Down);
    press(&mut app, KeyCode::Enter);
    let key = ("ml-team".to_owned(), "train-gpu".to_owned());
    app.on_msg(Msg::Jobs(key, Err("the head is not serving yet".into())));
    at_every_width("detail_loading", &app, 24);
}

#[test]
fn create_form_with_the_servers_refusal() {
    let mut app = ml_team();
    press(&mut app, KeyCode::Char('c'));
    for c in "Bad_Name".chars() {
        press(&mut app, KeyCode::Char(c));
    }
    press(&mut app, KeyCode::Enter);
    app.on_msg(Msg::Created(Err(ClientError::invalid_field(
        "name",
        "must be a DNS-1035 label: lowercase letters, digits and '-'",
    ))));
    at_every_width("create", &app, 24);
}

#[test]
fn scale_form() {
    let mut app = ml_team();
    press(&mut app, KeyCode::Char('s'));
    app.on_msg(Msg::Details(
        ("ml-team".into(), "demo".into()),
        Box::new(fixtures::details()),
    ));
    at_every_width("scale", &app, 16);
}

#[test]
fn delete_confirmation_help_palette_and_namespaces() {
    let mut app = ml_team();
    press(&mut app, KeyCode::Char('d'));
    at_every_width("delete", &app, 12);

    let mut app = ml_team();
    press(&mut app, KeyCode::Char('?'));
    at_every_width("help", &app, 20);

    let mut app = ml_team();
    app.on_key(KeyEvent::new(KeyCode::Char('p'), KeyModifiers::CONTROL));
    for c in "sca".chars() {
        press(&mut app, KeyCode::Char(c));
    }
    at_every_width("palette", &app, 16);

    let (mut app, _) = App::new(Some("ml-team".into()), "ml-team".into(), vec!["data-team".into()]);
    press(&mut app, KeyCode::Char('n'));
    app.on_msg(Msg::Namespaces(fixtures::namespaces()));
    press(&mut app, KeyCode::Down);
    at_every_width("namespaces", &app, 10);
}

#[test]
fn a_tiny_terminal_is_drawn_without_panicking() {
    let mut screens = vec![ml_team(), detail(), fixtures::app(Some("ml-team"), Vec::new())];
    for key in [
        KeyCode::Char('c'),
        KeyCode::Char('?'),
        KeyCode::Char('n'),
        KeyCode::Char('d'),
    ] {
        let mut app = ml_team();
        press(&mut app, key);
        screens.push(app);
    }
    for app in &screens {
        for (width, height) in [(1, 1), (10, 3), (30, 6), (99, 10), (100, 40), (139, 5), (140, 2)] {
            screen(app, width, height);
        }
    }
}

/// Issue 41: without a browser, `o`'s one-time link is shown whole, in
/// lines with nothing beside them, so that it can be copied.
#[test]
fn a_sign_in_link_is_shown_whole_at_80_columns() {
    let mut app = ml_team();
    let url = format!(
        "http://127.0.0.1:8080/v1/namespaces/ml-team/clusters/demo/services/dashboard/sessions/sign-in?ticket={}",
        "x7".repeat(60)
    );
    app.on_msg(Msg::Link("the dashboard of demo".into(), url.clone()));
    let text = screen(&app, 80, 24);
    let flat: String = text.lines().map(|l| l.trim_matches('"')).collect();
    assert!(flat.contains(&url), "{text}");
    insta::assert_snapshot!("sign_in_link_narrow", text);
}

/// Issue 43: a cluster that is not ready shows the head's last lines
/// beside its events.
#[test]
fn detail_with_the_heads_last_lines() {
    let mut app = detail();
    let key = ("ml-team".to_owned(), "demo".to_owned());
    app.on_msg(Msg::HeadLines(
        key,
        Ok((
            "demo-head-x".into(),
            "Traceback (most recent call last):\nModuleNotFoundError: No module named 'ray.scripts'\n".into(),
        )),
    ));
    let text = screen(&app, 120, 36);
    assert!(
        text.contains("Head's last lines (demo-head-x)") && text.contains("ModuleNotFoundError"),
        "{text}"
    );
    insta::assert_snapshot!("detail_head_lines", text);
}

/// A cluster whose head cannot pull its image, its detail open.
fn failing_detail() -> App {
    let mut broken = cluster("ml-team", "demo", "image-pull-error", (1, 1), 120);
    broken.created_by = Some("alice@example.com".into());
    let mut app = fixtures::app(Some("ml-team"), vec![broken.clone()]);
    press(&mut app, KeyCode::Enter);
    let key = ("ml-team".to_owned(), "demo".to_owned());
    let mut details = fixtures::details();
    details.info = Some(broken);
    details.pods = vec![krayne_client::proto::PodInfo {
        name: "demo-head-x".into(),
        node_type: "head".into(),
        phase: "Pending".into(),
        reason: Some("ImagePullBackOff".into()),
        message: Some("Back-off pulling image \"rayproject/ray:doesnotexist\"".into()),
        ..Default::default()
    }];
    app.on_msg(Msg::Details(key.clone(), Box::new(details)));
    app.on_msg(Msg::Services(key.clone(), Ok(fixtures::services())));
    app.on_msg(Msg::Jobs(key.clone(), Ok(Vec::new())));
    app.on_msg(Msg::HeadLines(
        key,
        Err("the head's container has not started: trying and failing to pull image".into()),
    ));
    app
}

/// Issue 56 item 5: at 80×24 a failing cluster's detail leads with the
/// reason (naming the image), the events and the head's lines; PageDown
/// scrolls the other panels into the rows left, none stays blank.
#[test]
fn a_failing_clusters_detail_leads_with_why() {
    let mut app = failing_detail();
    let small = screen(&app, 80, 24);
    let rows: Vec<&str> = small.lines().collect();
    let why = rows.iter().position(|l| l.contains("Why it is not ready")).unwrap();
    assert_eq!(why, 1, "first under the title: {small}");
    assert!(
        small.contains("image-pull-error: ImagePullBackOff: Back-off pulling"),
        "{small}"
    );
    assert!(small.contains("rayproject/ray:doesnotexist"), "{small}");
    assert!(small.contains("Warning BackOff"), "{small}");
    assert!(small.contains("Head's last lines"), "{small}");
    assert!(
        small.contains("Worker groups") && !small.contains("LOCAL TUNNEL"),
        "{small}"
    );
    assert!(
        !rows.iter().any(|r| r.trim_matches('"').trim().is_empty()),
        "no blank row: {small}"
    );
    insta::assert_snapshot!("detail_failing_80x24", small);
    press(&mut app, KeyCode::PageDown);
    let scrolled = screen(&app, 80, 24);
    assert!(
        scrolled.contains("LOCAL TUNNEL") && !scrolled.contains("Worker groups"),
        "{scrolled}"
    );
    assert!(scrolled.contains("Why it is not ready"), "{scrolled}");
    press(&mut app, KeyCode::PageDown);
    press(&mut app, KeyCode::PageDown);
    assert!(screen(&app, 80, 24).contains("No jobs yet"));
    press(&mut app, KeyCode::PageUp);
    press(&mut app, KeyCode::PageUp);
    assert!(screen(&app, 80, 24).contains("Worker groups"));
    // At 200×50 everything is there at once.
    let large = screen(&failing_detail(), 200, 50);
    for part in [
        "Why it is not ready",
        "doesnotexist",
        "Head's last lines",
        "Worker groups",
        "LOCAL TUNNEL",
        "No jobs yet",
    ] {
        assert!(large.contains(part), "{part}: {large}");
    }
    insta::assert_snapshot!("detail_failing_200x50", large);
}

/// Issue 56 item 19: at 80 columns the title keeps the creator whole, and
/// a Python version nobody could tell is left out.
#[test]
fn the_narrow_detail_title_keeps_the_creator_whole() {
    let mut app = failing_detail();
    let key = ("ml-team".to_owned(), "demo".to_owned());
    let mut details = fixtures::details();
    details.python_version = "unknown".into();
    app.on_msg(Msg::Details(key, Box::new(details)));
    let small = screen(&app, 80, 24);
    let title = small.lines().next().unwrap();
    let by = app.clusters.values().next().unwrap().created_by.clone().unwrap();
    assert!(title.contains(&format!("by {by}")), "{title}");
    assert!(!small.contains("Python unknown"), "{small}");
}

#[test]
fn a_warned_cluster_counts_down_in_its_detail() {
    let mut warned = cluster("ml-team", "demo", "ready", (2, 2), 300);
    warned.lifecycle = Some("suspend at 2026-11-24T12:12:00Z: idle 2h".into());
    warned.suspends_at = Some(prost_types::Timestamp {
        seconds: fixtures::NOW + 12 * 60,
        nanos: 0,
    });
    warned.lifecycle_warned_at = Some(prost_types::Timestamp {
        seconds: fixtures::NOW - 180,
        nanos: 0,
    });
    let mut app = fixtures::app(Some("ml-team"), vec![warned]);
    press(&mut app, KeyCode::Enter);
    let drawn = screen(&app, 120, 24);
    let title = drawn.lines().next().unwrap_or_default();
    assert!(title.contains("suspends in 12m (idle 2h)"), "{drawn}");
}

/// Reliability 29g (issue 53, item 7): what the server sends is drawn,
/// never acted on by the terminal (ratatui drops control characters).
#[test]
fn a_servers_escapes_are_never_drawn() {
    let evil = cluster("ml-team", "evil\u{1b}]0;owned\u{7}", "ready\u{1b}[2J\r", (1, 1), 60);
    let app = fixtures::app(Some("ml-team"), vec![evil]);
    let drawn = screen(&app, 120, 8);
    assert!(drawn.contains("evil"), "{drawn}");
    assert!(!drawn.chars().any(|c| c.is_control() && c != '\n'), "{drawn:?}");
}
