//! `pods/portforward` with kube-rs's `Api::<Pod>::portforward`, unchanged:
//! every stand-in through it, a 10 MiB round trip, a port with no
//! listener, a pod that is not running, a missing pod, and RBAC.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::{Api, api::PostParams};
use sha2::{Digest as _, Sha256};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use crate::{
    raycluster, rayclusters,
    standins::{head, read_some},
    start,
};

/// The error of a port-forward that must fail.
async fn refused(pods: &Api<Pod>, pod: &str) -> String {
    match pods.portforward(pod, &[22]).await {
        Ok(_) => panic!("port-forward to {pod} was accepted"),
        Err(e) => e.to_string(),
    }
}

#[tokio::test]
async fn kube_rs_forwards_to_every_stand_in() {
    let (sb, client) = start().await;
    rayclusters(&client, "ml")
        .create(&PostParams::default(), &raycluster("name: pf\nnamespace: ml\n"))
        .await
        .unwrap();
    let (pod, _) = head(&client, "pf", None).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "ml");

    let mut forwarder = pods.portforward(&pod, &[22, 8265, 10001]).await.unwrap();
    let mut ssh = forwarder.take_stream(22).unwrap();
    assert!(read_some(&mut ssh).await.starts_with("SSH-2.0-"));
    let mut ray = forwarder.take_stream(10001).unwrap();
    assert!(read_some(&mut ray).await.contains("ray client"));
    let mut dashboard = forwarder.take_stream(8265).unwrap();
    // No EOF comes through: the v4 protocol cannot close one port's stream.
    dashboard
        .write_all(b"GET /api/version HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut answer = String::new();
    while !answer.ends_with('}') {
        answer.push_str(&read_some(&mut dashboard).await);
    }
    assert!(
        answer.starts_with("HTTP/1.1 200") && answer.contains("ray_version"),
        "{answer}"
    );

    // 10 MiB through the Ray client's echo at full duplex (writing while
    // the echo comes back), compared by sha256.
    let payload: Vec<u8> = (0..10 * 1024 * 1024)
        .map(|i: u32| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    let (mut reader, mut writer) = tokio::io::split(ray);
    let sent = payload.clone();
    let send = tokio::spawn(async move {
        writer.write_all(&sent).await.unwrap();
        writer
    });
    let mut echoed = vec![0u8; payload.len()];
    tokio::time::timeout(Duration::from_secs(60), reader.read_exact(&mut echoed))
        .await
        .expect("10 MiB back within 60 s")
        .unwrap();
    let writer = send.await.unwrap();
    assert_eq!(Sha256::digest(&echoed), Sha256::digest(&payload));
    drop((reader, writer, ssh, dashboard));
    forwarder.abort();

    let connections: Vec<_> = sb.connections().into_iter().filter(|c| c.pod == pod).collect();
    assert!(connections.iter().any(|c| c.service == "ssh"), "{connections:?}");
}

#[tokio::test]
async fn a_port_with_no_listener_gets_an_error_on_its_error_channel() {
    let (_sb, client) = start().await;
    rayclusters(&client, "ml")
        .create(&PostParams::default(), &raycluster("name: nolisten\nnamespace: ml\n"))
        .await
        .unwrap();
    let (pod, _) = head(&client, "nolisten", None).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "ml");
    let mut forwarder = pods.portforward(&pod, &[9999]).await.unwrap();
    let error = tokio::time::timeout(Duration::from_secs(5), forwarder.take_error(9999).unwrap())
        .await
        .expect("an error within 5 s");
    assert!(error.unwrap_or_default().contains("error forwarding port 9999"));
}

#[tokio::test]
async fn refusals_come_as_kubernetes_statuses() {
    let (sb, client) = start().await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "ml");
    let missing = refused(&pods, "nope").await;
    assert!(missing.contains("404") || missing.contains("not found"), "{missing}");

    rayclusters(&client, "ml")
        .create(
            &PostParams::default(),
            &raycluster("name: big\nnamespace: ml\nhead: {cpus: 500}\n"),
        )
        .await
        .unwrap();
    let pending = crate::eventually("the unschedulable head pod", || {
        let pods = pods.clone();
        async move {
            let list = pods
                .list(&kube::api::ListParams::default().labels("ray.io/cluster=big"))
                .await
                .ok()?;
            list.items.into_iter().find_map(|p| p.metadata.name)
        }
    })
    .await;
    let not_running = refused(&pods, &pending).await;
    assert!(not_running.contains("not running"), "{not_running}");

    sb.forbid("create", "pods/portforward");
    let (pod, _) = {
        rayclusters(&client, "ml")
            .create(&PostParams::default(), &raycluster("name: rbac\nnamespace: ml\n"))
            .await
            .unwrap();
        head(&client, "rbac", None).await
    };
    let forbidden = refused(&pods, &pod).await;
    assert!(
        forbidden.contains("403") || forbidden.contains("forbidden"),
        "{forbidden}"
    );
}

/// A WebSocket port-forward is a GET: `get` on `pods/portforward` as
/// Kubernetes up to 1.34 checks it, and `create` as 1.35+ checks it too.
#[tokio::test]
async fn a_websocket_port_forward_needs_get_as_well_as_create() {
    let (sb, client) = start().await;
    sb.forbid("get", "pods/portforward");
    rayclusters(&client, "ml")
        .create(
            &PostParams::default(),
            &raycluster(
                "name: getter
namespace: ml
",
            ),
        )
        .await
        .unwrap();
    let (pod, _) = head(&client, "getter", None).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "ml");
    let forbidden = refused(&pods, &pod).await;
    assert!(
        forbidden.contains("403") || forbidden.contains("forbidden"),
        "{forbidden}"
    );
}

#[tokio::test]
async fn one_port_closing_leaves_the_others_open() {
    let (_sb, client) = start().await;
    rayclusters(&client, "ml")
        .create(&PostParams::default(), &raycluster("name: halfopen\nnamespace: ml\n"))
        .await
        .unwrap();
    let (pod, _) = head(&client, "halfopen", None).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "ml");
    let mut forwarder = pods.portforward(&pod, &[8265, 10001]).await.unwrap();
    let mut ray = forwarder.take_stream(10001).unwrap();
    assert!(read_some(&mut ray).await.contains("ray client"));
    let mut dashboard = forwarder.take_stream(8265).unwrap();
    dashboard
        .write_all(b"GET /api/version HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut answer = String::new();
    while !answer.ends_with('}') {
        answer.push_str(&read_some(&mut dashboard).await);
    }
    // The dashboard closed its side; writing to it again goes nowhere,
    // and the Ray client keeps echoing.
    // (Twice, apart: the second write to the closed socket is the one
    // the sandbox sees fail.)
    for _ in 0..2 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        dashboard.write_all(b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    ray.write_all(b"still here").await.unwrap();
    assert_eq!(read_some(&mut ray).await, "still here");
    forwarder.abort();
}

#[tokio::test]
async fn websockets_and_pages_cross_a_forward_which_ends_with_its_head() {
    use futures::{SinkExt as _, StreamExt as _};
    use tokio_tungstenite::tungstenite::Message;

    let (_sb, client) = start().await;
    rayclusters(&client, "ml")
        .create(&PostParams::default(), &raycluster("name: pfws\nnamespace: ml\n"))
        .await
        .unwrap();
    let (pod, _) = head(&client, "pfws", None).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "ml");
    let mut forwarder = pods.portforward(&pod, &[8265, 8888, 8443, 22]).await.unwrap();
    let mut sockets = Vec::new();
    for (port, path) in [(8265, "/ws"), (8888, "/api/kernels/k1/channels"), (8443, "/")] {
        let stream = forwarder.take_stream(port).unwrap();
        let url = format!("ws://{pod}:{port}{path}");
        let (mut socket, _) = tokio_tungstenite::client_async(url.as_str(), stream).await.unwrap();
        socket.send(Message::text("through the forward")).await.unwrap();
        let echoed = tokio::time::timeout(Duration::from_secs(5), socket.next())
            .await
            .unwrap();
        assert_eq!(echoed.unwrap().unwrap(), Message::text("through the forward"), "{url}");
        sockets.push(socket);
    }
    let mut ssh = forwarder.take_stream(22).unwrap();
    assert!(read_some(&mut ssh).await.starts_with("SSH-2.0-"));

    pods.delete(&pod, &kube::api::DeleteParams::default()).await.unwrap();
    for mut socket in sockets {
        let end = tokio::time::timeout(Duration::from_secs(5), socket.next())
            .await
            .expect("the WebSocket ends within 5 s of the pod");
        assert!(
            !matches!(end, Some(Ok(Message::Text(_) | Message::Binary(_)))),
            "{end:?}"
        );
    }
    let mut buf = [0u8; 16];
    let end = tokio::time::timeout(Duration::from_secs(5), ssh.read(&mut buf))
        .await
        .expect("the forwarded connection ends within 5 s of the pod");
    assert!(matches!(end, Ok(0) | Err(_)), "{end:?}");
}

/// One HTTP/1.1 exchange with `pod`'s dashboard through a forward of its
/// own (the answer's end closes the forward).
async fn through_forward(pods: &Api<Pod>, pod: &str, method: &str, path: &str, body: &str) -> String {
    let mut forwarder = pods.portforward(pod, &[8265]).await.unwrap();
    let mut stream = forwarder.take_stream(8265).unwrap();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: pod\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = String::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_string(&mut answer))
        .await
        .expect("an answer within 10 s")
        .unwrap();
    answer
}

#[tokio::test]
async fn a_ray_job_is_submitted_and_read_through_a_forward() {
    let (_sb, client) = start().await;
    rayclusters(&client, "ml")
        .create(&PostParams::default(), &raycluster("name: pfjob\nnamespace: ml\n"))
        .await
        .unwrap();
    let (pod, _) = head(&client, "pfjob", None).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "ml");
    let job = r#"{"entrypoint": "echo via-forward", "submission_id": "pf-1"}"#;
    let submitted = through_forward(&pods, &pod, "POST", "/api/jobs/", job).await;
    assert!(submitted.starts_with("HTTP/1.1 200"), "{submitted}");
    assert!(
        submitted.ends_with(r#"{"job_id": "pf-1", "submission_id": "pf-1"}"#),
        "{submitted}"
    );
    let done = crate::eventually("the job to succeed", || {
        let pods = pods.clone();
        let pod = pod.clone();
        async move {
            let job = through_forward(&pods, &pod, "GET", "/api/jobs/pf-1", "").await;
            job.contains(r#""status": "SUCCEEDED""#).then_some(job)
        }
    })
    .await;
    assert!(done.contains(r#""driver_exit_code": 0"#), "{done}");
    let logs = through_forward(&pods, &pod, "GET", "/api/jobs/pf-1/logs", "").await;
    assert!(logs.contains("via-forward"), "{logs}");
}
