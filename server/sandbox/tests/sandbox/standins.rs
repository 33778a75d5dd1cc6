//! Head pods that serve: stand-ins for every declared port while the head
//! runs, gone with it — on `podIP:port`, or, for a daemon the head's
//! script binds to the pod's loopback, only from inside the pod (through
//! `pods/portforward`), as on a real node.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use krayne_sandbox::FAULT_ANNOTATION;
use kube::{
    Api, Client,
    api::{DeleteParams, ListParams, PostParams},
};
use tokio::{
    io::{AsyncReadExt as _, AsyncWriteExt as _},
    net::TcpStream,
};

use crate::{eventually, raycluster, rayclusters, start};

/// Creates cluster `name` in `ml` (every service on) and returns its head
/// pod's name and IP once it serves.
pub(crate) async fn running_head(client: &Client, name: &str) -> (String, String) {
    rayclusters(client, "ml")
        .create(
            &PostParams::default(),
            &raycluster(&format!("name: {name}\nnamespace: ml\n")),
        )
        .await
        .unwrap();
    head(client, name, None).await
}

/// The head pod of `cluster` once Running and ready, other than `not`.
pub(crate) async fn head(client: &Client, cluster: &str, not: Option<&str>) -> (String, String) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), "ml");
    let selector = format!("ray.io/cluster={cluster},ray.io/node-type=head");
    eventually("a running head pod", || {
        let pods = pods.clone();
        let selector = selector.clone();
        async move {
            let list = pods.list(&ListParams::default().labels(&selector)).await.ok()?;
            list.items.into_iter().find_map(|p| {
                let name = p.metadata.name.clone()?;
                let status = p.status?;
                let ready = status.container_statuses?.iter().all(|c| c.ready);
                let serving = status.phase.as_deref() == Some("Running") && ready && Some(name.as_str()) != not;
                serving.then_some((name, status.pod_ip?))
            })
        }
    })
    .await
}

/// Connects once the stand-in listens (they start as the pod turns ready).
async fn connect(ip: &str, port: u16) -> TcpStream {
    eventually(&format!("{ip}:{port} to accept"), || async move {
        TcpStream::connect((ip, port)).await.ok()
    })
    .await
}

/// What arrives next on `stream`, within 5 s.
pub(crate) async fn read_some(stream: &mut (impl tokio::io::AsyncRead + Unpin)) -> String {
    let mut buf = vec![0u8; 4096];
    let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf))
        .await
        .expect("an answer within 5 s")
        .unwrap();
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

/// A connection made from inside the pod, as the kubelet makes one for
/// `pods/portforward` (the pod's loopback included); the forwarder
/// lives as long as the connection is used.
async fn into_pod(
    client: &Client,
    pod: &str,
    port: u16,
) -> (
    impl tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    kube::api::Portforwarder,
) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), "ml");
    let mut forwarder = pods.portforward(pod, &[port]).await.unwrap();
    let stream = forwarder.take_stream(port).unwrap();
    (stream, forwarder)
}

/// `GET path` on `stream`, whole.
async fn get_on(mut stream: impl tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin, path: &str) -> String {
    let request = format!("GET {path} HTTP/1.1\r\nHost: head\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = String::new();
    tokio::time::timeout(Duration::from_secs(5), stream.read_to_string(&mut answer))
        .await
        .expect("an answer within 5 s")
        .unwrap();
    answer
}

/// `GET path` on the pod's loopback `port`, through a port-forward.
async fn http_get_in_pod(client: &Client, pod: &str, port: u16, path: &str) -> String {
    let (stream, _forwarder) = into_pod(client, pod, port).await;
    get_on(stream, path).await
}

async fn http_get(ip: &str, port: u16, path: &str) -> String {
    get_on(connect(ip, port).await, path).await
}

fn is_bindable(ip: &str) -> bool {
    ip.starts_with("127.")
}

#[tokio::test]
async fn every_declared_port_answers_where_its_daemon_listens() {
    let (sb, client) = start().await;
    let (pod, ip) = running_head(&client, "serves").await;
    assert!(is_bindable(&ip), "pod IPs are loopback addresses on Linux: {ip}");

    let mut ray = connect(&ip, 10001).await;
    assert!(read_some(&mut ray).await.contains("ray client"));
    ray.write_all(b"ping").await.unwrap();
    assert_eq!(read_some(&mut ray).await, "ping");

    let version = http_get(&ip, 8265, "/api/version").await;
    assert!(version.starts_with("HTTP/1.1 200"), "{version}");
    assert!(
        version.contains(r#""ray_version": "2.60.0""#),
        "Python's separators: {version}"
    );
    let dashboard = http_get(&ip, 8265, "/").await;
    assert!(dashboard.contains("fetch(\"api/version\")"), "{dashboard}");

    // Krayne's bootstrap binds Jupyter, code-server and sshd to the pod's
    // loopback: at the pod's IP nothing answers (the dashboard above
    // shows the stand-ins are up), from inside the pod they do.
    for port in [8888, 8443, 22] {
        let refused = TcpStream::connect((ip.as_str(), port)).await;
        assert!(refused.is_err(), "{ip}:{port} answered at the pod's IP");
    }
    // A real SSH server: its version line, then its key exchange offer.
    let (mut ssh, _forwarder) = into_pod(&client, &pod, 22).await;
    let mut seen = read_some(&mut ssh).await;
    assert!(seen.starts_with("SSH-2.0-"), "{seen:?}");
    ssh.write_all(b"SSH-2.0-OpenSSH_9.6 test\r\n").await.unwrap();
    while !seen.contains("ssh-ed25519") {
        seen.push_str(&read_some(&mut ssh).await);
    }
    assert!(seen.contains("curve25519-sha256"), "{seen:?}");
    assert!(
        http_get_in_pod(&client, &pod, 8888, "/lab/tree")
            .await
            .contains("Jupyter")
    );
    assert!(http_get_in_pod(&client, &pod, 8443, "/").await.contains("code-server"));

    let mut gcs = connect(&ip, 6379).await;
    gcs.write_all(b"echo").await.unwrap();
    assert_eq!(read_some(&mut gcs).await, "echo");

    let seen: Vec<(&str, u16)> = sb
        .connections()
        .iter()
        .filter(|c| c.pod == pod)
        .map(|c| (c.service, c.port))
        .collect();
    for want in [
        ("ssh", 22),
        ("client", 10001),
        ("dashboard", 8265),
        ("notebook", 8888),
        ("code-server", 8443),
    ] {
        assert!(seen.contains(&want), "{want:?} not in {seen:?}");
    }
}

#[tokio::test]
async fn a_deleted_head_closes_its_connections_and_the_new_one_serves_on_a_new_ip() {
    let (_sb, client) = start().await;
    let (pod, ip) = running_head(&client, "replaced").await;
    let mut ray = connect(&ip, 10001).await;
    assert!(read_some(&mut ray).await.contains("ray client"));

    let pods: Api<Pod> = Api::namespaced(client.clone(), "ml");
    pods.delete(&pod, &DeleteParams::default()).await.unwrap();
    let mut buf = [0u8; 16];
    let closed = tokio::time::timeout(Duration::from_secs(5), ray.read(&mut buf))
        .await
        .expect("the connection ends within 5 s");
    assert!(matches!(closed, Ok(0) | Err(_)), "{closed:?}");

    let (new_pod, new_ip) = head(&client, "replaced", Some(&pod)).await;
    assert_ne!(new_pod, pod);
    assert_ne!(new_ip, ip, "a replaced head pod gets a new IP");
    let mut again = connect(&new_ip, 10001).await;
    assert!(read_some(&mut again).await.contains("ray client"));
    assert!(
        TcpStream::connect((ip.as_str(), 10001)).await.is_err(),
        "the old IP serves nothing"
    );
}

#[tokio::test]
async fn a_crash_looping_head_refuses_connections() {
    let (sb, client) = start().await;
    let mut obj = raycluster("name: crashy\nnamespace: ml\n");
    obj.metadata.annotations = Some([(FAULT_ANNOTATION.to_owned(), "crash-loop".to_owned())].into());
    rayclusters(&client, "ml")
        .create(&PostParams::default(), &obj)
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "ml");
    let ip = eventually("the crashing head to have an IP", || {
        let pods = pods.clone();
        async move {
            let list = pods
                .list(&ListParams::default().labels("ray.io/cluster=crashy,ray.io/node-type=head"))
                .await
                .ok()?;
            list.items.into_iter().find_map(|p| p.status?.pod_ip)
        }
    })
    .await;
    assert!(is_bindable(&ip), "{ip}");
    // Long enough for stand-ins to have bound had the pod turned ready.
    tokio::time::sleep(Duration::from_millis(300)).await;
    for port in [8265, 22, 10001] {
        let refused = TcpStream::connect((ip.as_str(), port)).await;
        assert!(refused.is_err(), "{ip}:{port} accepted a connection");
    }
    assert!(sb.connections().is_empty());
}

#[tokio::test]
async fn http_stand_ins_echo_websockets_until_the_pod_goes() {
    use futures::{SinkExt as _, StreamExt as _};
    use tokio_tungstenite::tungstenite::Message;

    let (_sb, client) = start().await;
    let (pod, ip) = running_head(&client, "sockets").await;
    let mut sockets = Vec::new();
    let mut forwarders = Vec::new();
    for (port, url) in [
        (8265, format!("ws://{ip}:8265/ws")),
        (8888, "ws://head/user/alice/api/kernels/k1/channels".to_owned()),
        (8443, "ws://head/".to_owned()),
    ] {
        // The dashboard at the pod's IP; the loopback's daemons from inside.
        let stream: Box<dyn crate::Io> = if port == 8265 {
            Box::new(connect(&ip, port).await)
        } else {
            let (stream, forwarder) = into_pod(&client, &pod, port).await;
            forwarders.push(forwarder);
            Box::new(stream)
        };
        let (mut socket, _) = tokio_tungstenite::client_async(url.as_str(), stream).await.unwrap();
        socket.send(Message::text("ping")).await.unwrap();
        let echoed = tokio::time::timeout(Duration::from_secs(5), socket.next())
            .await
            .expect("an echo within 5 s")
            .unwrap()
            .unwrap();
        assert_eq!(echoed, Message::text("ping"), "{url}");
        sockets.push(socket);
    }
    let dashboard = http_get(&ip, 8265, "/").await;
    assert!(dashboard.contains("new WebSocket(new URL(\"ws\""), "{dashboard}");

    let pods: Api<Pod> = Api::namespaced(client.clone(), "ml");
    pods.delete(&pod, &DeleteParams::default()).await.unwrap();
    for mut socket in sockets {
        let end = tokio::time::timeout(Duration::from_secs(5), socket.next())
            .await
            .expect("the socket ends within 5 s");
        assert!(matches!(end, None | Some(Ok(Message::Close(_)) | Err(_))), "{end:?}");
    }
}

/// The head container's environment variable `name` set to `value`.
fn with_head_env(mut obj: kube::api::DynamicObject, name: &str, value: &str) -> kube::api::DynamicObject {
    let container = &mut obj.data["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0];
    let env = container["env"].as_array().cloned().unwrap_or_default();
    let mut env: Vec<serde_json::Value> = env.into_iter().filter(|e| e["name"] != name).collect();
    env.push(serde_json::json!({"name": name, "value": value}));
    container["env"] = serde_json::Value::Array(env);
    obj
}

#[tokio::test]
async fn the_notebook_serves_under_the_base_url_its_cluster_gives_it() {
    use futures::{SinkExt as _, StreamExt as _};
    use tokio_tungstenite::tungstenite::Message;

    let (_sb, client) = start().await;
    let base = "/v1/namespaces/ml/clusters/nb/services/notebook/proxy/";
    let obj = with_head_env(
        raycluster("name: nb\nnamespace: ml\n"),
        "KRAYNE_NOTEBOOK_BASE_URL",
        base,
    );
    rayclusters(&client, "ml")
        .create(&PostParams::default(), &obj)
        .await
        .unwrap();
    let (pod, _) = head(&client, "nb", None).await;

    let bare = http_get_in_pod(&client, &pod, 8888, base.trim_end_matches('/')).await;
    assert!(bare.starts_with("HTTP/1.1 302"), "{bare}");
    assert!(bare.contains(&format!("location: {base}tree\r\n")), "{bare}");
    let page = http_get_in_pod(&client, &pod, 8888, &format!("{base}tree")).await;
    assert!(page.starts_with("HTTP/1.1 200"), "{page}");
    assert!(
        page.contains(&format!("\"baseUrl\":\"{base}\"")),
        "the page builds its URLs from the base: {page}"
    );
    let api = http_get_in_pod(&client, &pod, 8888, &format!("{base}api")).await;
    assert!(api.contains("\"version\""), "{api}");
    let outside = http_get_in_pod(&client, &pod, 8888, "/tree").await;
    assert!(outside.starts_with("HTTP/1.1 404"), "{outside}");

    let (stream, _forwarder) = into_pod(&client, &pod, 8888).await;
    let url = format!("ws://head{base}api/kernels/k1/channels");
    let (mut socket, _) = tokio_tungstenite::client_async(url.as_str(), stream).await.unwrap();
    socket.send(Message::text("execute")).await.unwrap();
    let echoed = tokio::time::timeout(Duration::from_secs(5), socket.next())
        .await
        .unwrap();
    assert_eq!(echoed.unwrap().unwrap(), Message::text("execute"));
}

#[tokio::test]
async fn a_port_that_cannot_be_bound_is_still_served_through_port_forward() {
    // Another program holds the port on every address, so the stand-in
    // cannot bind it on the pod IP.
    let squatter = std::net::TcpListener::bind("0.0.0.0:0").unwrap();
    let port = squatter.local_addr().unwrap().port();
    squatter.set_nonblocking(true).unwrap();

    let (sb, client) = start().await;
    let mut obj = raycluster("name: squatted\nnamespace: ml\n");
    let ports = &mut obj.data["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["ports"];
    let mut list = ports.as_array().cloned().unwrap_or_default();
    list.push(serde_json::json!({"containerPort": port, "name": "custom"}));
    *ports = serde_json::Value::Array(list);
    rayclusters(&client, "ml")
        .create(&PostParams::default(), &obj)
        .await
        .unwrap();
    let (pod, _) = head(&client, "squatted", None).await;

    let pods: Api<Pod> = Api::namespaced(client.clone(), "ml");
    let mut forwarder = pods.portforward(&pod, &[port]).await.unwrap();
    let mut stream = forwarder.take_stream(port).unwrap();
    stream.write_all(b"through the pod").await.unwrap();
    assert_eq!(read_some(&mut stream).await, "through the pod");
    assert!(squatter.accept().is_err(), "nothing reached the other program");
    let record = sb
        .connections()
        .into_iter()
        .find(|c| c.port == port)
        .expect("the connection is recorded");
    assert_eq!((record.service, record.peer), ("echo", None));
    let (_, ip) = head(&client, "squatted", None).await;
    let mut direct = TcpStream::connect((ip.as_str(), port)).await.unwrap();
    direct.write_all(b"x").await.unwrap();
    let (_accepted, _) = eventually("the other program to get the direct connection", || async {
        squatter.accept().ok()
    })
    .await;
}

/// Whether this machine can give a head namespaces of its own (root,
/// `setpriv`, `unshare`, `ip`, `socat`, `useradd`); CI must.
#[expect(clippy::print_stderr, reason = "a skipped test says so")]
fn namespaces_here() -> bool {
    let tools = ["setpriv", "unshare", "ip", "socat", "useradd"].iter().all(|t| {
        std::process::Command::new("sh")
            .args(["-c", &format!("command -v {t}")])
            .output()
            .is_ok_and(|o| o.status.success())
    });
    let works = tools
        && std::process::Command::new("unshare")
            .args(["--mount", "--net", "--pid", "--uts", "--fork", "true"])
            .status()
            .is_ok_and(|s| s.success());
    if !works {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI needs working namespaces (.ci/run runs as root)"
        );
        eprintln!("SKIPPED: no namespaces for real daemons here");
    }
    works
}

/// A head's own script, run for real, as the Ray images' user on a host
/// named as the pod: it reaches the pod's loopback only (the port-forward
/// answers from inside, the pod's IP refuses), and it cannot write to this
/// machine's files, not even a world-writable directory or `/dev/shm` (its
/// `/tmp` and `/run` are the pod's).
#[tokio::test]
async fn a_heads_real_script_runs_in_the_pod_and_cannot_touch_the_machine() {
    if !namespaces_here() {
        return;
    }
    // Places the pod's user could write to, were they the machine's: a
    // world-writable directory outside the pod's own (its /tmp and /run
    // are its own), and the machine's /dev/shm.
    let open_dir =
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("krayne-open-{}", std::process::id()));
    std::fs::create_dir_all(&open_dir).unwrap();
    std::fs::set_permissions(&open_dir, std::os::unix::fs::PermissionsExt::from_mode(0o1777)).unwrap();
    let escape = open_dir.join("escaped");
    let shm = std::path::PathBuf::from(format!("/dev/shm/krayne-sandbox-escape-{}", std::process::id()));
    let mut options = krayne_sandbox::SandboxOptions::fast();
    options.real_daemons = Some(krayne_sandbox::RealDaemons::default());
    let (_sb, client) = crate::start_with(options).await;
    let mut obj = raycluster("name: real\nnamespace: ml\n");
    // A daemon on the pod's loopback (as code-server's flag says), and a
    // write outside the pod's run directory.
    let script = format!(
        "touch {escape} {shm}\nsocat TCP-LISTEN:8443,bind=127.0.0.1,reuseaddr,fork SYSTEM:'echo from inside $(id -un)@$(hostname); grep CapBnd /proc/self/status' & # --bind-addr 127.0.0.1:8443",
        escape = escape.display(),
        shm = shm.display()
    );
    obj.data["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["lifecycle"]["postStart"]["exec"]["command"] =
        serde_json::json!(["/bin/sh", "-c", script]);
    rayclusters(&client, "ml")
        .create(&PostParams::default(), &obj)
        .await
        .unwrap();
    let (pod, ip) = head(&client, "real", None).await;
    let answer = eventually("the daemon to answer from inside the pod", || {
        let client = client.clone();
        let pod = pod.clone();
        async move {
            let (mut stream, _forwarder) = into_pod(&client, &pod, 8443).await;
            let mut text = String::new();
            let _ = tokio::time::timeout(Duration::from_secs(2), stream.read_to_string(&mut text)).await;
            text.contains("from inside").then_some(text)
        }
    })
    .await;
    let mut lines = answer.lines();
    assert_eq!(lines.next().unwrap_or_default(), format!("from inside ray@{pod}"));
    // Reliability 29c (issue 53, item 3): not even root inside (the head
    // image's sudo) can remount the machine's files writable, make a
    // device node or load a module.
    let bounding = lines
        .next()
        .and_then(|l| l.strip_prefix("CapBnd:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .unwrap_or_else(|| panic!("{answer}"));
    for (name, bit) in [
        ("sys_admin", 21),
        ("mknod", 27),
        ("sys_module", 16),
        ("dac_read_search", 2),
        ("sys_ptrace", 19),
    ] {
        assert_eq!(bounding & (1 << bit), 0, "{name} is in the bounding set {bounding:#x}");
    }
    assert_ne!(bounding & (1 << 7), 0, "setuid stays (sudo, sshd)");
    assert!(
        TcpStream::connect((ip.as_str(), 8443)).await.is_err(),
        "the pod's IP answered"
    );
    assert!(!escape.exists(), "the script wrote {}", escape.display());
    assert!(!shm.exists(), "the script wrote {}", shm.display());
}
