//! `krayne-server sandbox`, as a newcomer runs it: the printed curl and
//! krayne lines work.

use std::{process::Stdio, time::Instant};

use krayne_tests::{krayne_binary, server_binary};
use tokio::io::{AsyncBufReadExt as _, BufReader};

#[tokio::test]
async fn the_sandbox_starts_and_its_curl_and_krayne_lines_work() {
    let started = Instant::now();
    let mut child = tokio::process::Command::new(server_binary())
        .args(["sandbox", "--port", "0", "--ops-port", "0", "--time-scale", "0.05"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut all = Vec::new();
    while let Ok(Some(line)) = lines.next_line().await {
        let done = line.starts_with("- jobs and SSH sessions run");
        all.push(line);
        if done {
            break;
        }
    }
    // The first steps: up to the CLI's describe.
    let steps = all
        .iter()
        .position(|l| l.starts_with("krayne describe"))
        .unwrap_or(all.len());
    let out = all[..(steps + 1).min(all.len())].to_vec();
    eprintln!(
        "krayne-server sandbox printed its commands after {:?}",
        started.elapsed()
    );
    let curls: Vec<&String> = out.iter().filter(|l| l.starts_with("curl ")).collect();
    assert_eq!(curls.len(), 4, "{out:#?}");
    // Issue 56, items 15 and 17: the token is printed once, in the line to
    // paste, which every later line refers to; `krayne login` keeps it.
    let export = out.iter().find(|l| l.starts_with("export KRAYNE_SERVER=")).unwrap();
    let token = export_value(export, "KRAYNE_TOKEN");
    assert_eq!(all.iter().filter(|l| l.contains(&token)).count(), 1, "{all:#?}");
    assert!(
        all.iter().any(|l| l
            .trim_start()
            .starts_with("or keep it for every terminal: krayne login --server ")
            && l.contains("--token \"$KRAYNE_TOKEN\"")),
        "{all:#?}"
    );
    let run = |line: &str| {
        let script = format!("{export}\n{line}");
        let output = std::process::Command::new("sh").args(["-c", &script]).output().unwrap();
        assert!(
            output.status.success(),
            "{line}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).unwrap()
    };
    let whoami = run(curls[0]);
    assert!(whoami.contains("\"subject\":\"alice@example.com\""), "{whoami}");
    let quota = run(curls[1]);
    assert!(quota.contains("\"limit\":\"8\""), "ml-team's GPUs: {quota}");
    let created = run(curls[2]);
    assert!(created.contains("\"name\":\"demo\""), "{created}");
    let ready = run(curls[3]);
    assert!(ready.contains("\"status\":\"ready\""), "{ready}");

    let krayne: Vec<&String> = out
        .iter()
        .filter(|l| l.starts_with("krayne ") && !l.starts_with("krayne sandbox"))
        .collect();
    assert_eq!(krayne.len(), 4, "{out:#?}");
    let bin_dir = krayne_binary().parent().unwrap().to_owned();
    let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap_or_default());
    let run_cli = |line: &str| {
        let script = format!("{export}\n{line}");
        let output = std::process::Command::new("sh")
            .args(["-c", &script])
            .env("PATH", &path)
            .env(
                "XDG_CONFIG_HOME",
                std::env::temp_dir().join("krayne-sandbox-test-config"),
            )
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{line}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).unwrap()
    };
    assert!(run_cli(krayne[0]).contains("alice@example.com"));
    assert!(run_cli(krayne[1]).contains("ready"));
    let listed = run_cli(krayne[2]);
    assert!(listed.contains("demo-cli") && listed.contains("demo "), "{listed}");
    assert!(run_cli(krayne[3]).contains("Pods:"));

    // A token from an earlier run: said so, with where the new one is.
    let stale = std::process::Command::new(krayne_binary())
        .args(["whoami"])
        .env("KRAYNE_SERVER", export_value(export, "KRAYNE_SERVER"))
        // Well formed, signed with another run's key.
        .env(
            "KRAYNE_TOKEN",
            "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhbGljZUBleGFtcGxlLmNvbSJ9.c2lnbmVkLWJ5LWFub3RoZXItcnVu",
        )
        .env(
            "XDG_CONFIG_HOME",
            std::env::temp_dir().join("krayne-sandbox-test-config"),
        )
        .output()
        .unwrap();
    assert_eq!(stale.status.code(), Some(4));
    let said = String::from_utf8_lossy(&stale.stderr);
    assert!(
        said.contains("error: invalid token") && said.contains("tokens belong to the run that printed them"),
        "{said}"
    );

    // Item 14: it shows how to make a head fail with krayne alone.
    for fault in [
        "--set head.image=rayproject/ray:doesnotexist",
        "--set head.image=example.com/crash-loop:1",
    ] {
        assert!(
            all.iter().any(|l| l.starts_with("krayne create ") && l.contains(fault)),
            "{fault}: {all:#?}"
        );
    }
    let kubectl = out.iter().find(|l| l.contains("kubectl --kubeconfig")).unwrap();
    assert!(kubectl.contains("get rayclusters,pods -A"));
    // Issue 53, item 3: it says what it exposes on the machine, and to whom.
    let exposes = all
        .iter()
        .position(|l| l.starts_with("What this exposes on this machine"))
        .expect("the banner says what it exposes");
    let runs = all[exposes..]
        .iter()
        .find(|l| l.starts_with("- jobs and SSH sessions run"))
        .expect("who runs jobs");
    let expected = if krayne_server::sandbox::local_uid() == 0 {
        "as nobody"
    } else {
        "as you"
    };
    assert!(runs.contains(expected), "{runs}");
    child.kill().await.unwrap();
}

/// The value of `name` in an `export A=1 B=2` line.
fn export_value(line: &str, name: &str) -> String {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(&format!("{name}=")))
        .unwrap_or_else(|| panic!("no {name} in {line}"))
        .to_owned()
}

/// Starts `krayne-server sandbox --port 0` (ops port left to its default)
/// and returns it with its printed ops address.
async fn sandbox_with_default_ops_port() -> (tokio::process::Child, String) {
    let mut child = tokio::process::Command::new(server_binary())
        .args(["sandbox", "--port", "0", "--time-scale", "0.05"])
        .env_remove("KRAYNE_SANDBOX_OPS_PORT")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        if let Some(rest) = line.strip_prefix("health/metrics") {
            let ops = rest
                .split_whitespace()
                .next()
                .unwrap()
                .trim_end_matches("/readyz")
                .to_owned();
            // Keep reading its stdout: without this the first sandbox was
            // sometimes gone when asked (1 run in 3; cause not pinned down —
            // its last print precedes the drop, so not a closed pipe).
            tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
            return (child, ops);
        }
    }
    panic!("the sandbox printed no health/metrics line");
}

#[tokio::test]
async fn two_sandboxes_run_side_by_side() {
    let (_first, ops_a) = sandbox_with_default_ops_port().await;
    let (_second, ops_b) = sandbox_with_default_ops_port().await;
    assert_ne!(ops_a, ops_b);
    for ops in [ops_a, ops_b] {
        let ready = reqwest::get(format!("{ops}/healthz")).await.unwrap();
        assert_eq!(ready.status(), 200, "{ops}");
    }
}

/// `krayne-server sandbox --teams FILE`: a mapping of one's own (here a
/// GPU quota of 1 on ml-team) instead of the built-in one.
#[tokio::test]
async fn the_sandbox_takes_a_team_mapping_of_ones_own() {
    let dir = tempfile::tempdir().unwrap();
    let teams = dir.path().join("teams.yaml");
    std::fs::write(
        &teams,
        format!("{}quotas:\n  ml-team: {{ gpus: 1 }}\n", krayne_tests::TEAMS),
    )
    .unwrap();
    let mut child = tokio::process::Command::new(server_binary())
        .args([
            "sandbox",
            "--port",
            "0",
            "--ops-port",
            "0",
            "--time-scale",
            "0.05",
            "--teams",
        ])
        .arg(&teams)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let (mut quota_line, mut export) = (None, None);
    while let Ok(Some(line)) = lines.next_line().await {
        if line.starts_with("export KRAYNE_SERVER=") {
            export = Some(line);
        } else if line.starts_with("curl ") && line.ends_with("/quota") {
            quota_line = Some(line);
            break;
        }
    }
    let line = quota_line.expect("the banner's quota line");
    let script = format!("{}\n{line}", export.expect("the line to paste"));
    let output = std::process::Command::new("sh").args(["-c", &script]).output().unwrap();
    let quota = String::from_utf8_lossy(&output.stdout);
    assert!(quota.contains("\"resource\":\"gpus\",\"limit\":\"1\""), "{quota}");
}

/// A sandbox's audit log belongs to its run, as its tokens do: stopped
/// with Ctrl-C or SIGTERM, it leaves no file behind, and a run removes
/// those of earlier runs that were killed.
#[tokio::test]
async fn a_stopped_sandbox_leaves_no_audit_files_behind() {
    // One left by a run that was killed (its pid is no process now).
    let dead = std::env::temp_dir().join("krayne-sandbox-4000000000-audit.db-wal");
    std::fs::write(&dead, b"").unwrap();
    let (mut child, ops) = sandbox_with_default_ops_port().await;
    assert!(!dead.exists(), "a killed run's audit file stays");
    let pid = child.id().unwrap();
    let audit = std::env::temp_dir().join(format!("krayne-sandbox-{pid}-audit.db"));
    let started = Instant::now();
    while !audit.exists() {
        assert!(started.elapsed().as_secs() < 10, "{} never appeared", audit.display());
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(reqwest::get(format!("{ops}/healthz")).await.unwrap().status(), 200);
    let signalled = std::process::Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .status()
        .unwrap();
    assert!(signalled.success());
    let status = tokio::time::timeout(std::time::Duration::from_secs(20), child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "{status}");
    for suffix in ["", "-wal", "-shm"] {
        let file = format!("{}{suffix}", audit.display());
        assert!(!std::path::Path::new(&file).exists(), "{file} left behind");
    }
}

/// Issue 56 item 14: `krayne-server sandbox --help` lists the faults a
/// newcomer can cause, each with a krayne line that causes it.
#[test]
fn the_sandboxs_help_lists_its_faults() {
    let help = std::process::Command::new(server_binary())
        .args(["sandbox", "--help"])
        .output()
        .unwrap();
    assert!(help.status.success());
    let text = String::from_utf8_lossy(&help.stdout);
    for line in [
        "krayne create bad --set head.image=rayproject/ray:doesnotexist",
        "krayne create crashy --set head.image=example.com/crash-loop:1",
        "krayne create huge --set head.cpus=32",
        "dashboard-hangs",
        "krayne logs NAME --previous",
    ] {
        assert!(text.contains(line), "{line}: {text}");
    }
}

/// `krayne-server sandbox --sites 2` (issue 62): two simulated Kubernetes
/// clusters behind the one API, the banner naming each with its kubectl
/// line; a cluster asking for h100s goes to `site-2`, one asking nothing
/// to `site-1`, and each site's kubectl sees only its own.
#[tokio::test]
async fn the_sandbox_runs_two_sites_behind_one_api() {
    let mut child = tokio::process::Command::new(server_binary())
        .args([
            "sandbox",
            "--port",
            "0",
            "--ops-port",
            "0",
            "--time-scale",
            "0.05",
            "--sites",
            "2",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let (mut export, mut sites) = (None, Vec::new());
    while let Ok(Some(line)) = lines.next_line().await {
        if line.starts_with("export KRAYNE_SERVER=") {
            export = Some(line);
        } else if line.trim_start().starts_with("site-") {
            sites.push(line);
        } else if line.contains("krayne create here --site site-2") {
            break;
        }
    }
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    assert_eq!(sites.len(), 2, "{sites:#?}");
    assert!(sites[0].contains("a100") && sites[1].contains("h100"), "{sites:#?}");
    let kubeconfig = |line: &str| {
        line.split_whitespace()
            .skip_while(|w| *w != "--kubeconfig")
            .nth(1)
            .unwrap()
            .to_owned()
    };
    let export = export.expect("the line to paste");
    let server = export_value(&export, "KRAYNE_SERVER");
    let token = export_value(&export, "KRAYNE_TOKEN");
    let http = reqwest::Client::new();
    let create = |body: serde_json::Value| {
        let (http, server, token) = (http.clone(), server.clone(), token.clone());
        async move {
            let reply = http
                .post(format!("{server}/v1/namespaces/ml-team/clusters"))
                .bearer_auth(token)
                .json(&body)
                .send()
                .await
                .unwrap();
            assert_eq!(reply.status(), 201);
            reply.json::<serde_json::Value>().await.unwrap()
        }
    };
    let gpu = create(serde_json::json!({"name": "gpu-job", "worker_groups": [{"name": "gpu", "replicas": 0, "gpus": 1, "gpu_type": "h100"}]})).await;
    assert_eq!(gpu["cluster"]["site"], "site-2", "{gpu}");
    let plain = create(serde_json::json!({"name": "plain"})).await;
    assert_eq!(plain["cluster"]["site"], "site-1", "{plain}");
    for (line, want) in [(&sites[0], "plain"), (&sites[1], "gpu-job")] {
        let text = std::fs::read_to_string(kubeconfig(line)).unwrap();
        let config: serde_json::Value = serde_json::from_str(&text).unwrap();
        let url = config["clusters"][0]["cluster"]["server"].as_str().unwrap().to_owned();
        let held: serde_json::Value = reqwest::get(format!("{url}/apis/ray.io/v1/namespaces/ml-team/rayclusters"))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let names: Vec<&str> = held["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["metadata"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, [want], "{line}");
    }
    child.kill().await.unwrap();
}
