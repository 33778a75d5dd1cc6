//! Service access from the SDK and the CLI: the services list, a tunnel
//! stream, a local-port forwarder, `krayne tunnel` (ports, then curl),
//! `krayne tunnel --stdio`, ssh's ProxyCommand through it, and `krayne
//! open` (a browser session's link, printed or handed to the desktop).

use std::time::Duration;

use krayne_client::{Client, proto::ServiceState};
use krayne_tests::Env;
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader};

use crate::support::Krayne;

/// A server and a ready cluster `name` in `ml-team`, the server reaching
/// services through port-forward (the default outside a cluster) or
/// `--service-upstream direct`.
async fn ready_with(name: &str, args: &[&str]) -> Env {
    let env = Env::start_with(krayne_tests::EnvOptions::with_args(args)).await;
    env.ready_cluster(name).await;
    env
}

async fn ready(name: &str) -> Env {
    ready_with(name, &[]).await
}

async fn read_some(stream: &mut (impl tokio::io::AsyncRead + Unpin)) -> String {
    let mut buf = vec![0u8; 4096];
    let n = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut buf))
        .await
        .expect("data within 10 s")
        .unwrap();
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

#[tokio::test]
async fn the_sdk_lists_services_and_opens_tunnels_and_forwarders() {
    let env = ready("sdk-tun").await;
    let client = Client::connect(env.url()).await.unwrap().with_token(env.alice());
    let services = client.list_services("ml-team", "sdk-tun").await.unwrap();
    let names: Vec<&str> = services.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["dashboard", "client", "notebook", "code-server", "ssh"]);
    assert!(services.iter().all(|s| s.state() == ServiceState::Available));

    let mut ssh = client.open_tunnel("ml-team", "sdk-tun", "ssh").await.unwrap();
    assert_eq!((ssh.service(), ssh.port()), ("ssh", 22));
    assert!(read_some(&mut ssh).await.starts_with("SSH-2.0-"));
    ssh.write_all(b"hello").await.unwrap();
    assert_eq!(read_some(&mut ssh).await, "hello");
    drop(ssh);

    let refused = client.open_tunnel("ml-team", "sdk-tun", "nope").await.unwrap_err();
    assert_eq!(refused.code(), krayne_client::Code::NotFound, "{refused}");

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let forwarder = client.forward("ml-team", "sdk-tun", "dashboard", listener);
    let addr = forwarder.local_addr().unwrap();
    let mut http = tokio::net::TcpStream::connect(addr).await.unwrap();
    http.write_all(b"GET /api/version HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut answer = String::new();
    http.read_to_string(&mut answer).await.unwrap();
    assert!(
        answer.starts_with("HTTP/1.1 200") && answer.contains("ray_version"),
        "{answer}"
    );
    assert_eq!(forwarder.counts().opened.load(std::sync::atomic::Ordering::Relaxed), 1);
}

#[tokio::test]
async fn krayne_tunnel_opens_local_ports_that_curl_reaches() {
    let env = ready("cli-tun").await;
    let krayne = Krayne::new(&env, &env.alice());
    let listed = krayne.run(&["services", "cli-tun", "-n", "ml-team"]).await.code(0);
    assert!(listed.stdout().contains("available"), "{}", listed.stdout());

    let port = {
        let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        free.local_addr().unwrap().port()
    };
    let mut child = krayne.spawn(&[
        "tunnel",
        "cli-tun",
        "dashboard",
        "ssh",
        "-n",
        "ml-team",
        "--port",
        &format!("dashboard={port}"),
    ]);
    let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut table = String::new();
    while !table.contains("ssh -p") {
        let line = tokio::time::timeout(Duration::from_secs(20), stdout.next_line())
            .await
            .expect("the table within 20 s")
            .unwrap()
            .expect("a line");
        table.push_str(&line);
        table.push('\n');
    }
    assert!(table.contains(&format!("http://127.0.0.1:{port}")), "{table}");
    assert!(table.contains("Remote Port") && table.contains("8265"), "{table}");

    let curl = tokio::process::Command::new("curl")
        .args([
            "-sS",
            "--max-time",
            "10",
            &format!("http://127.0.0.1:{port}/api/version"),
        ])
        .output()
        .await
        .expect("curl runs");
    let body = String::from_utf8_lossy(&curl.stdout);
    assert!(curl.status.success() && body.contains("ray_version"), "{body}");

    // Ctrl-C closes the tunnels and exits 0.
    let pid = child.id().unwrap().to_string();
    std::process::Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap();
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "{status}");
    let mut stderr = String::new();
    child.stderr.take().unwrap().read_to_string(&mut stderr).await.unwrap();
    assert!(stderr.contains("Tunnels closed."), "{stderr}");
}

#[tokio::test]
async fn krayne_tunnel_stdio_carries_the_ssh_banner_and_ssh_uses_it() {
    // Direct, to a service on the pod's IP (the Ray client): a half-close
    // (stdin's end) reaches the service, which Kubernetes' WebSocket
    // port-forward (how sshd on the pod's loopback is reached) cannot
    // carry.
    let env = ready_with("stdio-tun", &["--service-upstream", "direct"]).await;
    let krayne = Krayne::new(&env, &env.alice());
    let mut child = krayne.spawn(&["tunnel", "--stdio", "stdio-tun", "client", "-n", "ml-team"]);
    let mut stdout = child.stdout.take().unwrap();
    assert!(read_some(&mut stdout).await.contains("ray client stand-in"));
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"through stdio").await.unwrap();
    assert_eq!(read_some(&mut stdout).await, "through stdio");
    drop(stdin);
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "stdin's end ends the tunnel: {status}");

    // ssh (a client nobody here wrote) through the ProxyCommand: it reads
    // the stand-in's banner, then fails at the key exchange the stand-in
    // does not speak.
    let proxy = format!(
        "{} tunnel --stdio -n ml-team stdio-tun ssh",
        env!("CARGO_BIN_EXE_krayne")
    );
    let mut ssh = tokio::process::Command::new("ssh");
    ssh.args([
        "-v",
        "-o",
        &format!("ProxyCommand={proxy}"),
        "-o",
        "StrictHostKeyChecking=no",
        "-o",
        "UserKnownHostsFile=/dev/null",
        "-o",
        "BatchMode=yes",
        "-o",
        "ConnectTimeout=10",
        "krayne-stdio-tun",
        "true",
    ])
    .envs(krayne.env_vars())
    .env("XDG_CONFIG_HOME", krayne.config_home())
    .stdin(std::process::Stdio::null())
    .stderr(std::process::Stdio::piped())
    .kill_on_drop(true);
    // Read ssh's log until the banner shows: sshd is on the head's
    // loopback, reached through a port-forward that cannot pass a
    // half-close, so whether ssh's own exit ends the tunnel at once is up
    // to the SIGHUP ssh sends its ProxyCommand, not the point here.
    let mut child = ssh.spawn().unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut log = String::new();
    let reached = tokio::time::timeout(Duration::from_secs(30), async {
        while let Ok(Some(line)) = lines.next_line().await {
            log.push_str(&line);
            log.push('\n');
            if line.contains("remote software version OpenSSH_9.6 krayne-sandbox") {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(reached, Ok(true), "ssh did not reach the banner through krayne:\n{log}");
}

#[tokio::test]
async fn background_tunnels_are_listed_and_closed() {
    use std::os::unix::fs::PermissionsExt as _;

    let env = ready("bg-tun").await;
    let krayne = Krayne::new(&env, &env.alice());
    let opened = krayne
        .run(&["tunnel", "bg-tun", "dashboard", "-n", "ml-team", "--detach"])
        .await
        .code(0)
        .stdout();
    let port: u16 = opened
        .split("http://127.0.0.1:")
        .nth(1)
        .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no local URL in {opened}"));
    let mut http = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    http.write_all(b"GET /api/version HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut answer = String::new();
    http.read_to_string(&mut answer).await.unwrap();
    assert!(answer.contains("ray_version"), "{answer}");

    let state = krayne.config_home().join("state/krayne/tunnels/ml-team--bg-tun.json");
    let mode = std::fs::metadata(&state).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the state file is its owner's only");
    let listed = krayne.run(&["tunnel", "--list"]).await.code(0).stdout();
    assert!(listed.contains("bg-tun") && listed.contains("dashboard"), "{listed}");
    let again = krayne
        .run(&["tunnel", "bg-tun", "-n", "ml-team", "--detach"])
        .await
        .code(2);
    assert!(again.stderr().contains("already open"), "{}", again.stderr());

    let closed = krayne.run(&["tun-close", "bg-tun", "-n", "ml-team"]).await.code(0);
    assert!(closed.stderr().contains("Closed"), "{}", closed.stderr());
    assert!(
        tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_err(),
        "the port is closed"
    );
    assert!(!state.exists());
    let none = krayne.run(&["tunnel", "--list"]).await.code(0);
    assert!(none.stderr().contains("No background tunnels."), "{}", none.stderr());
    let idempotent = krayne
        .run(&["tunnel", "--close", "bg-tun", "-n", "ml-team"])
        .await
        .code(0);
    assert!(idempotent.stderr().contains("were open"), "{}", idempotent.stderr());
}

#[tokio::test]
async fn krayne_open_prints_a_sign_in_link_or_hands_it_to_the_desktop() {
    let env = ready("cli-open").await;
    let krayne = Krayne::new(&env, &env.alice());
    let printed = krayne.run(&["open", "cli-open", "-n", "ml-team"]).await.code(0);
    let link = printed.stdout().trim().to_owned();
    assert!(
        link.starts_with(&format!(
            "{}/v1/namespaces/ml-team/clusters/cli-open/services/dashboard/sessions/sign-in?ticket=",
            env.url()
        )),
        "{link}"
    );
    assert!(printed.stderr().contains("within a minute"), "{}", printed.stderr());
    let browser = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let opened = browser.get(&link).send().await.unwrap();
    assert_eq!(opened.status().as_u16(), 303);
    let cookie = opened.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_owned();
    let version = browser
        .get(format!(
            "{}/v1/namespaces/ml-team/clusters/cli-open/services/dashboard/proxy/api/version",
            env.url()
        ))
        .header("cookie", cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(version.status().as_u16(), 200);

    let json = krayne
        .run(&["open", "cli-open", "notebook", "-n", "ml-team", "-o", "json"])
        .await
        .code(0)
        .json();
    assert!(
        json["service_url"]
            .as_str()
            .unwrap()
            .ends_with("/services/notebook/proxy/"),
        "{json}"
    );
    let tcp = krayne.run(&["open", "cli-open", "ssh", "-n", "ml-team"]).await;
    assert_ne!(tcp.0.status.code(), Some(0));
    assert!(tcp.stderr().contains("speaks TCP"), "{}", tcp.stderr());

    // With a desktop, the link goes to its opener (xdg-open), not stdout.
    let desktop = tempfile::tempdir().unwrap();
    let opened_file = desktop.path().join("opened");
    let opener = desktop.path().join("xdg-open");
    std::fs::write(
        &opener,
        format!("#!/bin/sh\nprintf '%s' \"$1\" > {}\n", opened_file.display()),
    )
    .unwrap();
    std::process::Command::new("chmod")
        .arg("+x")
        .arg(&opener)
        .status()
        .unwrap();
    let path = format!(
        "{}:{}",
        desktop.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let run = krayne
        .run_with(
            &["open", "cli-open", "-n", "ml-team"],
            &[("DISPLAY", ":0".to_owned()), ("PATH", path)],
        )
        .await
        .code(0);
    assert!(run.stdout().is_empty(), "the link stays off stdout: {}", run.stdout());
    assert!(run.stderr().contains("in your browser"), "{}", run.stderr());
    let mut handed = String::new();
    for _ in 0..100 {
        handed = std::fs::read_to_string(&opened_file).unwrap_or_default();
        if !handed.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(handed.contains("/sessions/sign-in?ticket="), "{handed:?}");
}
