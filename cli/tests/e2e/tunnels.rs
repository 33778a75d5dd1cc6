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
    use std::sync::atomic::Ordering::Relaxed;
    let env = ready("sdk-tun").await;
    let client = Client::connect(env.url()).await.unwrap().with_token(env.alice());
    let services = client.list_services("ml-team", "sdk-tun").await.unwrap();
    let names: Vec<&str> = services.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["dashboard", "client", "notebook", "code-server", "ssh"]);
    assert!(services.iter().all(|s| s.state() == ServiceState::Available));

    let mut ssh = client.open_tunnel("ml-team", "sdk-tun", "ssh").await.unwrap();
    assert_eq!((ssh.service(), ssh.port()), ("ssh", 22));
    assert!(read_some(&mut ssh).await.starts_with("SSH-2.0-"));
    drop(ssh);
    let mut ray = client.open_tunnel("ml-team", "sdk-tun", "client").await.unwrap();
    assert!(read_some(&mut ray).await.contains("ray client"));
    ray.write_all(b"hello").await.unwrap();
    assert_eq!(read_some(&mut ray).await, "hello");
    drop(ray);

    let refused = client.open_tunnel("ml-team", "sdk-tun", "nope").await.unwrap_err();
    assert_eq!(refused.code(), krayne_client::Code::NotFound, "{refused}");

    // The dashboard requires Ray's token: the SDK asks for it (audited).
    let credentials = client.ray_credentials("ml-team", "sdk-tun").await.unwrap();
    assert_eq!(credentials.mode, "token");
    krayne_tests::register_secret(&credentials.token);
    let bearer = format!("Authorization: Bearer {}\r\n", credentials.token);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let forwarder = client.forward("ml-team", "sdk-tun", "dashboard", listener);
    let addr = forwarder.local_addr().unwrap();
    let mut http = tokio::net::TcpStream::connect(addr).await.unwrap();
    http.write_all(format!("GET /api/version HTTP/1.1\r\nHost: x\r\n{bearer}Connection: close\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut answer = String::new();
    http.read_to_string(&mut answer).await.unwrap();
    assert!(
        answer.starts_with("HTTP/1.1 200") && answer.contains("ray_version"),
        "{answer}"
    );
    assert_eq!(forwarder.counts().opened.load(Relaxed), 1);

    // Issue 41: bytes are counted as they pass, and a connection whose
    // client hung up ends though the service keeps it alive (Kubernetes'
    // port-forward cannot tell the service).
    let counts = forwarder.counts();
    let before = counts.to_client.load(Relaxed);
    let mut kept = tokio::net::TcpStream::connect(addr).await.unwrap();
    kept.write_all(format!("GET /api/version HTTP/1.1\r\nHost: x\r\n{bearer}\r\n").as_bytes())
        .await
        .unwrap();
    assert!(read_some(&mut kept).await.starts_with("HTTP/1.1 200"));
    assert_eq!(counts.open.load(Relaxed), 1);
    assert!(
        counts.to_client.load(Relaxed) > before,
        "counted while the connection is open"
    );
    drop(kept);
    let closed = tokio::time::timeout(Duration::from_secs(30), async {
        while counts.open.load(Relaxed) > 0 {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    assert!(closed.is_ok(), "the hung-up connection is still counted open");
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

    // Ray requires its token; a raw tunnel carries what the caller sends.
    let curl = |headers: Vec<String>| {
        let url = format!("http://127.0.0.1:{port}/api/version");
        async move {
            let mut args = vec![
                "-sS".to_owned(),
                "--max-time".into(),
                "10".into(),
                "-w".into(),
                "\n%{http_code}".into(),
            ];
            for h in headers {
                args.extend(["-H".to_owned(), h]);
            }
            args.push(url);
            let out = tokio::process::Command::new("curl")
                .args(&args)
                .output()
                .await
                .expect("curl runs");
            String::from_utf8_lossy(&out.stdout).into_owned()
        }
    };
    let refused = curl(Vec::new()).await;
    assert!(
        refused.ends_with("401") && refused.contains("Missing authentication token"),
        "{refused}"
    );
    let token = ray_token(&krayne, "cli-tun").await;
    let body = curl(vec![format!("Authorization: Bearer {token}")]).await;
    assert!(body.ends_with("200") && body.contains("ray_version"), "{body}");

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
    assert!(
        stderr.contains("export RAY_AUTH_MODE=token") && stderr.contains(&format!("export RAY_AUTH_TOKEN={token}")),
        "the tunnel says how Ray's clients get the token: {stderr}"
    );
}

/// The token `krayne ray-credentials` prints for `cluster` (as shell
/// exports), registered as a secret no log may hold.
pub(crate) async fn ray_token(krayne: &Krayne, cluster: &str) -> String {
    let printed = krayne
        .run(&["ray-credentials", cluster, "-n", "ml-team"])
        .await
        .code(0)
        .stdout();
    assert!(printed.starts_with("export RAY_AUTH_MODE=token\n"), "{printed}");
    let token = printed
        .lines()
        .find_map(|l| l.strip_prefix("export RAY_AUTH_TOKEN="))
        .unwrap_or_else(|| panic!("no token in {printed}"))
        .to_owned();
    krayne_tests::register_secret(&token);
    token
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

    // ssh (a client nobody here wrote) through the ProxyCommand, logging
    // in to the head's SSH server as Krayne's bootstrap lets it: `ray`,
    // no password.
    let proxy = format!(
        "{} tunnel --stdio -n ml-team stdio-tun ssh",
        env!("CARGO_BIN_EXE_krayne")
    );
    let ssh = tokio::process::Command::new("ssh")
        .args([
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
            "-o",
            "LogLevel=ERROR",
            "ray@krayne-stdio-tun",
            "echo \"$USER\"; exit 7",
        ])
        .envs(krayne.env_vars())
        .env("XDG_CONFIG_HOME", krayne.config_home())
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(60), ssh)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (out.status.code(), String::from_utf8_lossy(&out.stdout).trim()),
        (Some(7), "ray"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Issue 41: `krayne ssh NAME -- CMD` works against the sandbox as the
/// sandbox suggests it: the head's SSH server lets `ray` in without a
/// password, runs the command in the pod's name, and passes its exit
/// status on; another user is refused by the server.
#[tokio::test]
async fn krayne_ssh_runs_a_command_on_the_sandboxs_head() {
    let env = ready("ssh-demo").await;
    let krayne = Krayne::new(&env, &env.alice());
    let run = krayne
        .run(&[
            "ssh",
            "ssh-demo",
            "-n",
            "ml-team",
            "--",
            "hostname; echo \"$USER\"; pwd",
        ])
        .await
        .code(0);
    let lines: Vec<String> = run.stdout().lines().map(str::to_owned).collect();
    let pwd = lines.get(2).cloned().unwrap_or_default();
    assert_eq!(lines.get(1).map(String::as_str), Some("ray"), "{}", run.stderr());
    assert!(pwd.contains("krayne-sandbox-home-"), "the head's home: {pwd}");
    if nix::unistd::geteuid().is_root() {
        assert!(lines[0].starts_with("ssh-demo-head-"), "the pod's host name: {lines:?}");
    }

    let failed = krayne
        .run(&["ssh", "ssh-demo", "-n", "ml-team", "--", "exit 3"])
        .await
        .code(3);
    assert!(
        failed.stderr().is_empty(),
        "ssh's own status, nothing added: {}",
        failed.stderr()
    );
    let refused = krayne
        .run(&[
            "ssh",
            "ssh-demo",
            "-n",
            "ml-team",
            "-l",
            "root",
            "--",
            "-o",
            "BatchMode=yes",
            "true",
        ])
        .await
        .code(255);
    assert!(refused.stderr().contains("Permission denied"), "{}", refused.stderr());
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
    let token = ray_token(&krayne, "bg-tun").await;
    let mut http = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let request =
        format!("GET /api/version HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n");
    http.write_all(request.as_bytes()).await.unwrap();
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

/// Issue 41: the URLs shown are usable as shown. `krayne tunnel`'s
/// notebook URL ends with the notebook's base URL (it answers there; the
/// port's root redirects there); the services list and describe carry each HTTP service's URL
/// through the server, which the SDK makes absolute and curl reaches.
#[tokio::test]
async fn the_urls_krayne_prints_answer_as_printed() {
    let env = ready("urls").await;
    let krayne = Krayne::new(&env, &env.alice());
    let mut child = krayne.spawn(&["tunnel", "urls", "notebook", "-n", "ml-team"]);
    let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
    let url = loop {
        let line = tokio::time::timeout(Duration::from_secs(20), stdout.next_line())
            .await
            .expect("the table within 20 s")
            .unwrap()
            .expect("a line");
        if let Some(at) = line.find("http://127.0.0.1:") {
            break line[at..].split_whitespace().next().unwrap().to_owned();
        }
    };
    assert!(
        url.ends_with("/v1/namespaces/ml-team/clusters/urls/services/notebook/proxy/"),
        "the notebook serves under its base URL: {url}"
    );
    let notebook = reqwest::get(&url).await.unwrap();
    assert_eq!(notebook.status(), 200, "{url}");
    // Issue 56 item 4: the port's root (and `/lab`) open the notebook as
    // they do through Krayne's port-forward: redirected under its base.
    let root = url.split("/v1/").next().unwrap().to_owned();
    let no_follow = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    for (path, under) in [("/", ""), ("/lab", "lab"), ("/tree?x=1", "tree?x=1")] {
        let answer = no_follow.get(format!("{root}{path}")).send().await.unwrap();
        assert_eq!(answer.status(), 302, "{path}");
        let location = answer.headers()["location"].to_str().unwrap().to_owned();
        assert_eq!(
            location,
            format!("/v1/namespaces/ml-team/clusters/urls/services/notebook/proxy/{under}")
        );
        let opened = reqwest::get(format!("{root}{path}")).await.unwrap();
        assert_eq!(opened.status(), 200, "{path}");
        assert!(opened.url().as_str().starts_with(&url), "{}", opened.url());
    }
    // A kernel started at the printed URL: requests under the base pass.
    let kernel = no_follow.post(format!("{url}api/kernels")).send().await.unwrap();
    assert_eq!(kernel.status(), 201);
    child.kill().await.unwrap();

    let client = Client::connect(env.url()).await.unwrap().with_token(env.alice());
    let services = client.list_services("ml-team", "urls").await.unwrap();
    let dashboard = services.iter().find(|s| s.name == "dashboard").unwrap();
    let expected = format!(
        "{}/v1/namespaces/ml-team/clusters/urls/services/dashboard/proxy/",
        env.url()
    );
    assert_eq!(dashboard.proxy_url, expected);
    assert!(
        dashboard.in_cluster_url.starts_with("http://"),
        "the in-cluster one stays"
    );
    let ssh = services.iter().find(|s| s.name == "ssh").unwrap();
    assert!(ssh.proxy_url.is_empty(), "a TCP service has no proxy");
    let details = client.describe("ml-team", "urls").await.unwrap();
    assert_eq!(details.proxy_urls.get("dashboard"), Some(&expected));
    assert!(details.proxy_urls.contains_key("notebook") && !details.proxy_urls.contains_key("ssh"));
    let version = reqwest::Client::new()
        .get(format!("{expected}api/version"))
        .bearer_auth(env.alice())
        .send()
        .await
        .unwrap();
    assert_eq!(version.status(), 200);

    let listed = krayne
        .run(&["services", "urls", "-n", "ml-team"])
        .await
        .code(0)
        .stdout();
    assert!(
        listed.contains(&expected) && listed.contains("krayne ssh urls -n ml-team"),
        "{listed}"
    );
    let described = krayne
        .run(&["describe", "urls", "-n", "ml-team"])
        .await
        .code(0)
        .stdout();
    assert!(described.contains(&expected), "{described}");
}

/// Issue 56 item 13: an interactive `krayne ssh` to the sandbox's head
/// gets a terminal, as sshd gives one: the shell prompts, `tty` names a
/// pseudo-terminal, the window's size is the client's, and `exit` ends it.
#[tokio::test(flavor = "multi_thread")]
async fn an_interactive_krayne_ssh_to_the_sandbox_gets_a_terminal() {
    let env = ready("ssh-tty").await;
    let home = tempfile::tempdir().unwrap();
    let state = home.path().display().to_string();
    let envs = [
        ("KRAYNE_SERVER", env.url()),
        ("KRAYNE_TOKEN", env.alice()),
        ("XDG_CONFIG_HOME", state.clone()),
        ("XDG_STATE_HOME", state),
    ];
    tokio::task::spawn_blocking(move || {
        let krayne = env!("CARGO_BIN_EXE_krayne");
        let mut term =
            krayne_tests::pty::Terminal::spawn(krayne, &["ssh", "ssh-tty", "-n", "ml-team"], envs, (30, 100));
        term.wait_for(&["$ "], &[]);
        term.type_keys("tty; stty size; echo \"answer $((6*7)) as $(id -u)\"\r");
        let (screen, _) = term.wait_for(&["/dev/pts/", "30 100", "answer 42 as "], &["not a tty"]);
        // As docs/sandbox.md says: never root; nobody when the sandbox is root.
        if nix::unistd::geteuid().is_root() {
            assert!(screen.contains("answer 42 as 65534"), "{screen}");
        }
        term.type_keys("exit\r");
        assert!(term.wait(), "ssh ends with the shell's status 0");
    })
    .await
    .unwrap();
}
