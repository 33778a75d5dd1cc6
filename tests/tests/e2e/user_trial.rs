//! Issue 56: the README's five-command tour, walked as a new user walks
//! it: the sandbox started by the README's line, the line it prints pasted
//! into a shell, then every line of the tour's second terminal run as
//! written. Any error, or any line that does not do what the README says
//! it does, fails the trial.

use std::{
    path::{Path, PathBuf},
    process::Stdio,
    time::Duration,
};

use krayne_tests::{krayne_binary, server_binary};
use tokio::io::{AsyncBufReadExt as _, BufReader};

/// The lines of the sh block after the README's `<!-- tour: {which} -->`.
fn tour(readme: &str, which: &str) -> Vec<String> {
    let marker = format!("<!-- tour: {which} -->");
    let after = readme
        .split_once(&marker)
        .unwrap_or_else(|| panic!("the README has no {marker}"))
        .1;
    let block = after
        .split_once("```sh\n")
        .and_then(|(_, rest)| rest.split_once("\n```"))
        .unwrap_or_else(|| panic!("no sh block after {marker}"))
        .0;
    block.lines().map(str::to_owned).collect()
}

/// A user's shell: this build's binaries first on `PATH` (what the tour's
/// build line does), a home of its own, no desktop.
fn shell(home: &Path, bin: &Path, script: &str) -> std::process::Command {
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let mut sh = std::process::Command::new("sh");
    sh.args(["-c", script])
        .env("PATH", path)
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("XDG_STATE_HOME", home.join(".local/state"))
        .env_remove("DISPLAY")
        .env_remove("WAYLAND_DISPLAY")
        .env_remove("KRAYNE_SERVER")
        .env_remove("KRAYNE_TOKEN")
        .env_remove("KRAYNE_NAMESPACE")
        .stdin(Stdio::null());
    sh
}

#[tokio::test]
async fn the_readmes_five_command_tour_works_as_written() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let first = tour(&readme, "terminal 1");
    let second = tour(&readme, "terminal 2");
    let bin: PathBuf = krayne_binary().parent().unwrap().to_owned();
    assert_eq!(server_binary().parent().unwrap(), bin, "both binaries in one folder");
    assert_eq!(
        first,
        [
            r#"cargo build --workspace --bins && export PATH="$PWD/target/debug:$PATH""#,
            "krayne-server sandbox",
        ],
        "terminal 1: the build (this suite's own) and the sandbox"
    );
    assert_eq!(second.len(), 4, "whoami, create, open, submit: {second:?}");
    let home = tempfile::tempdir().unwrap();

    // Terminal 1, as written; only the port comes from the environment,
    // so that the trial runs beside other tests.
    let mut sandbox = tokio::process::Command::from({
        let mut sh = shell(home.path(), &bin, &first[1]);
        sh.env("KRAYNE_SANDBOX_PORT", "0")
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        sh
    })
    .kill_on_drop(true)
    .process_group(0)
    .spawn()
    .unwrap();
    let mut lines = BufReader::new(sandbox.stdout.take().unwrap()).lines();
    let export = tokio::time::timeout(Duration::from_secs(60), async {
        while let Ok(Some(line)) = lines.next_line().await {
            if line.starts_with("export KRAYNE_SERVER=") {
                return line;
            }
        }
        panic!("the sandbox printed no line to paste");
    })
    .await
    .expect("the sandbox starts within a minute");
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });

    // Terminal 2: the pasted line, then each of the tour's lines.
    let mut said = Vec::new();
    for line in &second {
        let mut sh = shell(home.path(), &bin, &format!("{export}\n{line}"));
        let output = tokio::task::spawn_blocking(move || sh.output().unwrap()).await.unwrap();
        let (stdout, stderr) = (
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        );
        assert!(output.status.success(), "{line}\n{stdout}\n{stderr}");
        assert!(!stderr.contains("error"), "{line}: {stderr}");
        said.push((line.clone(), stdout, stderr));
    }
    let (whoami, create, open, submit) = (&said[0], &said[1], &said[2], &said[3]);
    assert!(
        whoami.1.contains("alice@example.com") && whoami.1.contains("ml-team"),
        "{whoami:?}"
    );
    assert!(create.2.contains("cluster ml-team/demo is ready"), "{create:?}");
    assert!(
        create.1.contains("krayne open demo -n ml-team"),
        "its addresses: {create:?}"
    );
    assert!(submit.1.contains("hello from the head"), "{submit:?}");
    assert!(submit.2.contains("succeeded"), "{submit:?}");
    // Without a desktop `open` prints the one-time link: a browser opens it.
    let link = open.1.trim();
    let browser = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let signed_in = browser.get(link).send().await.unwrap();
    assert_eq!(signed_in.status().as_u16(), 303, "{link}");
    // Ctrl-C in terminal 1: the whole process group, as a terminal sends it.
    let group = format!("-{}", sandbox.id().unwrap());
    let _ = std::process::Command::new("kill").args(["-INT", "--", &group]).status();
    let _ = tokio::time::timeout(Duration::from_secs(20), sandbox.wait()).await;
}
