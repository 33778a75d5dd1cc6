//! `krayne tui` start-up: how long from launching it in a pseudo-terminal
//! until its first frame is on the screen (drawn before any call returns),
//! and until the first live frame (the namespace's 20 clusters from the
//! watch), against a real server. The goal is a first frame within 100 ms.
//!
//! ```sh
//! cargo build --release -p krayne-server
//! cargo bench -p krayne-cli --bench tui_start
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

mod support;

use std::time::Duration;

use krayne_tests::pty::Terminal;

const RUNS: usize = 30;

/// One launch: (first frame, first live frame).
fn launch(url: &str, token: &str, state: &std::path::Path) -> (Duration, Duration) {
    let state = state.display().to_string();
    let envs = [
        ("KRAYNE_SERVER", url),
        ("KRAYNE_TOKEN", token),
        ("XDG_CONFIG_HOME", &state),
        ("XDG_STATE_HOME", &state),
    ];
    let krayne = env!("CARGO_BIN_EXE_krayne");
    let mut term = Terminal::spawn(krayne, &["tui", "-n", "ml-team"], envs, (30, 120));
    let (_, first) = term.wait_for(&["Namespace: ml-team"], &[]);
    let (_, live) = term.wait_for(&["Clusters: 20", "● live"], &[]);
    term.type_keys("q");
    assert!(term.wait());
    (first - term.started, live - term.started)
}

#[tokio::main]
async fn main() {
    let env = support::twenty_clusters().await;
    let (url, token) = (env.url(), env.alice());
    let (mut firsts, mut lives) = tokio::task::spawn_blocking(move || {
        let state = tempfile::tempdir().unwrap();
        (0..RUNS)
            .map(|_| launch(&url, &token, state.path()))
            .unzip::<_, _, Vec<_>, Vec<_>>()
    })
    .await
    .unwrap();
    support::header(&format!("krayne tui ({RUNS} launches)"));
    let results = [
        support::row("first frame", &mut firsts),
        support::row("first live frame (20 clusters)", &mut lives),
    ];
    println!("{}", serde_json::json!({ "bench": "tui_start", "results": results }));
}
