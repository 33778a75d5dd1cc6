//! `krayne tui` in a real pseudo-terminal against the real server and the
//! sandbox (issue 26): the screen is read back through a terminal
//! emulator's parser, keys are typed as a person types them.

use krayne_tests::{Env, pty::Terminal};
use serde_json::json;
use tokio::task::block_in_place;

const NS: &str = "/v1/namespaces/ml-team/clusters";

/// Alice's server and token, and a config and state home of its own.
fn alices_env(env: &Env, home: &std::path::Path) -> [(&'static str, String); 4] {
    let home = home.display().to_string();
    [
        ("KRAYNE_SERVER", env.url()),
        ("KRAYNE_TOKEN", env.alice()),
        ("XDG_CONFIG_HOME", home.clone()),
        ("XDG_STATE_HOME", home),
    ]
}

#[tokio::test(flavor = "multi_thread")]
async fn the_tui_shows_filters_describes_and_scales_a_cluster_live_then_restores_the_terminal() {
    let env = Env::start().await;
    let rest = env.rest(&env.alice());
    rest.post(
        NS,
        &json!({"name": "demo", "worker_groups": [{"name": "worker", "replicas": 1}]}),
    )
    .await
    .expect(201);
    rest.post(NS, &json!({"name": "other"})).await.expect(201);
    let state = tempfile::tempdir().unwrap();
    let envs = alices_env(&env, state.path());

    tokio::task::spawn_blocking(move || {
        let krayne = env!("CARGO_BIN_EXE_krayne");
        let mut term = Terminal::spawn(krayne, &["tui", "-n", "ml-team"], envs, (30, 120));

        term.wait_for(&["Namespace: ml-team", "Clusters: 2", "demo", "other", "● live"], &[]);
        assert!(term.screen().alternate_screen(), "the UI draws on the alternate screen");

        term.type_keys("/demo\r");
        term.wait_for(&["demo", "filter: demo"], &["other"]);

        term.type_keys("\r");
        term.wait_for(&["demo (ml-team)", "Worker groups", "worker", "Recent events"], &[]);

        term.type_keys("s");
        term.wait_for(&["Scale demo", "Worker group  worker"], &[]);
        // The workers field: clear what is there, type the new count, send.
        term.type_keys("\t\x7f\x7f\x7f3\r");
        term.wait_for(&["Scaled demo to 3 workers."], &["Scale demo"]);
        // Ready workers come only from the watch stream, as pods start.
        term.wait_for(&["ready  3/3 workers ready"], &[]);

        term.type_keys("q");
        term.wait_for(&["Namespace: ml-team", "3/3"], &["Worker groups"]);
        term.type_keys("q");
        assert!(term.wait(), "krayne tui exits with 0");
        let after = term.screen();
        assert!(!after.alternate_screen(), "back on the main screen");
        assert!(!after.hide_cursor(), "the cursor is shown again");

        // Cooked mode again: the same terminal's settings, read by stty.
        assert!(term.run_after("stty", &["-a"]));
        let (settings, _) = term.wait_for(&["icanon"], &[]);
        assert!(
            settings.contains(" icanon") && settings.contains(" echo "),
            "the terminal is not in raw mode any more:\n{settings}"
        );
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn the_tui_says_reconnecting_while_the_server_is_down_and_resumes_the_watch() {
    let mut env = Env::start().await;
    let rest = env.rest(&env.alice());
    rest.post(NS, &json!({"name": "before"})).await.expect(201);
    let state = tempfile::tempdir().unwrap();
    let envs = alices_env(&env, state.path());
    let krayne = env!("CARGO_BIN_EXE_krayne");
    let mut term = Terminal::spawn(krayne, &["tui", "-n", "ml-team"], envs, (24, 100));
    block_in_place(|| term.wait_for(&["before", "● live"], &[]));

    env.stop_server().await;
    block_in_place(|| term.wait_for(&["○ reconnecting…", "before"], &["● live"]));
    env.start_server().await;
    block_in_place(|| term.wait_for(&["● live", "before"], &["reconnecting"]));

    rest.post(NS, &json!({"name": "after"})).await.expect(201);
    block_in_place(|| term.wait_for(&["after", "Clusters: 2"], &[]));
    term.type_keys("q");
    assert!(block_in_place(|| term.wait()), "krayne tui exits with 0");
}

/// Issue 41: without -n the TUI opens on the namespace the caller may
/// use; a namespace they may not see is refused once, said so, and the
/// namespace picker offered, never retried as a lost connection.
#[tokio::test(flavor = "multi_thread")]
async fn the_tui_opens_where_the_caller_may_work_and_offers_the_picker_when_refused() {
    let env = Env::start().await;
    let rest = env.rest(&env.alice());
    rest.post(
        NS,
        &json!({"name": "shape", "worker_groups": [{"name": "gpu-a100", "replicas": 1}]}),
    )
    .await
    .expect(201);
    rest.get(&format!("{NS}/shape/wait?timeout_seconds=60"))
        .await
        .expect(200);
    let state = tempfile::tempdir().unwrap();
    let envs = alices_env(&env, state.path());
    tokio::task::spawn_blocking(move || {
        let krayne = env!("CARGO_BIN_EXE_krayne");
        let mut term = Terminal::spawn(krayne, &["tui"], envs.clone(), (24, 80));
        term.wait_for(&["Namespace: ml-team", "● live", "shape"], &[]);
        // At 80×24 the detail shows the cluster's shape first: its worker
        // group's row, then the services.
        term.type_keys("\r");
        term.wait_for(&["Worker groups", "gpu-a100", "Services", "dashboard"], &[]);
        // No display: `o` shows the one-time link whole, to copy.
        term.type_keys("o");
        term.wait_for(&["Sign-in link for the dashboard of shape", "ticket="], &[]);
        term.type_keys("z");
        term.wait_for(&["Worker groups"], &["ticket=", "any other key", "OSC 52"]);
        // Issue 56 item 7: `c` puts the link on the clipboard (OSC 52) and
        // `p` prints it unwrapped in the scrollback on exit.
        term.type_keys("o");
        term.wait_for(
            &["Sign-in link for the dashboard of shape", "c copies it (OSC 52)"],
            &[],
        );
        term.type_keys("c");
        term.wait_for(&["Copied the link", "ticket="], &[]);
        let copied = term.clipboard();
        assert_eq!(copied.len(), 1, "{copied:?}");
        assert!(
            copied[0].starts_with("http") && copied[0].contains("/sessions/sign-in?ticket="),
            "{copied:?}"
        );
        term.type_keys("p");
        term.wait_for(&["printed, whole, when you quit"], &["ticket="]);
        term.type_keys("q");
        term.type_keys("q");
        assert!(term.wait(), "krayne tui exits with 0");
        let transcript = term.transcript();
        let printed = transcript
            .rsplit("Sign-in link for the dashboard of shape (open it once")
            .next()
            .unwrap();
        let link = printed.lines().nth(1).unwrap_or_default().trim_end();
        assert!(
            link.starts_with("http") && link.contains("/sessions/sign-in?ticket="),
            "{printed:?}"
        );
        assert!(!link.contains('\x1b'), "one unbroken line: {link:?}");

        let mut term = Terminal::spawn(krayne, &["tui", "-n", "other-team"], envs, (24, 80));
        term.wait_for(
            &["✕ no access", "Namespaces (most recent first)", "ml-team  (editor)"],
            &["reconnecting", "Press c to create"],
        );
        // Enter on "(all namespaces)": what alice may see, live.
        term.type_keys("\r");
        term.wait_for(&["● live"], &["no access"]);
        term.type_keys("q");
        assert!(term.wait(), "krayne tui exits with 0");
    })
    .await
    .unwrap();
}

/// Issue 43: the detail of a crash-looping cluster ends with the head's
/// last lines, which say why.
#[tokio::test(flavor = "multi_thread")]
async fn the_tui_detail_of_a_crashing_cluster_shows_the_heads_last_lines() {
    let env = Env::start().await;
    let k = crate::support::Krayne::new(&env, &env.alice());
    crate::logs::crash_looping(&env, &k, "crashy").await;
    let state = tempfile::tempdir().unwrap();
    let envs = alices_env(&env, state.path());
    tokio::task::spawn_blocking(move || {
        let krayne = env!("CARGO_BIN_EXE_krayne");
        let mut term = Terminal::spawn(krayne, &["tui", "-n", "ml-team"], envs, (40, 120));
        term.wait_for(&["crashy", "● live"], &[]);
        term.type_keys("\r");
        term.wait_for(&["Head's last lines", "ModuleNotFoundError"], &[]);
        term.type_keys("q");
        term.type_keys("q");
        assert!(term.wait(), "krayne tui exits with 0");
    })
    .await
    .unwrap();
}

/// Issue 56 item 5: at 80×24 (and 200×50) the detail of a cluster whose
/// image cannot be pulled, or whose head crash-loops, leads with the
/// reason (the image; the restarts), the events and the head's lines;
/// PageDown brings the services into view.
#[tokio::test(flavor = "multi_thread")]
async fn a_failing_clusters_tui_detail_leads_with_why_at_80x24_and_200x50() {
    let env = Env::start().await;
    let k = crate::support::Krayne::new(&env, &env.alice());
    let image = "head.image=rayproject/ray:doesnotexist";
    k.run(&["create", "img", "-n", "ml-team", "--no-wait", "--set", image])
        .await
        .code(0);
    k.run(&[
        "create",
        "crashy",
        "-n",
        "ml-team",
        "--no-wait",
        "--set",
        "head.image=example.com/crash-loop:1",
    ])
    .await
    .code(0);
    let state = tempfile::tempdir().unwrap();
    let envs = alices_env(&env, state.path());
    tokio::task::spawn_blocking(move || {
        let krayne = env!("CARGO_BIN_EXE_krayne");
        for size in [(24, 80), (50, 200)] {
            let mut term = Terminal::spawn(krayne, &["tui", "-n", "ml-team"], envs.clone(), size);
            term.wait_for(&["img", "● live"], &[]);
            term.type_keys("/img\r");
            term.wait_for(&["filter: img"], &["crashy"]);
            term.type_keys("\r");
            term.wait_for(
                &[
                    "Why it is not ready",
                    "image-pull-error: ",
                    "\"rayproject/ray:doesnotexist\"",
                    "Head's last lines",
                ],
                &[],
            );
            if size == (24, 80) {
                term.wait_for(&["Worker groups"], &["LOCAL TUNNEL"]);
                term.type_keys("\x1b[6~");
                term.wait_for(&["LOCAL TUNNEL", "Why it is not ready"], &["Worker groups"]);
            } else {
                term.wait_for(&["Worker groups", "LOCAL TUNNEL"], &[]);
            }
            term.type_keys("q");
            term.type_keys("q");
            assert!(term.wait(), "krayne tui exits with 0");

            let mut term = Terminal::spawn(krayne, &["tui", "-n", "ml-team"], envs.clone(), size);
            term.wait_for(&["crashy", "● live"], &[]);
            term.type_keys("/crashy\r");
            term.wait_for(&["filter: crashy"], &["img"]);
            term.type_keys("\r");
            term.wait_for(
                &[
                    "Why it is not ready",
                    "crash-loop: CrashLoopBackOff",
                    "restarts",
                    "BackOff",
                ],
                &[],
            );
            term.type_keys("q");
            term.type_keys("q");
            assert!(term.wait(), "krayne tui exits with 0");
        }
    })
    .await
    .unwrap();
}

/// Issue 56 item 6: a cluster made in the TUI's form from its name alone
/// is the cluster `krayne create NAME` makes (one source of defaults).
#[tokio::test(flavor = "multi_thread")]
async fn the_tui_form_and_the_cli_create_the_same_cluster_from_a_name() {
    let env = Env::start().await;
    let k = crate::support::Krayne::new(&env, &env.alice());
    k.run(&["create", "by-cli", "-n", "ml-team", "--no-wait"]).await.code(0);
    let state = tempfile::tempdir().unwrap();
    let envs = alices_env(&env, state.path());
    tokio::task::spawn_blocking(move || {
        let krayne = env!("CARGO_BIN_EXE_krayne");
        let mut term = Terminal::spawn(krayne, &["tui", "-n", "ml-team"], envs, (30, 120));
        term.wait_for(&["by-cli", "● live"], &[]);
        term.type_keys("c");
        term.wait_for(&["Create a cluster", "default 4Gi", "default 1"], &[]);
        term.type_keys("by-tui\r");
        term.wait_for(&["Created ml-team/by-tui."], &[]);
        term.type_keys("q");
        assert!(term.wait(), "krayne tui exits with 0");
    })
    .await
    .unwrap();
    let shape = |name: &'static str| {
        let k = &k;
        async move {
            let mut d = k
                .run(&["describe", name, "-n", "ml-team", "-o", "json"])
                .await
                .code(0)
                .json();
            let info = d["info"].take();
            let kept = serde_json::json!({
                "head": d["head"], "worker_groups": d["worker_groups"], "services": d["services"],
                "autoscaling": info["autoscaling_enabled"], "workers": info["num_workers"],
            });
            kept
        }
    };
    let (cli, tui) = (shape("by-cli").await, shape("by-tui").await);
    assert_eq!(tui, cli);
    assert_eq!(cli["autoscaling"], true, "{cli}");
    assert_eq!(
        cli["services"],
        json!(["dashboard", "client", "notebook", "code-server", "ssh"]),
        "{cli}"
    );
}
